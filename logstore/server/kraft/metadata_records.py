"""The metadata records the controller writes, at the versions Kafka 4.0 writes them at its
default metadata.version (4.0-IV3, feature level 25): RegisterBrokerRecord v3, PartitionRecord and
PartitionChangeRecord v2 (ELR-capable: the ELR fields stay absent while they are empty, as
they do while `eligible.leader.replicas.version` is off), BrokerRegistrationChangeRecord v2 for fencing and controlled shutdown, FeatureLevelRecord v0, and the
bootstrap records a new cluster's first controller appends (in a metadata transaction).

A record is (schema name, version, fields by Kafka's JSON name), the form
`internal_topics.encode_metadata_record` and `build_snapshot` take.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

MetadataRecord = tuple[str, int, dict]

METADATA_VERSION = "metadata.version"
METADATA_VERSION_LEVEL = 25  # 4.0-IV3, Kafka 4.0's latest production metadata.version
# The features `kafka-storage format` finalises on a 4.0 cluster besides metadata.version
# (kraft.version lives in KRaft control records, not here).
BOOTSTRAP_FEATURES = {"group.version": 1, "transaction.version": 2}
REGISTER_BROKER_VERSION = 3
PARTITION_VERSION = 2
PARTITION_CHANGE_VERSION = 2
MIN_METADATA_VERSION = 7  # 3.3-IV3, the oldest metadata.version Kafka 4.0 brokers run
# The feature ranges a Kafka 4.0 broker registers with.
SUPPORTED_FEATURES = {"metadata.version": (MIN_METADATA_VERSION, METADATA_VERSION_LEVEL),
                      "kraft.version": (0, 1), "group.version": (0, 1), "transaction.version": (0, 2),
                      "eligible.leader.replicas.version": (0, 1)}
# BrokerRegistrationChangeRecord v2 (Kafka 4.0's: v1 added InControlledShutdown, v2 LogDirs).
REGISTRATION_CHANGE_VERSION = 2
# BrokerRegistrationChangeRecord.Fenced: BrokerRegistrationFencingChange's values.
FENCE, UNFENCE = 1, -1
IN_CONTROLLED_SHUTDOWN = 1  # BrokerRegistrationInControlledShutdownChange.IN_CONTROLLED_SHUTDOWN
NO_LEADER = -1
NO_LEADER_CHANGE = -2  # PartitionChangeRecord.Leader's default: the leader stays
NO_RECOVERY_STATE_CHANGE = -1  # PartitionChangeRecord.LeaderRecoveryState's default
RECOVERED, RECOVERING = 0, 1  # LeaderRecoveryState: RECOVERING after an unclean election
# KIP-966's feature: level 1 turns eligible leader replicas on. Kafka 4.0 leaves it at 0 (off)
# on a new cluster (its latest production level came with 4.1), so the bootstrap records do too.
ELIGIBLE_LEADER_REPLICAS_VERSION = "eligible.leader.replicas.version"
SECURITY_PROTOCOL_PLAINTEXT = 0


def feature_level(name: str, level: int) -> MetadataRecord:
    return "FeatureLevelRecord", 0, {"name": name, "featureLevel": level}


def bootstrap_records() -> list[MetadataRecord]:
    """What the first active controller of an empty log appends (ActivationRecordsGenerator):
    the bootstrap feature levels inside a metadata transaction."""
    features = [feature_level(METADATA_VERSION, METADATA_VERSION_LEVEL)]
    features += [feature_level(name, level) for name, level in sorted(BOOTSTRAP_FEATURES.items())]
    return [("BeginTransactionRecord", 0, {"name": "Bootstrap records"}), *features,
            ("EndTransactionRecord", 0, {})]


def register_broker(broker_id: int, broker_epoch: int, incarnation_id: uuid.UUID,
                    endpoints: Sequence[Mapping], features: Sequence[Mapping], rack: str | None,
                    log_dirs: Sequence[uuid.UUID]) -> MetadataRecord:
    """A broker's registration: fenced until its heartbeats show it caught up."""
    return "RegisterBrokerRecord", REGISTER_BROKER_VERSION, {
        "brokerId": broker_id, "isMigratingZkBroker": False, "incarnationId": incarnation_id,
        "brokerEpoch": broker_epoch, "endPoints": [dict(e) for e in endpoints],
        "features": [dict(f) for f in features], "rack": rack, "fenced": True,
        "inControlledShutdown": False, "logDirs": list(log_dirs)}


def fencing_change(broker_id: int, broker_epoch: int, change: int) -> MetadataRecord:
    """Fence (FENCE) or unfence (UNFENCE) the broker's current registration."""
    return "BrokerRegistrationChangeRecord", REGISTRATION_CHANGE_VERSION, {
        "brokerId": broker_id, "brokerEpoch": broker_epoch, "fenced": change}


def controlled_shutdown_change(broker_id: int, broker_epoch: int) -> MetadataRecord:
    """The broker's current registration enters controlled shutdown (it asked to stop)."""
    return "BrokerRegistrationChangeRecord", REGISTRATION_CHANGE_VERSION, {
        "brokerId": broker_id, "brokerEpoch": broker_epoch, "inControlledShutdown": IN_CONTROLLED_SHUTDOWN}


def topic(name: str, topic_id: uuid.UUID) -> MetadataRecord:
    return "TopicRecord", 0, {"name": name, "topicId": topic_id}


def partition(topic_id: uuid.UUID, partition_id: int, replicas: Sequence[int], isr: Sequence[int],
              leader: int, directories: Sequence[uuid.UUID]) -> MetadataRecord:
    """A new partition: leader epoch and partition epoch 0."""
    return "PartitionRecord", PARTITION_VERSION, {
        "partitionId": partition_id, "topicId": topic_id, "replicas": list(replicas), "isr": list(isr),
        "removingReplicas": [], "addingReplicas": [], "leader": leader, "leaderRecoveryState": 0,
        "leaderEpoch": 0, "partitionEpoch": 0, "directories": list(directories)}


def partition_change(topic_id: uuid.UUID, partition_id: int, *, isr: Sequence[int] | None = None,
                     leader: int = NO_LEADER_CHANGE, elr: Sequence[int] | None = None,
                     last_known_elr: Sequence[int] | None = None,
                     leader_recovery_state: int = NO_RECOVERY_STATE_CHANGE) -> MetadataRecord:
    """A change of ISR, leader, eligible leader replicas, last-known ELR and/or leader recovery
    state; fields left out (None, or the NO_..._CHANGE values) keep their value."""
    fields: dict = {"partitionId": partition_id, "topicId": topic_id, "leader": leader}
    for name, value in (("isr", isr), ("eligibleLeaderReplicas", elr), ("lastKnownElr", last_known_elr)):
        if value is not None:
            fields[name] = list(value)
    if leader_recovery_state != NO_RECOVERY_STATE_CHANGE:
        fields["leaderRecoveryState"] = leader_recovery_state
    return "PartitionChangeRecord", PARTITION_CHANGE_VERSION, fields

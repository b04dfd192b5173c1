"""The cluster's metadata as replaying `__cluster_metadata` builds it (Kafka's MetadataImage,
reduced to what logstore uses): finalized features, registered brokers (their epochs and
fencing kept in the cluster-level BrokerRegistry), topics and their partitions, topic configs.

Replay is the one way the image changes, on the controller and on every broker alike, so a
broker that fetched the log up to an offset holds what the controller held there.
`snapshot_records` writes the image back as the records a snapshot holds; replaying them
into an empty image gives the same image.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from logstore.clean_shutdown import NO_BROKER_EPOCH
from logstore.errors import CorruptRecordError
from logstore.replication.brokers import BrokerRegistry
from logstore.server.kraft.metadata_records import (
    ELIGIBLE_LEADER_REPLICAS_VERSION,
    FENCE,
    IN_CONTROLLED_SHUTDOWN,
    NO_LEADER_CHANGE,
    PARTITION_VERSION,
    REGISTER_BROKER_VERSION,
    UNFENCE,
    MetadataRecord,
    feature_level,
)

# Records that change nothing logstore models; replayed as Kafka replays them (no effect here).
_NO_EFFECT = frozenset({"BeginTransactionRecord", "EndTransactionRecord", "AbortTransactionRecord",
                        "NoOpRecord", "ZkMigrationStateRecord"})


@dataclass
class BrokerInfo:
    """A registered broker as its RegisterBrokerRecord describes it (fencing: the registry)."""

    broker_id: int
    broker_epoch: int
    incarnation_id: uuid.UUID
    endpoints: list[dict]
    features: list[dict]
    rack: str | None
    log_dirs: list[uuid.UUID]
    in_controlled_shutdown: bool = False


@dataclass
class PartitionInfo:
    """One partition's replicas, ISR, leader and epochs (PartitionRecord's fields)."""

    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int
    partition_epoch: int
    directories: list[uuid.UUID]
    leader_recovery_state: int = 0
    elr: list[int] = field(default_factory=list)  # eligible leader replicas (KIP-966)
    last_known_elr: list[int] = field(default_factory=list)


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)


class MetadataImage:
    """Features, brokers, topics and configs, built by replaying metadata records in order."""

    def __init__(self, registry: BrokerRegistry | None = None) -> None:
        self.registry = registry if registry is not None else BrokerRegistry()
        self.features: dict[str, int] = {}
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[uuid.UUID, TopicInfo] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.configs: dict[tuple[int, str], dict[str, str]] = {}
        self.producer_ids: dict | None = None  # the last ProducerIdsRecord: the next block starts at its nextProducerId
        self.kept: dict[str, list[MetadataRecord]] = {}  # records of kinds logstore does not model

    def topic(self, name: str) -> TopicInfo | None:
        topic_id = self.topic_ids.get(name)
        return None if topic_id is None else self.topics[topic_id]

    @property
    def next_producer_id(self) -> int:
        """The first producer id of the next block the controller hands out."""
        return 0 if self.producer_ids is None else self.producer_ids["nextProducerId"]

    def unfenced_brokers(self) -> list[int]:
        return sorted(b for b in self.brokers if not self.registry.is_fenced(b))

    @property
    def eligible_leader_replicas_enabled(self) -> bool:
        """Whether the finalized `eligible.leader.replicas.version` turns KIP-966 on (level 1+)."""
        return self.features.get(ELIGIBLE_LEADER_REPLICAS_VERSION, 0) >= 1

    def replay(self, name: str, version: int, fields: dict) -> None:
        """Apply one record. Raises CorruptRecordError for a record naming what does not
        exist (a partition of an unknown topic, a fencing change of an old registration)."""
        handler = _REPLAY.get(name)
        if handler is not None:
            handler(self, fields)
        elif name not in _NO_EFFECT:
            self.kept.setdefault(name, []).append((name, version, fields))

    def _feature(self, f: dict) -> None:
        if f["featureLevel"] == 0:
            self.features.pop(f["name"], None)
        else:
            self.features[f["name"]] = f["featureLevel"]

    def _register(self, f: dict) -> None:
        broker_id, epoch = f["brokerId"], f["brokerEpoch"]
        known = self.registry.registration(broker_id)
        self.registry.register(broker_id, NO_BROKER_EPOCH if known is None else known.broker_epoch, broker_epoch=epoch)
        if f["fenced"]:
            self.registry.fence(broker_id)
        self.brokers[broker_id] = BrokerInfo(broker_id, epoch, f["incarnationId"], list(f["endPoints"]),
                                             list(f["features"]), f["rack"], list(f.get("logDirs") or []),
                                             bool(f.get("inControlledShutdown")))

    def _fencing(self, broker_id: int, epoch: int, change: int) -> None:
        info = self.brokers.get(broker_id)
        if info is None or info.broker_epoch != epoch:
            raise CorruptRecordError(f"fencing change for broker {broker_id} epoch {epoch}, "
                                     "which is not its current registration")
        if change == FENCE:
            self.registry.fence(broker_id)
        elif change == UNFENCE:
            self.registry.unfence(broker_id, epoch)

    def _registration_change(self, f: dict) -> None:
        self._fencing(f["brokerId"], f["brokerEpoch"], f["fenced"])
        if f.get("inControlledShutdown") == IN_CONTROLLED_SHUTDOWN:
            self.brokers[f["brokerId"]].in_controlled_shutdown = True

    def _unregister(self, f: dict) -> None:
        self.brokers.pop(f["brokerId"], None)
        self.registry.fence(f["brokerId"])

    def _topic(self, f: dict) -> None:
        self.topics[f["topicId"]] = TopicInfo(f["name"], f["topicId"])
        self.topic_ids[f["name"]] = f["topicId"]

    def _remove_topic(self, f: dict) -> None:
        info = self.topics.pop(f["topicId"], None)
        if info is not None:
            self.topic_ids.pop(info.name, None)
            self.configs.pop((TOPIC_RESOURCE, info.name), None)

    def _partition(self, f: dict) -> None:
        self._topic_of(f).partitions[f["partitionId"]] = PartitionInfo(
            list(f["replicas"]), list(f["isr"]), f["leader"], f["leaderEpoch"], f["partitionEpoch"],
            list(f.get("directories") or []), f["leaderRecoveryState"], list(f.get("eligibleLeaderReplicas") or []),
            list(f.get("lastKnownElr") or []))

    def _partition_change(self, f: dict) -> None:
        info = self._topic_of(f).partitions.get(f["partitionId"])
        if info is None:
            raise CorruptRecordError(f"PartitionChangeRecord for unknown partition {f['partitionId']}")
        if f["isr"] is not None:
            info.isr = list(f["isr"])
        if f["replicas"] is not None:
            info.replicas = list(f["replicas"])
        if f.get("directories") is not None:
            info.directories = list(f["directories"])
        if f.get("eligibleLeaderReplicas") is not None:
            info.elr = list(f["eligibleLeaderReplicas"])
        if f.get("lastKnownElr") is not None:
            info.last_known_elr = list(f["lastKnownElr"])
        if f["leaderRecoveryState"] != -1:
            info.leader_recovery_state = f["leaderRecoveryState"]
        if f["leader"] != NO_LEADER_CHANGE:
            info.leader = f["leader"]
            info.leader_epoch += 1
        info.partition_epoch += 1

    def _topic_of(self, f: dict) -> TopicInfo:
        info = self.topics.get(f["topicId"])
        if info is None:
            raise CorruptRecordError(f"partition record for unknown topic id {f['topicId']}")
        return info

    def _config(self, f: dict) -> None:
        configs = self.configs.setdefault((f["resourceType"], f["resourceName"]), {})
        if f["value"] is None:
            configs.pop(f["name"], None)
        else:
            configs[f["name"]] = f["value"]

    def snapshot_records(self) -> list[MetadataRecord]:
        """The image as a snapshot's records: features, brokers, topics with their partitions,
        configs, then the kinds kept as they came."""
        records = [feature_level(name, level) for name, level in sorted(
            self.features.items(), key=lambda item: (item[0] != "metadata.version", item[0]))]
        for broker_id, info in sorted(self.brokers.items()):
            records.append(("RegisterBrokerRecord", REGISTER_BROKER_VERSION, {
                "brokerId": broker_id, "isMigratingZkBroker": False, "incarnationId": info.incarnation_id,
                "brokerEpoch": info.broker_epoch, "endPoints": info.endpoints, "features": info.features,
                "rack": info.rack, "fenced": self.registry.is_fenced(broker_id),
                "inControlledShutdown": info.in_controlled_shutdown, "logDirs": info.log_dirs}))
        for info in sorted(self.topics.values(), key=lambda t: t.name):
            records.append(("TopicRecord", 0, {"name": info.name, "topicId": info.topic_id}))
            for partition_id, p in sorted(info.partitions.items()):
                records.append(("PartitionRecord", PARTITION_VERSION, {
                    "partitionId": partition_id, "topicId": info.topic_id, "replicas": p.replicas, "isr": p.isr,
                    "removingReplicas": [], "addingReplicas": [], "leader": p.leader,
                    "leaderRecoveryState": p.leader_recovery_state, "leaderEpoch": p.leader_epoch,
                    "partitionEpoch": p.partition_epoch, "directories": p.directories,
                    # as Kafka's PartitionRegistration.toRecord: the tagged ELR fields only when not empty
                    "eligibleLeaderReplicas": p.elr or None, "lastKnownElr": p.last_known_elr or None}))
        for (resource_type, resource_name), configs in sorted(self.configs.items()):
            records += [("ConfigRecord", 0, {"resourceType": resource_type, "resourceName": resource_name,
                                             "name": key, "value": value}) for key, value in sorted(configs.items())]
        if self.producer_ids is not None:
            records.append(("ProducerIdsRecord", 0, self.producer_ids))
        for kept in self.kept.values():
            records += kept
        return records


TOPIC_RESOURCE = 2  # ConfigResource.Type.TOPIC

_REPLAY = {
    "FeatureLevelRecord": MetadataImage._feature,
    "RegisterBrokerRecord": MetadataImage._register,
    "BrokerRegistrationChangeRecord": MetadataImage._registration_change,
    "FenceBrokerRecord": lambda image, f: image._fencing(f["id"], f["epoch"], FENCE),
    "UnfenceBrokerRecord": lambda image, f: image._fencing(f["id"], f["epoch"], UNFENCE),
    "UnregisterBrokerRecord": MetadataImage._unregister,
    "TopicRecord": MetadataImage._topic,
    "RemoveTopicRecord": MetadataImage._remove_topic,
    "PartitionRecord": MetadataImage._partition,
    "PartitionChangeRecord": MetadataImage._partition_change,
    "ConfigRecord": MetadataImage._config,
    "ProducerIdsRecord": lambda image, f: setattr(image, "producer_ids", dict(f)),
}

"""The KRaft record types of __cluster_metadata (Kafka 4.0), its control records, and the
consumer protocol's subscription and assignment, as tables.

A metadata record's value is framed as Kafka's ApiMessageAndVersion serde frames it:
unsigned varint frame version (1), unsigned varint record type (the schema's apiKey),
unsigned varint record version, then the message body; the key is null. Every metadata
record version is flexible. KRaft control records (LeaderChangeMessage, snapshot header and
footer, KRaftVersionRecord, VotersRecord) sit in control batches: the key is int16 version 0
and int16 control type, the value the message body at version 0 (it carries its own
Version field). Layouts follow Kafka's schemas in apache/kafka's
metadata/src/main/resources/common/metadata and clients/src/main/resources/common/message.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from logstore.internal_topics.schema import F, Message, Struct, message

METADATA_TOPIC = "__cluster_metadata"
METADATA_FRAME_VERSION = 1


class MetadataType(NamedTuple):
    """One metadata record type: its api key, schema, and the enum name Kafka prints."""

    id: int
    message: Message

    @property
    def enum_name(self) -> str:
        """MetadataRecordType's constant: TopicRecord -> TOPIC_RECORD."""
        return re.sub(r"(?<!^)(?=[A-Z])", "_", self.message.name).upper()


def _m(name: str, valid: str, *fields) -> Message:
    return message(name, valid, "0+", *fields)


_BROKER_ENDPOINT = Struct("BrokerEndpoint", (
    F("Name", "string", "0+"),
    F("Host", "string", "0+"),
    F("Port", "uint16", "0+"),
    F("SecurityProtocol", "int16", "0+"),
))

_FEATURE_RANGE = Struct("BrokerFeature", (
    F("Name", "string", "0+"),
    F("MinSupportedVersion", "int16", "0+"),
    F("MaxSupportedVersion", "int16", "0+"),
))

# Version 1 adds InControlledShutdown, 2 IsMigratingZkBroker, 3 LogDirs (KIP-858).
REGISTER_BROKER = _m(
    "RegisterBrokerRecord", "0-3",
    F("BrokerId", "int32", "0+"),
    F("IsMigratingZkBroker", "bool", "2+", default=False),
    F("IncarnationId", "uuid", "0+"),
    F("BrokerEpoch", "int64", "0+"),
    F("EndPoints", [_BROKER_ENDPOINT], "0+"),
    F("Features", [_FEATURE_RANGE], "0+"),
    F("Rack", "string", "0+", nullable="0+"),
    F("Fenced", "bool", "0+", default=True),
    F("InControlledShutdown", "bool", "1+", default=False),
    F("LogDirs", ["uuid"], "3+", tag=0),
)

# Version 1 adds Directories (KIP-858); version 2 the eligible leader replicas (KIP-966).
PARTITION = _m(
    "PartitionRecord", "0-2",
    F("PartitionId", "int32", "0+", default=-1),
    F("TopicId", "uuid", "0+"),
    F("Replicas", ["int32"], "0+"),
    F("Isr", ["int32"], "0+"),
    F("RemovingReplicas", ["int32"], "0+"),
    F("AddingReplicas", ["int32"], "0+"),
    F("Leader", "int32", "0+", default=-1),
    F("LeaderRecoveryState", "int8", "0+", tag=0, default=0),
    F("LeaderEpoch", "int32", "0+", default=-1),
    F("PartitionEpoch", "int32", "0+", default=-1),
    F("Directories", ["uuid"], "1+"),
    F("EligibleLeaderReplicas", ["int32"], "2+", nullable="2+", tag=1, default="null"),
    F("LastKnownElr", ["int32"], "2+", nullable="2+", tag=2, default="null"),
)

# Same version history as PartitionRecord; every change is a tagged field.
PARTITION_CHANGE = _m(
    "PartitionChangeRecord", "0-2",
    F("PartitionId", "int32", "0+", default=-1),
    F("TopicId", "uuid", "0+"),
    F("Isr", ["int32"], "0+", nullable="0+", tag=0, default="null"),
    F("Leader", "int32", "0+", tag=1, default=-2),
    F("Replicas", ["int32"], "0+", nullable="0+", tag=2, default="null"),
    F("RemovingReplicas", ["int32"], "0+", nullable="0+", tag=3, default="null"),
    F("AddingReplicas", ["int32"], "0+", nullable="0+", tag=4, default="null"),
    F("LeaderRecoveryState", "int8", "0+", tag=5, default=-1),
    F("EligibleLeaderReplicas", ["int32"], "2+", nullable="2+", tag=6, default="null"),
    F("LastKnownElr", ["int32"], "2+", nullable="2+", tag=7, default="null"),
    F("Directories", ["uuid"], "1+", nullable="1+", tag=8, default="null"),
)

_QUOTA_ENTITY = Struct("EntityData", (
    F("EntityType", "string", "0+"),
    F("EntityName", "string", "0+", nullable="0+"),
))

_CONTROLLER_ENDPOINT = Struct("ControllerEndpoint", _BROKER_ENDPOINT.fields)
_CONTROLLER_FEATURE = Struct("ControllerFeature", _FEATURE_RANGE.fields)

METADATA_TYPES: dict[int, MetadataType] = {t.id: t for t in (
    MetadataType(0, REGISTER_BROKER),
    MetadataType(1, _m("UnregisterBrokerRecord", "0", F("BrokerId", "int32", "0+"),
                       F("BrokerEpoch", "int64", "0+"))),
    MetadataType(2, _m("TopicRecord", "0", F("Name", "string", "0+"), F("TopicId", "uuid", "0+"))),
    MetadataType(3, PARTITION),
    MetadataType(4, _m("ConfigRecord", "0", F("ResourceType", "int8", "0+"),
                       F("ResourceName", "string", "0+"), F("Name", "string", "0+"),
                       F("Value", "string", "0+", nullable="0+"))),
    MetadataType(5, PARTITION_CHANGE),
    MetadataType(6, _m("AccessControlEntryRecord", "0", F("Id", "uuid", "0+"),
                       F("ResourceType", "int8", "0+"), F("ResourceName", "string", "0+"),
                       F("PatternType", "int8", "0+"), F("Principal", "string", "0+"),
                       F("Host", "string", "0+"), F("Operation", "int8", "0+"),
                       F("PermissionType", "int8", "0+"))),
    MetadataType(7, _m("FenceBrokerRecord", "0", F("Id", "int32", "0+"), F("Epoch", "int64", "0+"))),
    MetadataType(8, _m("UnfenceBrokerRecord", "0", F("Id", "int32", "0+"), F("Epoch", "int64", "0+"))),
    MetadataType(9, _m("RemoveTopicRecord", "0", F("TopicId", "uuid", "0+"))),
    MetadataType(10, _m("DelegationTokenRecord", "0", F("Owner", "string", "0+"),
                        F("Requester", "string", "0+"), F("Renewers", ["string"], "0+"),
                        F("IssueTimestamp", "int64", "0+"), F("MaxTimestamp", "int64", "0+"),
                        F("ExpirationTimestamp", "int64", "0+"), F("TokenId", "string", "0+"))),
    MetadataType(11, _m("UserScramCredentialRecord", "0", F("Name", "string", "0+"),
                        F("Mechanism", "int8", "0+"), F("Salt", "bytes", "0+"),
                        F("StoredKey", "bytes", "0+"), F("ServerKey", "bytes", "0+"),
                        F("Iterations", "int32", "0+"))),
    MetadataType(12, _m("FeatureLevelRecord", "0", F("Name", "string", "0+"),
                        F("FeatureLevel", "int16", "0+"))),
    MetadataType(14, _m("ClientQuotaRecord", "0", F("Entity", [_QUOTA_ENTITY], "0+"),
                        F("Key", "string", "0+"), F("Value", "float64", "0+"),
                        F("Remove", "bool", "0+"))),
    MetadataType(15, _m("ProducerIdsRecord", "0", F("BrokerId", "int32", "0+"),
                        F("BrokerEpoch", "int64", "0+"), F("NextProducerId", "int64", "0+"))),
    # Version 1 adds InControlledShutdown, 2 LogDirs; all tagged.
    MetadataType(17, _m("BrokerRegistrationChangeRecord", "0-2", F("BrokerId", "int32", "0+"),
                        F("BrokerEpoch", "int64", "0+"),
                        F("Fenced", "int8", "0+", tag=0, default=0),
                        F("InControlledShutdown", "int8", "1+", tag=1, default=0),
                        F("LogDirs", ["uuid"], "2+", tag=2))),
    MetadataType(18, _m("RemoveAccessControlEntryRecord", "0", F("Id", "uuid", "0+"))),
    MetadataType(20, _m("NoOpRecord", "0")),
    MetadataType(21, _m("ZkMigrationStateRecord", "0", F("ZkMigrationState", "int8", "0+"))),
    MetadataType(22, _m("RemoveUserScramCredentialRecord", "0", F("Name", "string", "0+"),
                        F("Mechanism", "int8", "0+"))),
    MetadataType(23, _m("BeginTransactionRecord", "0",
                        F("Name", "string", "0+", nullable="0+", tag=0, default="null"))),
    MetadataType(24, _m("EndTransactionRecord", "0")),
    MetadataType(25, _m("AbortTransactionRecord", "0",
                        F("Reason", "string", "0+", nullable="0+", tag=0, default="null"))),
    MetadataType(26, _m("RemoveDelegationTokenRecord", "0", F("TokenId", "string", "0+"))),
    MetadataType(27, _m("RegisterControllerRecord", "0", F("ControllerId", "int32", "0+"),
                        F("IncarnationId", "uuid", "0+"), F("ZkMigrationReady", "bool", "0+"),
                        F("EndPoints", [_CONTROLLER_ENDPOINT], "0+"),
                        F("Features", [_CONTROLLER_FEATURE], "0+"))),
    MetadataType(28, _m("ClearElrRecord", "0", F("TopicName", "string", "0+"))),
)}

# -- KRaft control records -------------------------------------------------------------------


class ControlType(NamedTuple):
    """One KRaft control record type: its id (the key's int16 type), the name DumpLogSegments
    prints before its JSON (None: it prints "controlType: NAME(id)"), and its schema."""

    id: int
    enum_name: str
    dump_label: str | None
    message: Message


_VOTER = Struct("Voter", (F("VoterId", "int32", "0+"),))

_VOTER_ENDPOINT = Struct("Endpoint", (
    F("Name", "string", "0+"),
    F("Host", "string", "0+"),
    F("Port", "uint16", "0+"),
))

_KRAFT_VERSION_FEATURE = Struct("KRaftVersionFeature", (
    F("MinSupportedVersion", "int16", "0+"),
    F("MaxSupportedVersion", "int16", "0+"),
))

_VOTERS_VOTER = Struct("Voter", (
    F("VoterId", "int32", "0+"),
    F("VoterDirectoryId", "uuid", "0+"),
    F("Endpoints", [_VOTER_ENDPOINT], "0+"),
    F("KRaftVersionFeature", _KRAFT_VERSION_FEATURE, "0+"),
))

CONTROL_TYPES: dict[int, ControlType] = {t.id: t for t in (
    ControlType(2, "LEADER_CHANGE", None, _m(
        "LeaderChangeMessage", "0", F("Version", "int16", "0+"), F("LeaderId", "int32", "0+"),
        F("Voters", [_VOTER], "0+"), F("GrantingVoters", [_VOTER], "0+"))),
    ControlType(3, "SNAPSHOT_HEADER", "SnapshotHeader", _m(
        "SnapshotHeaderRecord", "0", F("Version", "int16", "0+"),
        F("LastContainedLogTimestamp", "int64", "0+"))),
    ControlType(4, "SNAPSHOT_FOOTER", "SnapshotFooter", _m(
        "SnapshotFooterRecord", "0", F("Version", "int16", "0+"))),
    ControlType(5, "KRAFT_VERSION", "KRaftVersion", _m(
        "KRaftVersionRecord", "0", F("Version", "int16", "0+"), F("KRaftVersion", "int16", "0+"))),
    ControlType(6, "KRAFT_VOTERS", "KRaftVoters", _m(
        "VotersRecord", "0", F("Version", "int16", "0+"), F("Voters", [_VOTERS_VOTER], "0+"))),
)}

# -- the consumer protocol's embedded subscription and assignment (GroupMetadataValue) -------

_TOPIC_PARTITION = Struct("TopicPartition", (
    F("Topic", "string", "0+"),
    F("Partitions", ["int32"], "0+"),
))

CONSUMER_PROTOCOL_TYPE = "consumer"

CONSUMER_PROTOCOL_SUBSCRIPTION = message(
    "ConsumerProtocolSubscription", "0-3", None,
    F("Topics", ["string"], "0+"),
    F("UserData", "bytes", "0+", nullable="0+", default="null"),
    F("OwnedPartitions", [_TOPIC_PARTITION], "1+"),
    F("GenerationId", "int32", "2+", default=-1),
    F("RackId", "string", "3+", nullable="3+", default="null"),
)

CONSUMER_PROTOCOL_ASSIGNMENT = message(
    "ConsumerProtocolAssignment", "0-3", None,
    F("AssignedPartitions", [_TOPIC_PARTITION], "0+"),
    F("UserData", "bytes", "0+", nullable="0+", default="null"),
)

"""The record types of __consumer_offsets and __transaction_state (Kafka 4.0), as tables.

Each coordinator record is a key and a value. The key starts with an int16 that names the
record type (Kafka 4.0 calls it the key version; later releases the schema's apiKey), then
the key's fields (never flexible). The value starts with an int16 value version, then the
value's fields at that version. A null value is a tombstone.

Layouts follow Kafka's message schemas in apache/kafka's
group-coordinator/src/main/resources/common/message and
transaction-coordinator/src/main/resources/common/message. Tagged fields that later releases added to a 4.0 version
are listed too, marked with the release: a 4.0 record never carries them, and they are
rendered only when set, so 4.0 output is unchanged. Share-group records (KIP-932) were early
access in 4.0 and changed shape between releases; the tables hold the 4.0 layout.
"""

from __future__ import annotations

from typing import NamedTuple

from logstore.internal_topics.schema import F, Message, Struct, message

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_TOPIC = "__transaction_state"


class RecordType(NamedTuple):
    """One coordinator record type: its id (the key's leading int16), name, key and value."""

    id: int
    name: str
    key: Message
    value: Message


def _key(name: str, *names: str) -> Message:
    """A key schema: version 0, non-flexible, string fields."""
    return message(name, "0", None, *(F(n, "string", "0+") for n in names))


def _group_key(name: str) -> Message:
    return _key(name, "GroupId")


def _member_key(name: str) -> Message:
    return _key(name, "GroupId", "MemberId")


# -- classic groups and offsets ------------------------------------------------------------

OFFSET_COMMIT_KEY = message("OffsetCommitKey", "0", None,
                            F("group", "string", "0+"), F("topic", "string", "0+"),
                            F("partition", "int32", "0+"))

# Version 4 is the first flexible version (KIP-915).
OFFSET_COMMIT_VALUE = message(
    "OffsetCommitValue", "0-4", "4+",
    F("offset", "int64", "0+"),
    F("leaderEpoch", "int32", "3+", default=-1),
    F("metadata", "string", "0+"),
    F("commitTimestamp", "int64", "0+"),
    F("expireTimestamp", "int64", "1", default=-1),
)

GROUP_METADATA_KEY = message("GroupMetadataKey", "0", None, F("group", "string", "0+"))

_MEMBER_METADATA = Struct("MemberMetadata", (
    F("memberId", "string", "0+"),
    F("groupInstanceId", "string", "3+", nullable="3+", default="null"),
    F("clientId", "string", "0+"),
    F("clientHost", "string", "0+"),
    F("rebalanceTimeout", "int32", "1+"),
    F("sessionTimeout", "int32", "0+"),
    F("subscription", "bytes", "0+"),
    F("assignment", "bytes", "0+"),
))

# Version 4 is the first flexible version (KIP-915).
GROUP_METADATA_VALUE = message(
    "GroupMetadataValue", "0-4", "4+",
    F("protocolType", "string", "0+"),
    F("generation", "int32", "0+"),
    F("protocol", "string", "0+", nullable="0+"),
    F("leader", "string", "0+", nullable="0+"),
    F("currentStateTimestamp", "int64", "2+", default=-1),
    F("members", [_MEMBER_METADATA], "0+"),
)

# -- consumer groups (KIP-848) ---------------------------------------------------------------

_TOPIC_PARTITIONS = Struct("TopicPartitions", (
    F("TopicId", "uuid", "0+"),
    F("Partitions", ["int32"], "0+"),
))

_PARTITION_METADATA = Struct("PartitionMetadata", (
    F("Partition", "int32", "0+"),
    F("Racks", ["string"], "0+"),
))

_TOPIC_METADATA = Struct("TopicMetadata", (
    F("TopicId", "uuid", "0+"),
    F("TopicName", "string", "0+"),
    F("NumPartitions", "int32", "0+"),
    F("PartitionMetadata", [_PARTITION_METADATA], "0+"),
))

CONSUMER_GROUP_METADATA_VALUE = message(
    "ConsumerGroupMetadataValue", "0", "0+",
    F("Epoch", "int32", "0+"),
    F("MetadataHash", "int64", "0+", tag=0, default=0),  # 4.1 (KIP-1101)
    F("CreationTimeMs", "int64", "0+", tag=1, default=-1),  # after 4.1 (KIP-1282)
)

CONSUMER_GROUP_PARTITION_METADATA_VALUE = message(
    "ConsumerGroupPartitionMetadataValue", "0", "0+",
    F("Topics", [_TOPIC_METADATA], "0+"),
)

_CLASSIC_PROTOCOL = Struct("ClassicProtocol", (
    F("Name", "string", "0+"),
    F("Metadata", "bytes", "0+"),
))

_CLASSIC_MEMBER_METADATA = Struct("ClassicMemberMetadata", (
    F("SessionTimeoutMs", "int32", "0+"),
    F("SupportedProtocols", [_CLASSIC_PROTOCOL], "0+"),
))

CONSUMER_GROUP_MEMBER_METADATA_VALUE = message(
    "ConsumerGroupMemberMetadataValue", "0", "0+",
    F("InstanceId", "string", "0+", nullable="0+"),
    F("RackId", "string", "0+", nullable="0+"),
    F("ClientId", "string", "0+"),
    F("ClientHost", "string", "0+"),
    F("SubscribedTopicNames", ["string"], "0+"),
    F("SubscribedTopicRegex", "string", "0+", nullable="0+"),
    F("RebalanceTimeoutMs", "int32", "0+", default=-1),
    F("ServerAssignor", "string", "0+", nullable="0+"),
    F("ClassicMemberMetadata", _CLASSIC_MEMBER_METADATA, "0+", nullable="0+", tag=0,
      default="null"),
)

CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = message(
    "ConsumerGroupTargetAssignmentMetadataValue", "0", "0+",
    F("AssignmentEpoch", "int32", "0+"),
    F("AssignmentTimestamp", "int64", "0+", tag=0, default=0),  # 4.3 (KIP-1263)
)

CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = message(
    "ConsumerGroupTargetAssignmentMemberValue", "0", "0+",
    F("TopicPartitions", [_TOPIC_PARTITIONS], "0+"),
)

_ASSIGNED_TOPIC_PARTITIONS = Struct("TopicPartitions", (
    F("TopicId", "uuid", "0+"),
    F("Partitions", ["int32"], "0+"),
    F("AssignmentEpochs", ["int32"], "0+", nullable="0+", tag=0, default="null"),  # KIP-1251
))

CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = message(
    "ConsumerGroupCurrentMemberAssignmentValue", "0", "0+",
    F("MemberEpoch", "int32", "0+"),
    F("PreviousMemberEpoch", "int32", "0+"),
    F("State", "int8", "0+"),
    F("AssignedPartitions", [_ASSIGNED_TOPIC_PARTITIONS], "0+"),
    F("PartitionsPendingRevocation", [_ASSIGNED_TOPIC_PARTITIONS], "0+"),
)

CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE = message(
    "ConsumerGroupRegularExpressionValue", "0", "0+",
    F("Topics", ["string"], "0+"),
    F("Version", "int64", "0+"),
    F("Timestamp", "int64", "0+"),
)

# -- share groups (KIP-932, early access in 4.0) ----------------------------------------------

SHARE_GROUP_PARTITION_METADATA_VALUE = message(
    "ShareGroupPartitionMetadataValue", "0", "0+",
    F("Topics", [_TOPIC_METADATA], "0+"),
)

SHARE_GROUP_MEMBER_METADATA_VALUE = message(
    "ShareGroupMemberMetadataValue", "0", "0+",
    F("RackId", "string", "0+", nullable="0+"),
    F("ClientId", "string", "0+"),
    F("ClientHost", "string", "0+"),
    F("SubscribedTopicNames", ["string"], "0+"),
)

SHARE_GROUP_METADATA_VALUE = message(
    "ShareGroupMetadataValue", "0", "0+",
    F("Epoch", "int32", "0+"),
)

SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = message(
    "ShareGroupTargetAssignmentMetadataValue", "0", "0+",
    F("AssignmentEpoch", "int32", "0+"),
)

SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = message(
    "ShareGroupTargetAssignmentMemberValue", "0", "0+",
    F("TopicPartitions", [_TOPIC_PARTITIONS], "0+"),
)

SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = message(
    "ShareGroupCurrentMemberAssignmentValue", "0", "0+",
    F("MemberEpoch", "int32", "0+"),
    F("PreviousMemberEpoch", "int32", "0+"),
    F("State", "int8", "0+"),
    F("AssignedPartitions", [_TOPIC_PARTITIONS], "0+"),
)

_TOPIC_PARTITIONS_INFO = Struct("TopicPartitionsInfo", (
    F("TopicId", "uuid", "0+"),
    F("TopicName", "string", "0+"),
    F("Partitions", ["int32"], "0+"),
))

_TOPIC_INFO = Struct("TopicInfo", (
    F("TopicId", "uuid", "0+"),
    F("TopicName", "string", "0+"),
))

# Record type 15 arrived after 4.0 (4.1); listed so a newer broker's partition still decodes.
SHARE_GROUP_STATE_PARTITION_METADATA_VALUE = message(
    "ShareGroupStatePartitionMetadataValue", "0", "0+",
    F("InitializingTopics", [_TOPIC_PARTITIONS_INFO], "0+"),
    F("InitializedTopics", [_TOPIC_PARTITIONS_INFO], "0+"),
    F("DeletingTopics", [_TOPIC_INFO], "0+"),
)


def _types(*entries: RecordType) -> dict[int, RecordType]:
    return {entry.id: entry for entry in entries}


OFFSETS_RECORD_TYPES: dict[int, RecordType] = _types(
    # Type 0 is the offset commit key of releases before 0.10.1; its value is the same.
    RecordType(0, "LegacyOffsetCommit", OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    RecordType(1, "OffsetCommit", OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    RecordType(2, "GroupMetadata", GROUP_METADATA_KEY, GROUP_METADATA_VALUE),
    RecordType(3, "ConsumerGroupMetadata", _group_key("ConsumerGroupMetadataKey"),
               CONSUMER_GROUP_METADATA_VALUE),
    RecordType(4, "ConsumerGroupPartitionMetadata", _group_key("ConsumerGroupPartitionMetadataKey"),
               CONSUMER_GROUP_PARTITION_METADATA_VALUE),
    RecordType(5, "ConsumerGroupMemberMetadata", _member_key("ConsumerGroupMemberMetadataKey"),
               CONSUMER_GROUP_MEMBER_METADATA_VALUE),
    RecordType(6, "ConsumerGroupTargetAssignmentMetadata",
               _group_key("ConsumerGroupTargetAssignmentMetadataKey"),
               CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
    RecordType(7, "ConsumerGroupTargetAssignmentMember",
               _member_key("ConsumerGroupTargetAssignmentMemberKey"),
               CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
    RecordType(8, "ConsumerGroupCurrentMemberAssignment",
               _member_key("ConsumerGroupCurrentMemberAssignmentKey"),
               CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
    RecordType(9, "ShareGroupPartitionMetadata", _group_key("ShareGroupPartitionMetadataKey"),
               SHARE_GROUP_PARTITION_METADATA_VALUE),
    RecordType(10, "ShareGroupMemberMetadata", _member_key("ShareGroupMemberMetadataKey"),
               SHARE_GROUP_MEMBER_METADATA_VALUE),
    RecordType(11, "ShareGroupMetadata", _group_key("ShareGroupMetadataKey"),
               SHARE_GROUP_METADATA_VALUE),
    RecordType(12, "ShareGroupTargetAssignmentMetadata",
               _group_key("ShareGroupTargetAssignmentMetadataKey"),
               SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
    RecordType(13, "ShareGroupTargetAssignmentMember",
               _member_key("ShareGroupTargetAssignmentMemberKey"),
               SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
    RecordType(14, "ShareGroupCurrentMemberAssignment",
               _member_key("ShareGroupCurrentMemberAssignmentKey"),
               SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
    RecordType(15, "ShareGroupStatePartitionMetadata",
               _group_key("ShareGroupStatePartitionMetadataKey"),
               SHARE_GROUP_STATE_PARTITION_METADATA_VALUE),
    RecordType(16, "ConsumerGroupRegularExpression",
               _key("ConsumerGroupRegularExpressionKey", "GroupId", "RegularExpression"),
               CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE),
)

# -- __transaction_state ---------------------------------------------------------------------

TRANSACTION_LOG_KEY = message("TransactionLogKey", "0", None, F("TransactionalId", "string", "0+"))

_PARTITIONS_SCHEMA = Struct("PartitionsSchema", (
    F("Topic", "string", "0+"),
    F("PartitionIds", ["int32"], "0+"),
))

# Version 1 is the first flexible version (KIP-915), written once transaction.version >= 1.
TRANSACTION_LOG_VALUE = message(
    "TransactionLogValue", "0-1", "1+",
    F("ProducerId", "int64", "0+"),
    F("PreviousProducerId", "int64", "1+", tag=0, default=-1),
    F("NextProducerId", "int64", "1+", tag=1, default=-1),
    F("ProducerEpoch", "int16", "0+"),
    F("TransactionTimeoutMs", "int32", "0+"),
    F("TransactionStatus", "int8", "0+"),
    F("TransactionPartitions", [_PARTITIONS_SCHEMA], "0+", nullable="0+"),
    F("TransactionLastUpdateTimestampMs", "int64", "0+"),
    F("TransactionStartTimestampMs", "int64", "0+"),
    F("ClientTransactionVersion", "int16", "1+", tag=2, default=0),
)

TRANSACTION_RECORD_TYPES: dict[int, RecordType] = _types(
    RecordType(0, "TransactionLog", TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE),
)

# Kafka 4.0's TransactionState ids, as its DumpLogSegments prints them.
TRANSACTION_STATES = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort",
                      4: "CompleteCommit", 5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}

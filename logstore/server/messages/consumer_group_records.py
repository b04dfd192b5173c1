"""Kafka 4.0's records of consumer groups (KIP-848) in `__consumer_offsets`, generated from
group-coordinator's definitions: the group's epoch, the partition metadata it assigned from,
each member's subscription, the target assignment and each member's current assignment.
A null value (tombstone) removes what its key names."""

from __future__ import annotations

from logstore.server.messages import RESOURCES, SchemaRecord, schema_loading

with schema_loading():
    class ConsumerGroupMetadataKey(SchemaRecord, load_json=RESOURCES):
        """Type 3: a group of the consumer protocol."""

    class ConsumerGroupMetadataValue(SchemaRecord, load_json=RESOURCES):
        """The group epoch."""

    class ConsumerGroupPartitionMetadataKey(SchemaRecord, load_json=RESOURCES):
        """Type 4: the subscribed topics' metadata the group last assigned from."""

    class ConsumerGroupPartitionMetadataValue(SchemaRecord, load_json=RESOURCES):
        """Each subscribed topic's id, name and partition count."""

    class ConsumerGroupMemberMetadataKey(SchemaRecord, load_json=RESOURCES):
        """Type 5: one member."""

    class ConsumerGroupMemberMetadataValue(SchemaRecord, load_json=RESOURCES):
        """A member's identity, subscription, rebalance timeout and assignor."""

    class ConsumerGroupTargetAssignmentMetadataKey(SchemaRecord, load_json=RESOURCES):
        """Type 6: the target assignment of the group."""

    class ConsumerGroupTargetAssignmentMetadataValue(SchemaRecord, load_json=RESOURCES):
        """The group epoch the target assignment was computed at."""

    class ConsumerGroupTargetAssignmentMemberKey(SchemaRecord, load_json=RESOURCES):
        """Type 7: one member's target assignment."""

    class ConsumerGroupTargetAssignmentMemberValue(SchemaRecord, load_json=RESOURCES):
        """The partitions the assignor gave the member."""

    class ConsumerGroupCurrentMemberAssignmentKey(SchemaRecord, load_json=RESOURCES):
        """Type 8: one member's current assignment."""

    class ConsumerGroupCurrentMemberAssignmentValue(SchemaRecord, load_json=RESOURCES):
        """The member's epochs, state, owned partitions and those it must revoke."""


#: Each record type id's key and value classes.
RECORD_TYPES: dict[int, tuple[type[SchemaRecord], type[SchemaRecord]]] = {
    key.record_type(): (key, value) for key, value in (
        (ConsumerGroupMetadataKey, ConsumerGroupMetadataValue),
        (ConsumerGroupPartitionMetadataKey, ConsumerGroupPartitionMetadataValue),
        (ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue),
        (ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue),
        (ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue),
        (ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue),
    )}

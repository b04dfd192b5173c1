"""Kafka's own JSON definitions of the internal topics' records, turned into classes by
kafka-python 3's generic codec: an oracle independent of logstore.internal_topics (the one
home of these formats in the product), against which the tests hold what the coordinators and
the controller write. The definitions are Kafka 4.0's files, license header kept."""

from __future__ import annotations

import struct
from typing import Any

from logstore.records.varint import encode_unsigned_varint
from logstore.server.messages import schema_loading

with schema_loading():
    from kafka.protocol.api_data import JsonSchemaData
    from kafka.protocol.data_container import DataContainer
    from kafka.protocol.schemas import BaseField

RESOURCES = __name__
_INT16 = struct.Struct(">h")
KEY_TYPES = ("coordinator-key",)
FRAME_VERSION = 1


class SchemaRecord(DataContainer, metaclass=JsonSchemaData, init=False):
    """A record of an internal topic, generated from its JSON definition: an int16 (a key's
    record type id, a value's version), then its fields at that version."""

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if cls._struct is not None:
            cls._flexible_versions = BaseField.parse_versions(cls._json["flexibleVersions"])
            cls._valid_versions = BaseField.parse_versions(cls._json["validVersions"])

    @classmethod
    def is_key(cls) -> bool:
        return cls._json["type"] in KEY_TYPES

    @classmethod
    def record_type(cls) -> int:
        """The record type id (Kafka's apiKey of the definition)."""
        return cls._json["apiKey"]

    @classmethod
    def latest_version(cls) -> int:
        return cls._valid_versions[1]

    @classmethod
    def _flexible(cls, version: int) -> bool:
        low, high = cls._flexible_versions
        return low >= 0 and low <= version and (high < 0 or version <= high)

    def to_bytes(self, version: int | None = None) -> bytes:
        """The record's bytes: a key at its version 0 after its type id, a value after its
        version (the latest unless given)."""
        version = (0 if self.is_key() else self.latest_version()) if version is None else version
        prefix = self.record_type() if self.is_key() else version
        flexible = self._flexible(version)
        body = self._struct.encode(self, version=version, compact=flexible, tagged=flexible)
        return _INT16.pack(prefix) + bytes(body)

    @classmethod
    def from_bytes(cls, data: bytes) -> SchemaRecord:
        """The record of `data` (as to_bytes writes it). Raises ValueError for another type or
        an unknown version, and the codec's errors for bytes that do not decode."""
        (prefix,) = _INT16.unpack_from(data, 0)
        version = 0 if cls.is_key() else prefix
        if cls.is_key() and prefix != cls.record_type():
            raise ValueError(f"{cls.__name__} has type {cls.record_type()}, the record {prefix}")
        if not cls._valid_versions[0] <= version <= cls._valid_versions[1]:
            raise ValueError(f"{cls.__name__} has no version {version}")
        flexible = cls._flexible(version)
        decode = cls._struct.compiled_decode_from(version, compact=flexible, tagged=flexible, data_class=cls)
        record, _ = decode(memoryview(data), 2)
        return record


class MetadataRecord(DataContainer, metaclass=JsonSchemaData, init=False):
    """A metadata record generated from its JSON definition, written in its frame."""

    @classmethod
    def record_type(cls) -> int:
        return cls._json["apiKey"]

    def to_frame(self, version: int) -> bytes:
        """The record value as the metadata log holds it, at `version`."""
        head = (encode_unsigned_varint(FRAME_VERSION) + encode_unsigned_varint(self.record_type())
                + encode_unsigned_varint(version))
        return head + bytes(self._struct.encode(self, version=version, compact=True, tagged=True))


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


with schema_loading():
    class RegisterBrokerRecord(MetadataRecord, load_json=RESOURCES):
        """Type 0: a broker's registration (fenced until it catches up)."""

    class TopicRecord(MetadataRecord, load_json=RESOURCES):
        """Type 2: a topic's name and id."""

    class PartitionRecord(MetadataRecord, load_json=RESOURCES):
        """Type 3: a new partition's replicas, ISR, leader and epochs."""

    class PartitionChangeRecord(MetadataRecord, load_json=RESOURCES):
        """Type 5: a change of a partition's ISR, leader or replicas."""

    class FeatureLevelRecord(MetadataRecord, load_json=RESOURCES):
        """Type 12: a finalized feature level (metadata.version among them)."""

    class BrokerRegistrationChangeRecord(MetadataRecord, load_json=RESOURCES):
        """Type 17: a broker fenced, unfenced or in controlled shutdown."""


METADATA_RECORDS: dict[int, type[MetadataRecord]] = {cls.record_type(): cls for cls in (
    RegisterBrokerRecord, TopicRecord, PartitionRecord, PartitionChangeRecord, FeatureLevelRecord,
    BrokerRegistrationChangeRecord)}

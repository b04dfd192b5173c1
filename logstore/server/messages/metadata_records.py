"""Kafka 4.0's `__cluster_metadata` records the controller writes, generated from metadata's
definitions, framed as Kafka's ApiMessageAndVersion serde frames them: unsigned varints of the
frame version (1), the record type (the definition's apiKey) and the record version, then the
record's fields at that version (every version flexible)."""

from __future__ import annotations

from logstore.records.varint import encode_unsigned_varint
from logstore.server.messages import RESOURCES, schema_loading

with schema_loading():
    from kafka.protocol.api_data import JsonSchemaData
    from kafka.protocol.data_container import DataContainer

FRAME_VERSION = 1


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

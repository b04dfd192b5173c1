"""How the tools show a record's key and value: as UTF-8 text (Kafka's StringDecoder), or
decoded as a record of an internal topic (Kafka's --offsets-decoder, --transaction-log-decoder
and --cluster-metadata-decoder). Each decoder gives the text Kafka 4.0's DumpLogSegments
prints and, for JSON output (`dump --json`, `consume --decode`), the structured record;
`stats --decode` counts records by `record_kind`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from logstore.errors import CorruptRecordError
from logstore.internal_topics import (
    decode_metadata_record,
    decode_offsets_record,
    decode_transaction_log_record,
    format_metadata_for_dump,
    format_offsets_for_dump,
    format_transaction_log_for_dump,
    record_json,
)
from logstore.internal_topics.coordinator_schemas import OFFSETS_TOPIC, TRANSACTION_TOPIC
from logstore.internal_topics.metadata_schemas import METADATA_TOPIC

UNDECODABLE = "undecodable"


def java_string(data: bytes | memoryview | None) -> str:
    """Decode bytes as Java's `new String(bytes, UTF_8)` does (malformed input becomes U+FFFD)."""
    return bytes(data).decode("utf-8", errors="replace")


class RecordDecoder:
    """Kafka's default parser: key and value as UTF-8 text (`key:` / `payload:`)."""

    name = "string"

    def text(self, record: Any) -> tuple[str | None, str | None]:
        """(key text, payload text) Kafka prints after a record's metadata; None prints nothing."""
        key = None if record.key is None else java_string(record.key)
        return key, None if record.value is None else java_string(record.value)

    def fields(self, record: Any) -> dict[str, Any]:
        """The record's decoded key and value for `--json`."""
        key, payload = self.text(record)
        return {"key": key, "payload": payload}


class InternalTopicDecoder(RecordDecoder, ABC):
    """A decoder of one internal topic's records: Kafka's text, and for `--json` the record
    as `decoded` (topic, type, name, key, version, value) or why it did not decode."""

    @abstractmethod
    def text(self, record: Any) -> tuple[str | None, str | None]:
        """(key text, payload text) as Kafka's decoder option prints them."""

    @abstractmethod
    def decode(self, record: Any) -> Any:
        """The record as an InternalRecord; CorruptRecordError when it does not decode."""

    def fields(self, record: Any) -> dict[str, Any]:
        try:
            return {"decoded": record_json(self.decode(record))}
        except CorruptRecordError as exc:
            return {"decodeError": str(exc)}

    def kind(self, record: Any) -> str:
        """What the record is: its schema name ("OffsetCommit"), that name + "/tombstone", or
        "undecodable"."""
        try:
            decoded = self.decode(record)
        except CorruptRecordError:
            return UNDECODABLE
        return f"{decoded.name}/tombstone" if decoded.is_tombstone else decoded.name


class OffsetsDecoder(InternalTopicDecoder):
    """`--offsets-decoder`: __consumer_offsets group metadata and offset commits."""

    name = "offsets"

    def text(self, record: Any) -> tuple[str | None, str | None]:
        return format_offsets_for_dump(record.key, record.value, record.offset)

    def decode(self, record: Any) -> Any:
        if record.key is None:
            raise CorruptRecordError("__consumer_offsets record has a null key")
        return decode_offsets_record(record.key, record.value)


class TransactionLogDecoder(InternalTopicDecoder):
    """`--transaction-log-decoder`: __transaction_state transaction metadata."""

    name = "transaction-log"

    def text(self, record: Any) -> tuple[str | None, str | None]:
        return format_transaction_log_for_dump(record.key, record.value, record.offset)

    def decode(self, record: Any) -> Any:
        if record.key is None:
            raise CorruptRecordError("__transaction_state record has a null key")
        return decode_transaction_log_record(record.key, record.value)


class ClusterMetadataDecoder(InternalTopicDecoder):
    """`--cluster-metadata-decoder`: KRaft metadata records (no keys)."""

    name = "cluster-metadata"

    def text(self, record: Any) -> tuple[str | None, str | None]:
        return None, format_metadata_for_dump(record.value, record.offset)

    def decode(self, record: Any) -> Any:
        return decode_metadata_record(record.value)


STRING = RecordDecoder()
INTERNAL_DECODERS: dict[str, InternalTopicDecoder] = {
    d.name: d for d in (OffsetsDecoder(), TransactionLogDecoder(), ClusterMetadataDecoder())}
DECODERS: dict[str, RecordDecoder] = {STRING.name: STRING, **INTERNAL_DECODERS}
INTERNAL_TOPICS = {OFFSETS_TOPIC: "offsets", TRANSACTION_TOPIC: "transaction-log",
                   METADATA_TOPIC: "cluster-metadata"}


def decoder_for(topic: str) -> InternalTopicDecoder | None:
    """The decoder of an internal topic's records (None for any other topic)."""
    name = INTERNAL_TOPICS.get(topic)
    return None if name is None else INTERNAL_DECODERS[name]

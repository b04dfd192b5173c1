"""Read and write the records of Kafka's internal topics, and render them as Kafka 4.0's
DumpLogSegments prints them.

- __consumer_offsets: decode_offsets_record / encode_offsets_record (--offsets-decoder)
- __transaction_state: decode_transaction_log_record / encode_transaction_log_record
  (--transaction-log-decoder)
- __cluster_metadata: decode_metadata_record / encode_metadata_record
  (--cluster-metadata-decoder) and KRaft control records; `.checkpoint` snapshot files are
  the snapshot module's.

Decoding is strict: malformed bytes raise CorruptRecordError with the byte position inside
the key or value; a record type or version this module does not know raises
UnknownRecordTypeError (a CorruptRecordError) naming it.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass

from logstore.errors import CorruptRecordError, InvalidRecordError
from logstore.internal_topics.coordinator_schemas import (
    OFFSETS_RECORD_TYPES,
    OFFSETS_TOPIC,
    TRANSACTION_RECORD_TYPES,
    TRANSACTION_STATES,
    TRANSACTION_TOPIC,
    RecordType,
)
from logstore.internal_topics.metadata_schemas import (
    CONSUMER_PROTOCOL_ASSIGNMENT,
    CONSUMER_PROTOCOL_SUBSCRIPTION,
    CONSUMER_PROTOCOL_TYPE,
    CONTROL_TYPES,
    METADATA_FRAME_VERSION,
    METADATA_TOPIC,
    METADATA_TYPES,
    MetadataType,
)
from logstore.internal_topics.schema import (
    INT16,
    Message,
    Reader,
    dump_json,
    read_message,
    to_json_tree,
    write_message,
)
from logstore.records.varint import encode_unsigned_varint

CONTROL_KEY_VERSION = 0
TOMBSTONE = "<DELETE>"


class UnknownRecordTypeError(CorruptRecordError):
    """A record type, or a version of one, that Kafka 4.0 does not define (or that this
    module does not know). ``record_type`` and ``version`` say which."""

    def __init__(self, message: str, *, record_type: int, version: int | None = None,
                 position: int | None = None):
        self.record_type = record_type
        self.version = version
        super().__init__(message, position=position)


@dataclass(frozen=True)
class InternalRecord:
    """One decoded internal-topic record.

    ``record_type`` is the coordinator record type (the key's leading int16) or the
    metadata/control api key; ``name`` its schema name ("OffsetCommit", "TopicRecord").
    ``key`` is the decoded key (None for metadata and control records), ``version`` and
    ``value`` the value's version and fields (both None for a tombstone). Field dicts use
    Kafka's JSON (camelCase) names.
    """

    topic: str
    record_type: int
    name: str
    key: dict | None
    version: int | None
    value: dict | None

    @property
    def is_tombstone(self) -> bool:
        return self.value is None


# -- coordinator records (__consumer_offsets, __transaction_state) -------------------------


def _coordinator_type(types: dict[int, RecordType], topic: str, record_type: int | str) -> RecordType:
    if isinstance(record_type, str):
        for entry in types.values():
            if entry.name == record_type:
                return entry
        raise InvalidRecordError(f"{record_type!r} is not a record type of {topic}")
    entry = types.get(record_type)
    if entry is None:
        raise UnknownRecordTypeError(f"unknown {topic} record type {record_type}",
                                     record_type=record_type)
    return entry


def _read_version(data, what: str) -> tuple[int, Reader]:
    reader = Reader(data, what)
    return reader.fixed(INT16, "version"), reader


def _read_all(msg: Message, version: int, reader: Reader) -> dict:
    fields = read_message(msg, version, reader)
    if reader.pos != reader.end:
        raise reader.fail(f"{reader.end - reader.pos} bytes left after {msg.name} v{version}")
    return fields


def _decode_coordinator(types: dict[int, RecordType], topic: str, key, value) -> InternalRecord:
    if key is None:
        raise CorruptRecordError(f"{topic} record has a null key")
    record_type, reader = _read_version(key, f"{topic} key")
    entry = types.get(record_type)
    if entry is None:
        raise UnknownRecordTypeError(f"unknown {topic} record type {record_type}",
                                     record_type=record_type, position=0)
    key_fields = _read_all(entry.key, 0, reader)
    if value is None:
        return InternalRecord(topic, record_type, entry.name, key_fields, None, None)
    version, reader = _read_version(value, f"{topic} {entry.name} value")
    if not entry.value.has_version(version):
        raise UnknownRecordTypeError(
            f"unknown version {version} of {entry.value.name} (record type {record_type})",
            record_type=record_type, version=version, position=0)
    return InternalRecord(topic, record_type, entry.name, key_fields, version,
                          _read_all(entry.value, version, reader))


def _encode_coordinator(types: dict[int, RecordType], topic: str, record_type: int | str,
                        key: Mapping, version: int | None, value: Mapping | None) -> tuple[bytes, bytes | None]:
    entry = _coordinator_type(types, topic, record_type)
    key_bytes = INT16.pack(entry.id) + write_message(entry.key, 0, key)
    if value is None:
        return key_bytes, None
    if version is None or not entry.value.has_version(version):
        raise InvalidRecordError(f"{entry.value.name} has no version {version}")
    return key_bytes, INT16.pack(version) + write_message(entry.value, version, value)


def decode_offsets_record(key: bytes, value: bytes | None) -> InternalRecord:
    """Decode a __consumer_offsets record (value None = tombstone).

    Raises CorruptRecordError for malformed bytes, UnknownRecordTypeError for a record type
    or value version Kafka 4.0 does not define.
    """
    return _decode_coordinator(OFFSETS_RECORD_TYPES, OFFSETS_TOPIC, key, value)


def encode_offsets_record(record_type: int | str, key: Mapping, version: int | None,
                          value: Mapping | None) -> tuple[bytes, bytes | None]:
    """Encode a __consumer_offsets record as (key bytes, value bytes or None for a tombstone).

    ``record_type`` is the id or name ("OffsetCommit", 1); missing fields take their
    defaults. Raises InvalidRecordError for unknown names, versions or bad field values.
    """
    return _encode_coordinator(OFFSETS_RECORD_TYPES, OFFSETS_TOPIC, record_type, key, version, value)


def decode_transaction_log_record(key: bytes, value: bytes | None) -> InternalRecord:
    """Decode a __transaction_state record (value None = tombstone); errors as
    decode_offsets_record."""
    return _decode_coordinator(TRANSACTION_RECORD_TYPES, TRANSACTION_TOPIC, key, value)


def encode_transaction_log_record(key: Mapping, version: int | None,
                                  value: Mapping | None) -> tuple[bytes, bytes | None]:
    """Encode a __transaction_state record (TransactionLogKey/Value) as (key, value) bytes.

    Raises InvalidRecordError for a bad version or field values.
    """
    return _encode_coordinator(TRANSACTION_RECORD_TYPES, TRANSACTION_TOPIC, 0, key, version, value)


# -- metadata records (__cluster_metadata, snapshots) ----------------------------------------


def metadata_type(record_type: int | str) -> MetadataType:
    """The metadata record type with this api key or schema name ("TopicRecord").

    Raises UnknownRecordTypeError for an unknown id, InvalidRecordError for an unknown name.
    """
    if isinstance(record_type, str):
        for entry in METADATA_TYPES.values():
            if entry.message.name == record_type:
                return entry
        raise InvalidRecordError(f"{record_type!r} is not a metadata record type")
    entry = METADATA_TYPES.get(record_type)
    if entry is None:
        raise UnknownRecordTypeError(f"unknown metadata record type {record_type}",
                                     record_type=record_type)
    return entry


def decode_metadata_record(value: bytes) -> InternalRecord:
    """Decode a __cluster_metadata record value (an ApiMessageAndVersion frame).

    Raises CorruptRecordError for malformed bytes or trailing garbage,
    UnknownRecordTypeError for an unknown frame version, record type or version.
    """
    if value is None:
        raise CorruptRecordError("metadata record has a null value")
    reader = Reader(value, "metadata record")
    frame = reader.uvarint("frame version")
    if frame != METADATA_FRAME_VERSION:
        raise CorruptRecordError(f"metadata record: unknown frame version {frame} (only frame "
                                 f"version {METADATA_FRAME_VERSION} is supported)", position=0)
    type_position = reader.pos
    record_type = reader.uvarint("record type")
    version = reader.uvarint("record version")
    entry = METADATA_TYPES.get(record_type)
    if entry is None:
        raise UnknownRecordTypeError(f"unknown metadata record type {record_type}",
                                     record_type=record_type, position=type_position)
    if not entry.message.has_version(version):
        raise UnknownRecordTypeError(f"unknown version {version} of {entry.message.name}",
                                     record_type=record_type, version=version, position=type_position)
    reader.what = f"{entry.message.name} v{version}"
    fields = _read_all(entry.message, version, reader)
    return InternalRecord(METADATA_TOPIC, record_type, entry.message.name, None, version, fields)


def encode_metadata_record(record_type: int | str, version: int, value: Mapping) -> bytes:
    """Encode a metadata record value as an ApiMessageAndVersion frame.

    Raises InvalidRecordError for an unknown type name, a version the type lacks, or bad
    field values (UnknownRecordTypeError for an unknown numeric type).
    """
    entry = metadata_type(record_type)
    if not entry.message.has_version(version):
        raise InvalidRecordError(f"{entry.message.name} has no version {version}")
    head = (encode_unsigned_varint(METADATA_FRAME_VERSION) + encode_unsigned_varint(entry.id)
            + encode_unsigned_varint(version))
    return head + write_message(entry.message, version, value)


def decode_control_record(key: bytes, value: bytes) -> InternalRecord:
    """Decode a KRaft control record (leader change, snapshot header/footer, kraft version,
    voters) from a control batch. Commit/abort markers are logstore.records.control's.

    Raises CorruptRecordError for malformed bytes, UnknownRecordTypeError for another type.
    """
    if key is None or len(key) != 4:
        raise CorruptRecordError("control record key is not 4 bytes", position=0)
    reader = Reader(key, "control record key")
    key_version = reader.fixed(INT16, "version")
    control_type = reader.fixed(INT16, "type")
    if key_version != CONTROL_KEY_VERSION:
        raise CorruptRecordError(f"control record key version {key_version}, expected 0", position=0)
    entry = CONTROL_TYPES.get(control_type)
    if entry is None:
        raise UnknownRecordTypeError(f"control record type {control_type} is not a KRaft control record",
                                     record_type=control_type, position=2)
    if value is None:
        raise CorruptRecordError(f"{entry.message.name} control record has a null value")
    fields = _read_all(entry.message, 0, Reader(value, entry.message.name))
    return InternalRecord(METADATA_TOPIC, control_type, entry.message.name, None, 0, fields)


def encode_control_record(control_type: int | str, value: Mapping) -> tuple[bytes, bytes]:
    """Encode a KRaft control record as (key, value); control_type is the id or enum name
    ("SNAPSHOT_HEADER"). Raises InvalidRecordError for an unknown type or bad fields."""
    for entry in CONTROL_TYPES.values():
        if control_type in (entry.id, entry.enum_name, entry.message.name):
            key = INT16.pack(CONTROL_KEY_VERSION) + INT16.pack(entry.id)
            return key, write_message(entry.message, 0, value)
    raise InvalidRecordError(f"{control_type!r} is not a KRaft control record type")


# -- rendering, as Kafka 4.0's DumpLogSegments prints each decoder's output -----------------


def record_json(record: InternalRecord) -> dict:
    """A JSON-ready dict of a decoded record for structured output: topic, type, name, key,
    version and value, with bytes as base64 and uuids as Kafka prints them."""
    key = value = None
    if record.topic == METADATA_TOPIC:
        control = CONTROL_TYPES.get(record.record_type)
        if control is not None and control.message.name == record.name:
            msg = control.message
        else:
            msg = METADATA_TYPES[record.record_type].message
        value = to_json_tree(msg, record.version, record.value)
    else:
        types = OFFSETS_RECORD_TYPES if record.topic == OFFSETS_TOPIC else TRANSACTION_RECORD_TYPES
        entry = types[record.record_type]
        key = to_json_tree(entry.key, 0, record.key)
        if record.value is not None:
            value = to_json_tree(entry.value, record.version, record.value)
    return {"topic": record.topic, "type": record.record_type, "name": record.name,
            "key": key, "version": record.version, "value": value}


def _embedded_protocol(raw: str, msg: Message):
    """DumpLogSegments' replacement of a consumer member's subscription/assignment bytes
    by their decoded JSON; the original (base64) text when they do not decode."""
    data = base64.b64decode(raw)
    try:
        version, reader = _read_version(data, msg.name)
        # Kafka reads any version with its generated reader: versions past the newest read
        # (and render) as the newest, below the oldest as the oldest.
        version = min(max(version, msg.valid[0]), msg.valid[1])
        return to_json_tree(msg, version, read_message(msg, version, reader))
    except CorruptRecordError:
        return raw


def _group_metadata_json(record: InternalRecord) -> dict:
    tree = to_json_tree(OFFSETS_RECORD_TYPES[2].value, record.version, record.value)
    if tree.get("protocolType") == CONSUMER_PROTOCOL_TYPE:
        for member in tree.get("members") or ():
            member["subscription"] = _embedded_protocol(member["subscription"], CONSUMER_PROTOCOL_SUBSCRIPTION)
            member["assignment"] = _embedded_protocol(member["assignment"], CONSUMER_PROTOCOL_ASSIGNMENT)
    return tree


def format_offsets_for_dump(key: bytes | None, value: bytes | None, offset: int) -> tuple[str | None, str | None]:
    """(key text, payload text) as `kafka-dump-log --offsets-decoder` prints a record:
    key {"type":"N","data":{...}}, payload {"version":"V","data":{...}} or <DELETE>; an
    unknown type or a decoding error gives Kafka's "..., skipping." key and no payload.

    Raises CorruptRecordError for a null key (Kafka's tool stops there too).
    """
    if key is None:
        raise CorruptRecordError(f"Failed to decode message at offset {offset} using offset topic "
                                 "decoder (message had a missing key)")
    try:
        record = decode_offsets_record(key, value)
    except UnknownRecordTypeError as exc:
        if exc.version is None:
            return f"Unknown record type {exc.record_type} at offset {offset}, skipping.", None
        return f"Error at offset {offset}, skipping. {exc}", None
    except CorruptRecordError as exc:
        return f"Error at offset {offset}, skipping. {exc}", None
    entry = OFFSETS_RECORD_TYPES[record.record_type]
    key_text = dump_json({"type": str(record.record_type), "data": to_json_tree(entry.key, 0, record.key)})
    if record.value is None:
        return key_text, TOMBSTONE
    data = (_group_metadata_json(record) if record.record_type == 2
            else to_json_tree(entry.value, record.version, record.value))
    return key_text, dump_json({"version": str(record.version), "data": data})


def format_transaction_log_for_dump(key: bytes | None, value: bytes | None,
                                    offset: int) -> tuple[str | None, str | None]:
    """(key text, payload text) as `kafka-dump-log --transaction-log-decoder` prints them:
    transaction_metadata::transactionalId=ID and producerId:..,state=..,partitions=[..],...
    or <DELETE>; "unknown::version=N" for a key of another type.

    Partitions are listed in record order (Kafka prints its hash set's order). Raises
    CorruptRecordError for malformed bytes or an unknown value version or state, where
    Kafka's tool stops with an exception.
    """
    if key is None:
        raise CorruptRecordError(f"transaction log record at offset {offset} has a null key")
    key_type, _ = _read_version(key, f"{TRANSACTION_TOPIC} key")
    if key_type not in TRANSACTION_RECORD_TYPES:
        return f"unknown::version={key_type}", None
    record = decode_transaction_log_record(key, value)
    key_text = f"transaction_metadata::transactionalId={record.key['transactionalId']}"
    if record.value is None:
        return key_text, TOMBSTONE
    fields = record.value
    state = TRANSACTION_STATES.get(fields["transactionStatus"])
    if state is None:
        raise CorruptRecordError(f"Unknown transaction state id {fields['transactionStatus']} "
                                 f"from the transaction status message at offset {offset}")
    partitions = [] if state == "Empty" else [
        f"{p['topic']}-{i}" for p in fields["transactionPartitions"] or () for i in p["partitionIds"]]
    payload = (f"producerId:{fields['producerId']},producerEpoch:{fields['producerEpoch']},"
               f"state={state},partitions=[{','.join(partitions)}],"
               f"txnLastUpdateTimestamp={fields['transactionLastUpdateTimestampMs']},"
               f"txnTimeoutMs={fields['transactionTimeoutMs']}")
    return key_text, payload


def format_metadata_for_dump(value: bytes | None, offset: int) -> str:
    """The payload `kafka-dump-log --cluster-metadata-decoder` prints for a record:
    {"type":"TOPIC_RECORD","version":0,"data":{...}}, or "Error at OFFSET, skipping. ..."."""
    try:
        record = decode_metadata_record(value)
    except CorruptRecordError as exc:
        return f"Error at {offset}, skipping. {exc}"
    entry = METADATA_TYPES[record.record_type]
    return dump_json({"type": entry.enum_name, "version": record.version,
                      "data": to_json_tree(entry.message, record.version, record.value)})


def format_control_for_dump(key: bytes, value: bytes) -> str:
    """The text DumpLogSegments prints after a KRaft control record's metadata, without the
    leading space: "SnapshotHeader {...}", "KRaftVoters {...}", "controlType: LEADER_CHANGE(2)".

    Raises CorruptRecordError for malformed bytes, UnknownRecordTypeError for other types.
    """
    record = decode_control_record(key, value)
    entry = CONTROL_TYPES[record.record_type]
    if entry.dump_label is None:
        return f"controlType: {entry.enum_name}({entry.id})"
    return f"{entry.dump_label} {dump_json(to_json_tree(entry.message, 0, record.value))}"

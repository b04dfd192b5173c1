"""Kafka DumpLogSegments-compatible output: text lines and JSON objects for decoded files.

Pure: every function here takes bytes or decoded values and returns strings, dicts or
decoded entries; opening files and choosing what to print is `logstore.cli.dump`'s job.
The text is what Kafka's `kafka.tools.DumpLogSegments` prints for the same input (Kafka
4.0, the Scala tool), so the rules for walking a segment, reading index slots, producer
snapshots and transaction indexes follow Kafka's read-only tool rather than the engine.
Layouts: docs/FORMAT.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from logstore.errors import CorruptRecordError
from logstore.internal_topics import decode_control_record, format_control_for_dump, record_json
from logstore.internal_topics.metadata_schemas import CONTROL_TYPES as KRAFT_CONTROL_TYPES
from logstore.producer_append import increment_sequence
from logstore.records.control import ABORT, COMMIT, CONTROL_KEY, END_TXN_MARKER_VALUE
from logstore.records.header import (
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    RECORD_OVERHEAD_V0,
    SIZE_FIELD,
    SIZE_OFFSET,
    V2_HEADER_SIZE,
)
from logstore.tools.record_decoders import STRING, RecordDecoder, java_string

RECORD_INDENT = "|"


# Kafka's ControlRecordType names, by type id (the int16 after the key's version): the two
# transaction markers (records.control) and KRaft's types (internal_topics).
CONTROL_TYPES = {ABORT: "ABORT", COMMIT: "COMMIT",
                 **{kraft.id: kraft.enum_name for kraft in KRAFT_CONTROL_TYPES.values()}}


def java_bool(value: bool) -> str:
    """`true`/`false` as Java prints booleans."""
    return "true" if value else "false"


def optional_long(value: int | None) -> str:
    """Java's `OptionalLong.toString()`."""
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def record_sequence(batch: Any, offset: int) -> int:
    """A v2 record's sequence: the batch's base sequence plus its offset delta, or -1."""
    if batch.base_sequence < 0:
        return NO_SEQUENCE
    return increment_sequence(batch.base_sequence, offset - batch.base_offset)


def batch_last_sequence(batch: Any) -> int:
    """A v2 batch's last sequence as Kafka computes it (wrapping), -1 when not idempotent."""
    if batch.base_sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    return increment_sequence(batch.base_sequence, batch.last_offset - batch.base_offset)


def timestamp_type_name(batch: Any) -> str:
    """Kafka's TimestampType name: NoTimestampType for magic 0, else the batch's type."""
    if batch.magic == 0 or batch.timestamp_type is None:
        return "NoTimestampType"
    return batch.timestamp_type


def batch_max_timestamp(batch: Any) -> int:
    """The batch's max timestamp as Kafka reports it (-1 for magic 0)."""
    return NO_TIMESTAMP if batch.magic == 0 else batch.max_timestamp


def record_timestamp(batch: Any, record: Any) -> int:
    """A record's timestamp as Kafka's iterator gives it (LogAppendTime stamps every record)."""
    if batch.magic == 0:
        return NO_TIMESTAMP
    if batch.timestamp_type == "LogAppendTime":
        return batch.max_timestamp
    return record.timestamp


def iter_batch_spans(
    buffer: Any, start: int = 0, end: int | None = None, *, path: str | None = None
) -> Iterator[tuple[int, int]]:
    """Yield `(position, size)` of each complete batch in `buffer[start:end]`, Kafka's way.

    Stops quietly before a partial trailing batch (fewer than 18 bytes left, or a length
    that runs past `end`); raises CorruptRecordError (naming `path`) for a length under 14 bytes.
    """
    if end is None:
        end = len(buffer)
    position = start
    while position < end - HEADER_SIZE_UP_TO_MAGIC:
        (length,) = SIZE_FIELD.unpack_from(buffer, position + SIZE_OFFSET)
        if length < RECORD_OVERHEAD_V0:
            raise CorruptRecordError(
                f"Found record size {length} smaller than minimum record overhead "
                f"({RECORD_OVERHEAD_V0})",
                position=position,
                path=path,
            )
        if position > end - LOG_OVERHEAD - length:
            return
        yield position, LOG_OVERHEAD + length
        position += LOG_OVERHEAD + length


def kafka_is_valid(batch: Any) -> bool:
    """Kafka's isValid: a v2 batch is big enough for its header and its stored CRC matches."""
    if batch.magic >= 2:
        return batch.size_in_bytes >= V2_HEADER_SIZE and batch.crc == batch.compute_crc()
    return bool(batch.is_valid())


def batch_fields(batch: Any, position: int) -> dict[str, Any]:
    """Every batch-level value Kafka prints, keyed by Kafka's field name."""
    fields: dict[str, Any] = {}
    if batch.magic >= 2:
        fields.update(
            baseOffset=batch.base_offset,
            lastOffset=batch.last_offset,
            count=batch.record_count,
            baseSequence=batch.base_sequence,
            lastSequence=batch_last_sequence(batch),
            producerId=batch.producer_id,
            producerEpoch=batch.producer_epoch,
            partitionLeaderEpoch=batch.partition_leader_epoch,
            isTransactional=bool(batch.is_transactional),
            isControl=bool(batch.is_control),
            deleteHorizonMs=batch.delete_horizon_ms,
        )
    else:
        fields["offset"] = batch.last_offset
    fields.update(
        position=position,
        timestampType=timestamp_type_name(batch),
        maxTimestamp=batch_max_timestamp(batch),
        size=batch.size_in_bytes,
        magic=batch.magic,
        compresscodec=batch.compression,
        crc=batch.crc,
        isvalid=kafka_is_valid(batch),
    )
    return fields


def batch_line(batch: Any, position: int) -> str:
    """The batch line of `--files x.log` (shallow iteration) at file `position`."""
    f = batch_fields(batch, position)
    if batch.magic >= 2:
        head = (
            f"baseOffset: {f['baseOffset']} lastOffset: {f['lastOffset']} count: {f['count']}"
            f" baseSequence: {f['baseSequence']} lastSequence: {f['lastSequence']}"
            f" producerId: {f['producerId']} producerEpoch: {f['producerEpoch']}"
            f" partitionLeaderEpoch: {f['partitionLeaderEpoch']}"
            f" isTransactional: {java_bool(f['isTransactional'])}"
            f" isControl: {java_bool(f['isControl'])}"
            f" deleteHorizonMs: {optional_long(f['deleteHorizonMs'])}"
        )
    else:
        head = f"offset: {f['offset']}"
    return (
        f"{head} position: {position} {f['timestampType']}: {f['maxTimestamp']}"
        f" size: {f['size']} magic: {f['magic']} compresscodec: {f['compresscodec']}"
        f" crc: {f['crc']} isvalid: {java_bool(f['isvalid'])}"
    )


def control_fields(key: bytes | None, value: bytes | None) -> dict[str, Any]:
    """Decode a control record: `endTxnMarker` + `coordinatorEpoch`, or `controlType` + id (and,
    for the KRaft records Kafka's tool decodes, `control`: the record's fields)."""
    if key is None or len(key) < CONTROL_KEY.size:
        raise CorruptRecordError(f"control record key of {0 if key is None else len(key)} bytes is too short")
    version, type_id = CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"control record key with negative version {version}")
    name = CONTROL_TYPES.get(type_id, "UNKNOWN")
    if name in ("ABORT", "COMMIT"):
        if value is None or len(value) < END_TXN_MARKER_VALUE.size:
            raise CorruptRecordError("end transaction marker value is too short")
        _, coordinator_epoch = END_TXN_MARKER_VALUE.unpack_from(value)
        return {"endTxnMarker": name, "coordinatorEpoch": coordinator_epoch}
    fields: dict[str, Any] = {"controlType": name, "controlTypeId": type_id}
    if _kraft_control_printed(type_id):
        fields["control"] = record_json(decode_control_record(key, value))["value"]
    return fields


def _kraft_control_printed(type_id: int) -> bool:
    """Whether Kafka's tool prints this control record's decoded fields (snapshot header and
    footer, kraft version, voters) rather than only its type."""
    kraft = KRAFT_CONTROL_TYPES.get(type_id)
    return kraft is not None and kraft.dump_label is not None


@dataclass(frozen=True, slots=True)
class LegacyEntry:
    """Validity and CRC of one legacy (magic 0/1) message, printed on its record line."""

    is_valid: bool
    crc: int


def record_fields(
    batch: Any,
    record: Any,
    *,
    print_data: bool,
    legacy: LegacyEntry | None = None,
    decoder: RecordDecoder = STRING,
) -> dict[str, Any]:
    """Every record-level value Kafka prints for one record, keyed by Kafka's field name (key
    and value as `decoder` shows them for `--json`)."""
    fields: dict[str, Any] = {
        "offset": record.offset,
        "timestampType": timestamp_type_name(batch),
        "timestamp": record_timestamp(batch, record),
        "keySize": -1 if record.key is None else len(record.key),
        "valueSize": -1 if record.value is None else len(record.value),
    }
    if batch.magic >= 2:
        fields["sequence"] = record_sequence(batch, record.offset)
        fields["headerKeys"] = [key for key, _ in record.headers]
    if legacy is not None:
        fields["isValid"] = legacy.is_valid
        fields["crc"] = legacy.crc
    if batch.is_control:
        fields.update(control_fields(record.key, record.value))
    elif print_data:
        fields.update(decoder.fields(record))
    return fields


def record_line(
    batch: Any,
    record: Any,
    *,
    print_data: bool,
    skip_metadata: bool = False,
    legacy: LegacyEntry | None = None,
    decoder: RecordDecoder = STRING,
) -> str:
    """One `| offset: ...` line of a deep iteration (with `key:`/`payload:` under print_data,
    as `decoder` renders them)."""
    f = record_fields(batch, record, print_data=False, legacy=legacy)
    parts = []
    prefix = f"{RECORD_INDENT} "
    if not skip_metadata:
        parts.append(
            f"{prefix}offset: {f['offset']} {f['timestampType']}: {f['timestamp']}"
            f" keySize: {f['keySize']} valueSize: {f['valueSize']}"
        )
        prefix = " "
        if "sequence" in f:
            parts.append(f" sequence: {f['sequence']} headerKeys: [{','.join(f['headerKeys'])}]")
        if legacy is not None:
            # Kafka 4.0's Scala tool prints a stray closing brace after a legacy record's crc.
            parts.append(f" isValid: {java_bool(legacy.is_valid)} crc: {legacy.crc}}}")
        if "endTxnMarker" in f:
            parts.append(f" endTxnMarker: {f['endTxnMarker']} coordinatorEpoch: {f['coordinatorEpoch']}")
        elif "control" in f:
            parts.append(f" {format_control_for_dump(record.key, record.value)}")
        elif "controlType" in f:
            parts.append(f" controlType: {f['controlType']}({f['controlTypeId']})")
    if print_data and not batch.is_control:
        key, payload = decoder.text(record)
        if key is not None:
            parts.append(f"{prefix}key: {key}")
        if payload is not None:
            parts.append(f" payload: {payload}")
    return "".join(parts)


def record_lines(batch: Any, *, print_data: bool, skip_metadata: bool = False) -> list[str]:
    """Every record line of one magic 2 batch, formatted from its decoded columns.

    The bulk path of a deep dump: batch-constant parts are formatted once, and an ASCII
    records section is decoded once and sliced. Same text as `record_line` per record.
    """
    if batch.magic < 2 or batch.is_control or skip_metadata:
        return [record_line(batch, r, print_data=print_data, skip_metadata=skip_metadata)
                for r in batch.records()]
    cols = batch.columns()
    n = cols.offset.size
    offsets = cols.offset.tolist()
    if batch.timestamp_type == "LogAppendTime":
        timestamps = [batch.max_timestamp] * n
    else:
        timestamps = cols.timestamp.tolist()
    key_len = _lengths(cols.key_offsets, cols.key_null)
    value_len = _lengths(cols.value_offsets, cols.value_null)
    if batch.base_sequence < 0:
        sequences: list[int] = [NO_SEQUENCE] * n
    else:
        sequences = [record_sequence(batch, o) for o in offsets]
    if cols.header_key_offsets.size <= 1:
        header_keys = ["[]"] * n
    else:
        names = _strings(cols.header_key_data, cols.header_key_offsets, None)
        bounds = cols.headers_offsets.tolist()
        header_keys = [f"[{','.join(names[a:b])}]" for a, b in zip(bounds, bounds[1:], strict=False)]
    kind = timestamp_type_name(batch)
    if print_data:
        keys = _labeled(" key: ", cols.key_data, cols.key_offsets, cols.key_null)
        values = _labeled(" payload: ", cols.value_data, cols.value_offsets, cols.value_null)
    else:
        keys = values = [""] * n
    return [
        f"{RECORD_INDENT} offset: {o} {kind}: {t} keySize: {kl} valueSize: {vl} sequence: {s} headerKeys: {h}{k}{v}"
        for o, t, kl, vl, s, h, k, v in zip(offsets, timestamps, key_len, value_len, sequences,
                                            header_keys, keys, values, strict=True)
    ]


def _lengths(offsets: np.ndarray, null: np.ndarray) -> list[int]:
    """Per-item byte lengths of an Arrow-style binary column, -1 where null."""
    lengths = np.diff(offsets.astype(np.int64))
    lengths[np.asarray(null, dtype=bool)] = -1
    return lengths.tolist()


def _strings(data: np.ndarray, offsets: np.ndarray, null: np.ndarray | None) -> list[str | None]:
    """Java-decoded strings of an Arrow-style binary column (None where null)."""
    items: list[str | None] = list(_labeled("", data, offsets, None))
    if null is not None:
        for i in np.flatnonzero(np.asarray(null, dtype=bool)).tolist():
            items[i] = None
    return items


def _labeled(label: str, data: np.ndarray, offsets: np.ndarray, null: np.ndarray | None) -> list[str]:
    """`label` + the Java-decoded string of each item of an Arrow-style binary column ("" where null).

    An all-ASCII column is decoded once and sliced (byte offsets are character offsets).
    """
    raw = data.tobytes()
    bounds = offsets.tolist()
    if raw.isascii():
        text = raw.decode("ascii")
        items = [f"{label}{text[a:b]}" for a, b in zip(bounds, bounds[1:], strict=False)]
    else:
        items = [f"{label}{java_string(raw[a:b])}" for a, b in zip(bounds, bounds[1:], strict=False)]
    if null is not None:
        for i in np.flatnonzero(np.asarray(null, dtype=bool)).tolist():
            items[i] = ""
    return items


def batch_json(
    batch: Any,
    position: int,
    records: Sequence[Any] | None = None,
    *,
    print_data: bool = False,
    legacy: Sequence[LegacyEntry] | None = None,
    decoder: RecordDecoder = STRING,
) -> dict[str, Any]:
    """The `--json` object of one batch; with `records` (deep iteration) they are nested."""
    obj: dict[str, Any] = {"type": "batch", **batch_fields(batch, position)}
    if records is not None:
        obj["records"] = [
            record_fields(batch, r, print_data=print_data, legacy=None if legacy is None else legacy[i],
                          decoder=decoder)
            for i, r in enumerate(records)
        ]
    return obj


def log_header_line(base_offset: int) -> str:
    """`Log starting offset: N`, printed after `Dumping x.log`."""
    return f"Log starting offset: {base_offset}"


def kraft_snapshot_header_line(end_offset: int, epoch: int) -> str:
    """`Snapshot end offset: N, epoch: E`, printed after `Dumping x.checkpoint`."""
    return f"Snapshot end offset: {end_offset}, epoch: {epoch}"


def bootstrap_snapshot_header_line() -> str:
    """The header of `bootstrap.checkpoint` (the KRaft bootstrap snapshot)."""
    return "KRaft bootstrap snapshot"


def trailing_bytes_line(count: int, file_name: str) -> str:
    """The torn-tail report of a `.log` dump (printed only without --max-bytes)."""
    return f"Found {count} invalid bytes at the end of {file_name}"

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

from index.offset_index import OFFSET_INDEX_DTYPE
from index.time_index import TIME_INDEX_DTYPE
from logstore.errors import CorruptRecordError, CorruptSnapshotError
from logstore.internal_topics import decode_control_record, format_control_for_dump, record_json
from logstore.internal_topics.metadata_schemas import CONTROL_TYPES as KRAFT_CONTROL_TYPES
from logstore.producer_append import decrement_sequence, increment_sequence
from logstore.producer_snapshot import (
    SNAPSHOT_COUNT_PAST_END,
    SNAPSHOT_NEGATIVE_COUNT,
    SNAPSHOT_TRUNCATED,
    SNAPSHOT_UNKNOWN_VERSION,
    read_snapshot_rows,
)
from logstore.record_decoders import STRING, RecordDecoder, java_string
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
from logstore.txn_index import parse_aborted_txns

RECORD_INDENT = "|"


# The names Kafka's snapshot schema gives the fields producer_snapshot names otherwise.
SNAPSHOT_KAFKA_NAMES = {"count": "producer_entries", "producer_epoch": "epoch"}
BUFFER_UNDERFLOW = "java.nio.BufferUnderflowException"

# Kafka's ControlRecordType names, by type id (the int16 after the key's version): the two
# transaction markers (records.control) and KRaft's types (internal_topics).
CONTROL_TYPES = {ABORT: "ABORT", COMMIT: "COMMIT",
                 **{kraft.id: kraft.enum_name for kraft in KRAFT_CONTROL_TYPES.values()}}


@dataclass(frozen=True, slots=True)
class TxnIndexEntry:
    """One `.txnindex` entry as stored, its version included (txn_index.AbortedTxn leaves it out)."""

    version: int
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


@dataclass(frozen=True, slots=True)
class ProducerSnapshotEntry:
    """One producer of a `.snapshot` file, as Kafka's ProducerStateManager.readSnapshot sees it."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int

    @property
    def first_sequence(self) -> int:
        """The first sequence of the producer's last batch (Kafka's decrementSequence)."""
        return decrement_sequence(self.last_sequence, self.offset_delta)


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


def offset_index_line(offset: int, position: int) -> str:
    """One `.index` entry."""
    return f"offset: {offset} position: {position}"


def time_index_line(timestamp: int, offset: int) -> str:
    """One `.timeindex` entry."""
    return f"timestamp: {timestamp} offset: {offset}"


def aborted_txn_line(txn: TxnIndexEntry) -> str:
    """One `.txnindex` entry."""
    return (
        f"version: {txn.version} producerId: {txn.producer_id} firstOffset: {txn.first_offset}"
        f" lastOffset: {txn.last_offset} lastStableOffset: {txn.last_stable_offset}"
    )


def aborted_txn_json(txn: TxnIndexEntry) -> dict[str, Any]:
    """The `--json` object of one `.txnindex` entry."""
    return {
        "type": "aborted_txn",
        "version": txn.version,
        "producerId": txn.producer_id,
        "firstOffset": txn.first_offset,
        "lastOffset": txn.last_offset,
        "lastStableOffset": txn.last_stable_offset,
    }


def snapshot_entry_line(entry: ProducerSnapshotEntry) -> str:
    """One producer of a `.snapshot` (Kafka prints the last batch only when lastOffset >= 0)."""
    current_txn = entry.current_txn_first_offset if entry.current_txn_first_offset >= 0 else None
    line = (
        f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch}"
        f" coordinatorEpoch: {entry.coordinator_epoch}"
        f" currentTxnFirstOffset: {optional_long(current_txn)} lastTimestamp: {entry.timestamp} "
    )
    if entry.last_offset >= 0:
        line += (
            f"firstSequence: {entry.first_sequence} lastSequence: {entry.last_sequence}"
            f" lastOffset: {entry.last_offset} offsetDelta: {entry.offset_delta}"
            f" timestamp: {entry.timestamp}"
        )
    return line


def snapshot_entry_json(entry: ProducerSnapshotEntry) -> dict[str, Any]:
    """The `--json` object of one producer in a `.snapshot`."""
    obj: dict[str, Any] = {
        "type": "producer",
        "producerId": entry.producer_id,
        "producerEpoch": entry.producer_epoch,
        "coordinatorEpoch": entry.coordinator_epoch,
        "currentTxnFirstOffset": entry.current_txn_first_offset if entry.current_txn_first_offset >= 0 else None,
        "lastTimestamp": entry.timestamp,
    }
    if entry.last_offset >= 0:
        obj.update(
            firstSequence=entry.first_sequence,
            lastSequence=entry.last_sequence,
            lastOffset=entry.last_offset,
            offsetDelta=entry.offset_delta,
            timestamp=entry.timestamp,
        )
    return obj


def leader_epoch_line(epoch: int, start_offset: int) -> str:
    """One `leader-epoch-checkpoint` entry (Kafka's tool does not dump these files)."""
    return f"epoch: {epoch} startOffset: {start_offset}"


def offset_checkpoint_line(topic: str, partition: int, offset: int) -> str:
    """One entry of a data-directory offset checkpoint (Kafka's tool does not dump these)."""
    return f"topic: {topic} partition: {partition} offset: {offset}"


def read_offset_index(data: bytes | memoryview, base_offset: int) -> tuple[np.ndarray, np.ndarray]:
    """Absolute offsets and positions of every 8-byte slot (a partial last slot is ignored)."""
    slots = np.frombuffer(data, dtype=OFFSET_INDEX_DTYPE, count=len(data) // OFFSET_INDEX_DTYPE.itemsize)
    return slots["relative_offset"].astype(np.int64) + base_offset, slots["position"].astype(np.int64)


def read_time_index(data: bytes | memoryview, base_offset: int) -> tuple[np.ndarray, np.ndarray]:
    """Timestamps and absolute offsets of every 12-byte slot (a partial last slot is ignored)."""
    slots = np.frombuffer(data, dtype=TIME_INDEX_DTYPE, count=len(data) // TIME_INDEX_DTYPE.itemsize)
    return slots["timestamp"].astype(np.int64), slots["relative_offset"].astype(np.int64) + base_offset


def offset_index_sanity_error(offsets: np.ndarray, length: int, base_offset: int, path: str) -> str | None:
    """Kafka's OffsetIndex.sanityCheck message for an index that fails it, else None."""
    if len(offsets) and int(offsets[-1]) < base_offset:
        return (
            f"Corrupt index found, index file {path} has non-zero size but the last offset is "
            f"{int(offsets[-1])} which is less than the base offset {base_offset}"
        )
    if length % OFFSET_INDEX_DTYPE.itemsize:
        return (
            f"Index file {path} is corrupt, found {length} bytes which is neither positive nor "
            f"a multiple of {OFFSET_INDEX_DTYPE.itemsize}"
        )
    return None


def time_index_sanity_error(
    timestamps: np.ndarray, offsets: np.ndarray, length: int, base_offset: int, path: str
) -> str | None:
    """Kafka's TimeIndex.sanityCheck message for a time index that fails it, else None."""
    if len(timestamps) and int(timestamps[-1]) < int(timestamps[0]):
        return (
            f"Corrupt time index found, time index file ({path}) has non-zero size but the last "
            f"timestamp is {int(timestamps[-1])} which is less than the first timestamp {int(timestamps[0])}"
        )
    if len(offsets) and int(offsets[-1]) < base_offset:
        return (
            f"Corrupt time index found, time index file ({path}) has non-zero size but the last "
            f"offset is {int(offsets[-1])} which is less than the first offset {base_offset}"
        )
    if length % TIME_INDEX_DTYPE.itemsize:
        return (
            f"Time index file {path} is corrupt, found {length} bytes which is neither positive "
            f"nor a multiple of {TIME_INDEX_DTYPE.itemsize}"
        )
    return None


def sparse_entry_count(offsets: np.ndarray, base_offset: int) -> int:
    """Slots before the first zero-filled one (a slot after the first holding the base offset).

    Kafka's tool stops there: a preallocated index left by a crash is zero-filled at the end.
    """
    if len(offsets) <= 1:
        return len(offsets)
    zero = np.flatnonzero(offsets[1:] == base_offset)
    return int(zero[0]) + 1 if len(zero) else len(offsets)


def lookup_position(offsets: np.ndarray, positions: np.ndarray, target: int) -> int:
    """Position of the largest indexed offset <= target, or 0 (the segment start)."""
    slot = int(np.searchsorted(offsets, target, side="right")) - 1
    return int(positions[slot]) if slot >= 0 else 0


def read_aborted_txns(data: bytes | memoryview, path: str) -> list[TxnIndexEntry]:
    """Every whole 34-byte `.txnindex` entry (txn_index's parser); raises CorruptTxnIndexError
    (a CorruptRecordError) with Kafka's message on an unknown version."""
    entries = parse_aborted_txns(data, path)
    return [TxnIndexEntry(*row) for row in entries.tolist()]


def kafka_snapshot_message(error: CorruptSnapshotError) -> str:
    """Kafka's text for a snapshot that producer_snapshot.read_snapshot_rows refused."""
    facts = error.facts
    schema = "Snapshot failed schema validation: Error reading field "
    if error.reason == SNAPSHOT_TRUNCATED and "field" in facts:
        return f"{schema}'{SNAPSHOT_KAFKA_NAMES.get(facts['field'], facts['field'])}': {BUFFER_UNDERFLOW}"
    if error.reason == SNAPSHOT_TRUNCATED:
        field = SNAPSHOT_KAFKA_NAMES.get(facts["entry_field"], facts["entry_field"])
        return f"{schema}'producer_entries': Error reading field '{field}': {BUFFER_UNDERFLOW}"
    if error.reason == SNAPSHOT_NEGATIVE_COUNT:
        return f"{schema}'producer_entries': Array size {facts['count']} cannot be negative"
    if error.reason == SNAPSHOT_COUNT_PAST_END:
        return (f"{schema}'producer_entries': Error reading array of size {facts['count']},"
                f" only {facts['available']} bytes available")
    if error.reason == SNAPSHOT_UNKNOWN_VERSION:
        return f"Snapshot contained an unknown file version {facts['version']}"
    return (f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {facts['stored']}."
            f" Computed crc: {facts['computed']}")


def read_producer_snapshot(data: bytes | memoryview) -> list[ProducerSnapshotEntry]:
    """Decode a producer `.snapshot` as Kafka does; raises CorruptSnapshotError with Kafka's message."""
    try:
        rows = read_snapshot_rows(data, exact=False)
    except CorruptSnapshotError as exc:
        raise CorruptSnapshotError(kafka_snapshot_message(exc), reason=exc.reason, facts=exc.facts,
                                   position=exc.position) from exc
    return [ProducerSnapshotEntry(*row) for row in rows.tolist()]


def index_mismatch_report(path: str, mismatches: Sequence[tuple[int, int]]) -> list[str]:
    """Kafka's stderr report of offset-index entries that do not point at their batch."""
    return [f"Mismatches in :{path}"] + [
        f"  Index offset: {index_offset}, log offset: {log_offset}"
        for index_offset, log_offset in reversed(mismatches)
    ]


def time_index_report(
    path: str,
    mismatches: Sequence[tuple[int, int]],
    out_of_order: Sequence[tuple[int, int]],
    not_found: Sequence[tuple[int, int]],
) -> list[str]:
    """Kafka's stderr report of time-index problems, in Kafka's order."""
    lines = []
    if mismatches:
        lines.append(f"Found timestamp mismatch in :{path}")
        lines += [f"  Index timestamp: {a}, log timestamp: {b}" for a, b in mismatches]
    if out_of_order:
        lines.append(f"Found out of order timestamp in :{path}")
        lines += [f"  Index timestamp: {a}, Previously indexed timestamp: {b}" for a, b in out_of_order]
    if not_found:
        lines.append("The following indexed offsets are not found in the log.")
        lines += [f"Indexed offset: {a}, found log offset: {b}" for a, b in not_found]
    return lines


def non_consecutive_report(path: str, pairs: Sequence[tuple[int, int]]) -> list[str]:
    """Kafka's stderr report of record offsets that skip (normal after compaction)."""
    return [f"Non-consecutive offsets in {path}"] + [
        f"  {first} is followed by {second}" for first, second in reversed(pairs)
    ]

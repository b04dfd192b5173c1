"""LogValidator: checks the batches of an append and, for a leader, assigns their offsets, leader
epoch and timestamps in place (Kafka's LogValidator and UnifiedLog.analyzeAndValidateRecords).

A function of the buffer, the topic's config, the next offset, the time, the leader epoch and
the append's origin: it reads no log state, so it is tested on its own.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import numpy as np

from logstore import _kernels
from logstore.config import TIMESTAMP_TYPE_LOG_APPEND, LogConfig
from logstore.errors import CorruptRecordError, InvalidRecordError, RecordTooLargeError
from logstore.records import (
    RecordBatch,
    build_batch_columnar,
    crc32c,
    read_batch,
    set_base_offset_and_epoch,
    set_log_append_time,
)
from logstore.records._kernels import ERR_OFFSET_DELTA, ERR_TRAILING_BYTES, OK, STATUS_MESSAGES
from logstore.records.batch import check_batch
from logstore.records.compression import Codec
from logstore.records.header import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_BIT,
    CRC_OFFSET,
    INT32_MAX,
    LOG_OVERHEAD,
    MAX_TIMESTAMP_OFFSET,
    NO_TIMESTAMP,
    RECORD_OVERHEAD_V0,
    SIZE_FIELD,
    SIZE_OFFSET,
    TIMESTAMP_TYPE_BIT,
    V2_HEADER,
    V2_HEADER_SIZE,
    BatchHeader,
    read_batch_header,
)

_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")


class ValidatedBatches(NamedTuple):
    """An append's batches after validation: the buffer they sit in, each batch's position and
    header as stored (offsets, epoch and timestamps as assigned), and their offsets."""

    headers: list[BatchHeader]
    positions: list[int]
    data: memoryview
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int  # last offset of the (first) batch holding max_timestamp
    record_count: int

    @property
    def batches(self) -> list[RecordBatch]:
        """The batches as RecordBatch views over `data` (built on demand)."""
        return [read_batch(self.data, position) for position in self.positions]


def complete_batches(view: memoryview) -> list[RecordBatch]:
    """The batches of `view`; CorruptRecordError if bytes after the last whole batch remain."""
    return [read_batch(view, position) for position in _batch_positions(view)[1]]


def _batch_positions(view: memoryview) -> tuple[list[BatchHeader], list[int]]:
    """Each complete batch's header and position, each header parsed once (the checks of
    records.BatchIterator and read_batch); CorruptRecordError if bytes after the last whole
    batch remain."""
    headers: list[BatchHeader] = []
    positions: list[int] = []
    end = view.nbytes
    position = 0
    while end - position >= LOG_OVERHEAD:
        size = SIZE_FIELD.unpack_from(view, position + SIZE_OFFSET)[0]
        if size < RECORD_OVERHEAD_V0:
            raise CorruptRecordError(f"entry length {size} below the minimum", position=position)
        if size + LOG_OVERHEAD > end - position:
            break
        headers.append(read_batch_header(view, position))
        positions.append(position)
        position += size + LOG_OVERHEAD
    if position != end:
        raise CorruptRecordError(
            f"{end - position} trailing bytes do not form a complete batch", position=position)
    return headers, positions


def validate_leader_append(buf: bytearray | memoryview, config: LogConfig, next_offset: int, now_ms: int,
                           leader_epoch: int, origin: str, *, source: str) -> ValidatedBatches:
    """Validate a leader append and assign offsets from `next_offset`, `leader_epoch` and, for
    LogAppendTime, `now_ms`, in place (recompressed into a new buffer when the topic's
    compression.type differs). `source` names the partition in errors. Raises
    InvalidRecordError (RecordTooLargeError, timestamps, counts) or CorruptRecordError."""
    view = memoryview(buf).cast("B")
    headers, positions = _batch_positions(view)
    if not headers:
        raise InvalidRecordError("an append needs at least one record batch")
    if headers[0].magic < 2:
        buf = convert_legacy(complete_batches(view), config, origin, source)
        view = memoryview(buf).cast("B")
        headers, positions = _batch_positions(view)
    target = config.compression_codec
    if target is not None and any(
            h.magic == 2 and (h.attributes & COMPRESSION_MASK) != target.code for h in headers):
        buf = _recompress(complete_batches(view), target, config, source)
        view = memoryview(buf).cast("B")
        headers, positions = _batch_positions(view)
    log_append = config.message_timestamp_type == TIMESTAMP_TYPE_LOG_APPEND
    compact = config.compact
    data = np.frombuffer(view, dtype=np.uint8)
    first_offset = next_offset
    max_timestamp, offset_of_max, count = NO_TIMESTAMP, -1, 0
    for header, position in zip(headers, positions, strict=True):
        end = position + header.batch_length + LOG_OVERHEAD
        _validate_batch(header, view[position:end], position, origin, config, source)
        low, high, null_key = _scan_records(header, data, position, end)
        if compact and null_key:
            raise InvalidRecordError(
                f"{source} is a compacted topic's partition: it cannot accept a record without a key")
        batch_max = high
        if not log_append and header.record_count:
            _check_timestamps(low, high, now_ms, position, config)
        set_base_offset_and_epoch(buf, position, next_offset, leader_epoch)
        if log_append:
            set_log_append_time(buf, position, now_ms)
            batch_max = now_ms
        elif batch_max != header.max_timestamp:
            _set_max_timestamp(buf, position, end, batch_max)
        last = next_offset + header.last_offset_delta
        if batch_max > max_timestamp:
            max_timestamp, offset_of_max = batch_max, last
        next_offset = last + 1
        count += header.record_count
    stored = [BatchHeader._make(V2_HEADER.unpack_from(view, position)) for position in positions]
    return ValidatedBatches(stored, positions, view, first_offset, next_offset - 1, max_timestamp,
                            offset_of_max, count)


def convert_legacy(batches: list[RecordBatch], config: LogConfig, origin: str, source: str) -> bytearray:
    """A leader append of magic 0/1 messages as one v2 batch, as Kafka's LogValidator converts
    them: a run of uncompressed messages, or the single compressed wrapper an append may hold,
    becomes one batch with the same codec (CreateTime; magic 0 records keep timestamp -1). The
    caller then assigns offsets and the leader epoch as for any v2 batch. Raises
    InvalidRecordError for mixed magics, more than one compressed wrapper, or a client
    setting LogAppendTime on a LogAppendTime topic; CorruptRecordError for bad bytes."""
    first = batches[0]
    for batch in batches:
        if batch.magic != first.magic:
            raise InvalidRecordError(
                f"batch magic {batch.magic} is not the same as the first batch's magic byte "
                f"{first.magic} in {source}")
    codec = next((b.compression for b in reversed(batches) if b.compression != "none"), "none")
    if codec != "none" and len(batches) > 1:
        raise InvalidRecordError(f"compressed outer record has more than one batch in {source}")
    log_append_topic = config.message_timestamp_type == TIMESTAMP_TYPE_LOG_APPEND
    records = []
    for batch in batches:
        batch.validate()
        if origin == "client" and log_append_topic and batch.timestamp_type == "LogAppendTime":
            raise InvalidRecordError(
                f"invalid timestamp type in the message at position {batch.position} of {source}: "
                "producers must not set LogAppendTime")
        records += batch.records()
    return bytearray(build_batch_columnar(
        [r.key for r in records], [r.value for r in records],
        timestamps=[r.timestamp for r in records], compression=codec))


def validate_follower_append(batch_bytes: bytes | bytearray | memoryview, *, source: str) -> ValidatedBatches:
    """Validate batches fetched from a leader, keeping their offsets and epochs: CRCs and
    increasing offsets. An empty input gives no batches (first_offset 0, last_offset -1)."""
    view = memoryview(batch_bytes).cast("B")
    headers, positions = _batch_positions(view)
    batches = [read_batch(view, position) for position in positions]
    last = -1
    max_ts, offset_of_max, count = NO_TIMESTAMP, -1, 0
    for batch in batches:
        batch.validate()
        if batch.last_offset <= last:
            raise InvalidRecordError(
                f"out of order offsets in follower append to {source}: {batch.last_offset} after {last}")
        last = batch.last_offset
        if batch.max_timestamp > max_ts:
            max_ts, offset_of_max = batch.max_timestamp, batch.last_offset
        count += batch.record_count
    first = 0
    if batches:
        first = batches[0].base_offset if batches[0].magic == 2 else batches[0].last_offset
    return ValidatedBatches(headers, positions, view, first, last, max_ts, offset_of_max, count)


def roll_offset(validated: ValidatedBatches) -> int:
    """The offset a segment rolled for this append is named at least by (Kafka's maybeRoll):
    the first offset, or for a legacy first batch, whose first inner offset is not in its
    header, `last offset - Int.MaxValue`, so the roll falls back to the log end offset."""
    if validated.headers and validated.headers[0].magic < 2:
        return validated.last_offset - INT32_MAX
    return validated.first_offset


def _validate_batch(header: BatchHeader, view: memoryview, position: int, origin: str, config: LogConfig,
                    source: str) -> None:
    """Checks of one batch (`view` holds exactly its bytes) before offsets are assigned."""
    if header.magic != 2:
        raise InvalidRecordError(
            f"batch magic {header.magic} is not the same as the first batch's magic byte 2 in {source}")
    size = header.batch_length + LOG_OVERHEAD
    if size > config.max_message_bytes:
        raise RecordTooLargeError(
            f"the record batch size in the append to {source} is {size} bytes "
            f"which exceeds the maximum configured value of {config.max_message_bytes}")
    check_batch(view, header, position)
    if origin != "client":
        return
    if header.record_count <= 0:
        raise InvalidRecordError(f"invalid reported count for record batch: {header.record_count}")
    if header.last_offset_delta + 1 != header.record_count:
        raise InvalidRecordError(
            f"inconsistent batch offset range [{header.base_offset}, {header.last_offset}] "
            f"and count of records {header.record_count}")
    if header.attributes & CONTROL_BIT:
        raise InvalidRecordError("clients are not allowed to write control records")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecordError(
            f"invalid sequence number {header.base_sequence} in record batch with "
            f"producerId {header.producer_id}")
    if header.attributes & TIMESTAMP_TYPE_BIT:
        raise InvalidRecordError(
            "invalid timestamp type in a client batch: producers must not set LogAppendTime")


def _scan_records(header: BatchHeader, data: np.ndarray, position: int, end: int) -> tuple[int, int, bool]:
    """Walk a batch's records without copying them (Kafka's skipKeyValueIterator): (min
    timestamp ignoring -1, max timestamp, any null key). `data` is the whole append's bytes;
    a compressed batch's records are decompressed first."""
    start = position + V2_HEADER_SIZE
    compressed = header.attributes & COMPRESSION_MASK
    if compressed:
        data = np.frombuffer(read_batch(data, position).records_bytes(), dtype=np.uint8)
        start, end = 0, data.size
    status, error, low, high, null_key = _kernels.scan_records(
        data, start, end, header.record_count, header.base_timestamp)
    if status in (ERR_OFFSET_DELTA, ERR_TRAILING_BYTES):
        raise InvalidRecordError(
            f"batch at position {position} holds records that disagree with its "
            f"header count {header.record_count}: {STATUS_MESSAGES[status]}")
    if status != OK:
        raise CorruptRecordError(
            f"{STATUS_MESSAGES[status]} (record byte {error - start})",
            position=position if compressed else position + V2_HEADER_SIZE + error - start)
    return int(low), int(high), bool(null_key)


def _check_timestamps(low: int, high: int, now: int, position: int, config: LogConfig) -> None:
    before = config.message_timestamp_before_max_ms
    after = config.message_timestamp_after_max_ms
    # Python ints: no int64 overflow for the Long.MAX defaults.
    if low != NO_TIMESTAMP and now - low > before:
        raise InvalidRecordError(
            f"timestamp {low} of a record in the batch at position {position} is more than "
            f"message.timestamp.before.max.ms={before} before the log's time {now}")
    if high != NO_TIMESTAMP and high - now > after:
        raise InvalidRecordError(
            f"timestamp {high} of a record in the batch at position {position} is more than "
            f"message.timestamp.after.max.ms={after} after the log's time {now}")


def _recompress(batches: list[RecordBatch], codec: Codec, config: LogConfig, source: str) -> bytearray:
    """Re-encode batches with the topic's compression.type at its compression.<codec>.level
    (Kafka's buildRecordsAndAssignOffsets)."""
    out = bytearray()
    for batch in batches:
        _validate_batch(batch.header, batch.view, batch.position, "client", config, source)
        table = batch.to_arrow()
        out += build_batch_columnar(
            table.column("key"), table.column("value"), timestamps=table.column("timestamp"),
            headers=table.column("headers"), compression=codec.name,
            compression_level=config.compression_level(codec.name),
            producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence, is_transactional=batch.is_transactional)
    return out


def _set_max_timestamp(buf: bytearray | memoryview, position: int, end: int, timestamp: int) -> None:
    """Rewrite a CreateTime batch's maxTimestamp and its CRC (Kafka's setMaxTimestamp)."""
    _INT64.pack_into(buf, position + MAX_TIMESTAMP_OFFSET, timestamp)
    _UINT32.pack_into(buf, position + CRC_OFFSET, crc32c(memoryview(buf)[position + ATTRIBUTES_OFFSET : end]))

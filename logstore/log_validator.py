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
from logstore.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
    RecordValidationError,
)
from logstore.records import RecordBatch, build_batch_columnar, crc32c, read_batch
from logstore.records._kernels import ERR_OFFSET_DELTA, ERR_TRAILING_BYTES, OK, STATUS_MESSAGES
from logstore.records.compression import Codec
from logstore.records.header import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CRC_OFFSET,
    INT32_MAX,
    LOG_OVERHEAD,
    MAX_TIMESTAMP_OFFSET,
    MIN_V2_BATCH_LENGTH,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_BIT,
    V2_HEADER_SIZE,
    BatchHeader,
)

_INT64 = struct.Struct(">q")
_INT16 = struct.Struct(">h")
_UINT32 = struct.Struct(">I")
_NO_RECORDS = np.empty(0, np.uint8)


class ValidatedBatches:
    """An append's batches after validation: the buffer they sit in, a table of each batch's
    position and header as stored (offsets, epoch and timestamps as assigned; the columns of
    logstore._kernels), and their offsets. `leader_epoch` is the epoch a leader append stamped
    on every batch (None for a follower's batches, which keep their own)."""

    __slots__ = ("table", "data", "first_offset", "last_offset", "max_timestamp", "offset_of_max_timestamp",
                 "record_count", "leader_epoch", "has_producer_ids")

    def __init__(self, table: np.ndarray, data: memoryview, first_offset: int, last_offset: int,
                 max_timestamp: int, offset_of_max_timestamp: int, record_count: int,
                 leader_epoch: int | None, has_producer_ids: bool) -> None:
        self.table = table
        self.data = data
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.max_timestamp = max_timestamp
        self.offset_of_max_timestamp = offset_of_max_timestamp  # last offset of the (first) batch holding it
        self.record_count = record_count
        self.leader_epoch = leader_epoch
        self.has_producer_ids = has_producer_ids

    @property
    def headers(self) -> list[BatchHeader]:
        """Each batch's header as stored (built on demand)."""
        return [BatchHeader._make(row) for row in self.table[:, _kernels.HEADER_COLUMNS].tolist()]

    @property
    def positions(self) -> list[int]:
        """Each batch's byte position in `data`."""
        return self.table[:, _kernels.POSITION].tolist()

    @property
    def first_magic(self) -> int:
        """The first batch's magic (2 for every leader append)."""
        return int(self.table[0, _kernels.MAGIC])

    @property
    def batches(self) -> list[RecordBatch]:
        """The batches as RecordBatch views over `data` (built on demand)."""
        return [read_batch(self.data, position) for position in self.positions]


def complete_batches(view: memoryview) -> list[RecordBatch]:
    """The batches of `view`; CorruptRecordError if bytes after the last whole batch remain."""
    return [read_batch(view, position) for position in batch_table(view)[:, _kernels.POSITION].tolist()]


_ENTRY_ERRORS = {
    _kernels.ERR_ENTRY_LENGTH: lambda value: f"entry length {value} below the minimum",
    _kernels.ERR_TRUNCATED_HEADER: lambda value: "truncated batch header",
    _kernels.ERR_BATCH_LENGTH: lambda value: f"batch length {value} below the minimum {MIN_V2_BATCH_LENGTH}",
    _kernels.ERR_TRUNCATED_MESSAGE: lambda value: "truncated message header",
    _kernels.ERR_MESSAGE_SIZE: lambda value: f"message size {value} below the minimum",
    _kernels.ERR_UNKNOWN_MAGIC: lambda value: f"unknown magic {value}",
    _kernels.ERR_TRAILING_ENTRY: lambda value: f"{value} trailing bytes do not form a complete batch",
}


def batch_table(view: memoryview | np.ndarray) -> np.ndarray:
    """The header of each complete batch of `view`, one row each (logstore._kernels' columns),
    with the checks of records.BatchIterator and read_batch_header; CorruptRecordError if
    bytes after the last whole batch remain."""
    data = view if type(view) is np.ndarray else np.frombuffer(view, np.uint8)
    status, position, value, table = _kernels.batch_table(data)
    if status != OK:
        raise CorruptRecordError(_ENTRY_ERRORS[status](value), position=position)
    return table


class LeaderChecks(NamedTuple):
    """What a topic's config makes a leader append check and stamp, read once per config:
    LogConfig's properties cost more than the validation kernel's work on a small batch."""

    config: LogConfig
    target: Codec | None  # compression.type's codec; None keeps the producer's
    target_code: int  # -1 for None
    max_message_bytes: int
    flags: int  # logstore._kernels' flags of a coordinator's append; a client's adds CLIENT
    log_append: bool
    before_max_ms: int
    after_max_ms: int

    @classmethod
    def of(cls, config: LogConfig) -> LeaderChecks:
        """The checks `config` sets."""
        target = config.compression_codec
        log_append = config.message_timestamp_type == TIMESTAMP_TYPE_LOG_APPEND
        flags = _kernels.SCAN | (_kernels.COMPACT if config.compact else 0) | (
            _kernels.LOG_APPEND_TIME if log_append else 0)
        return cls(config, target, -1 if target is None else target.code, config.max_message_bytes, flags,
                   log_append, config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms)


def validate_leader_append(buf: bytearray | memoryview, config: LogConfig | LeaderChecks, next_offset: int,
                           now_ms: int, leader_epoch: int, origin: str, *, source: str,
                           table: np.ndarray | None = None) -> ValidatedBatches:
    """Validate a leader append and assign offsets from `next_offset`, `leader_epoch` and, for
    LogAppendTime, `now_ms`, in place (recompressed into a new buffer when the topic's
    compression.type differs). `config` is the topic's, or its LeaderChecks when the caller
    keeps them; `source` names the partition in errors; `table`, an int64 array of
    logstore._kernels.COLUMNS columns, is where the batch table goes when it has the rows
    (scratch space reused by the caller). Raises InvalidRecordError (RecordTooLargeError,
    timestamps, counts) or CorruptRecordError."""
    checks = config if type(config) is LeaderChecks else LeaderChecks.of(config)
    view = buf if type(buf) is memoryview else memoryview(buf)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    data = np.frombuffer(view, np.uint8)
    if table is None:
        table = np.empty((_TABLE_ROWS, _kernels.COLUMNS), np.int64)
    args = leader_args(checks, next_offset, now_ms, leader_epoch, origin)
    result = _kernels.leader_batches(data, table, checks.target_code, *args)
    return finish_leader_append(view, table, checks, result, args, origin, source)


def leader_args(checks: LeaderChecks, next_offset: int, now_ms: int, leader_epoch: int, origin: str) -> tuple:
    """leader_batches' arguments after the target codec, for an append from `origin`."""
    flags = checks.flags | _kernels.CLIENT if origin == "client" else checks.flags
    return (next_offset, leader_epoch, checks.max_message_bytes, flags, now_ms, checks.before_max_ms,
            checks.after_max_ms)


def finish_leader_append(view: memoryview, table: np.ndarray, checks: LeaderChecks, result: tuple, args: tuple,
                         origin: str, source: str, *, crc_checked: bool = False) -> ValidatedBatches:
    """validate_leader_append after its kernel (`leader_batches` with `args` after the target
    codec) returned `result` over `view` and `table`: CRCs (the single batch's unless
    `crc_checked`), compressed, legacy or recompressed batches, LogAppendTime, errors."""
    next_offset, leader_epoch = args[0], args[1]
    rows = result[-1]
    if result[0] != OK:
        view, table, result = _settle_unusual_append(view, table, checks, result, args, origin, source)
    elif rows == 1:  # the common append, one batch filling the buffer: its CRC spans the rest
        table = table[:1]
        if not crc_checked and crc32c(view[ATTRIBUTES_OFFSET:]) != table[0, _kernels.CRC]:
            _check_crcs(view, table, 0, 1)
    else:
        table = table[:rows]
        _check_crcs(view, table, 0, rows)
    # result: status, row, value, at, last offset, max timestamp, its offset, record count,
    # any producer id, any max timestamp to rewrite, rows
    if checks.log_append or result[9]:
        _rewrite_max_timestamps(view, table, checks.log_append)
    return ValidatedBatches(table, view, next_offset, result[4], result[5], result[6], result[7], leader_epoch,
                            bool(result[8]))


_TABLE_ROWS = 8  # batches a leader append usually holds at most
_REWRITES = (_kernels.NO_BATCHES, _kernels.LEGACY, _kernels.RECOMPRESS)


def _settle_unusual_append(view: memoryview, table: np.ndarray, leader: LeaderChecks, result: tuple,
                          checks: tuple, origin: str, source: str) -> tuple[memoryview, np.ndarray, tuple]:
    """The leader appends `leader_batches` did not settle (its non-OK `result`): a bigger
    table, legacy conversion, recompression, compressed records, or an error to raise.
    Returns the (maybe new) buffer's view, its batch table and the final OK result."""
    data = np.frombuffer(view, np.uint8)
    target, config = leader.target, leader.config
    status = result[0]
    if status == _kernels.TABLE_TOO_SMALL:
        table = np.empty((result[2], _kernels.COLUMNS), np.int64)
        result = _kernels.leader_batches(data, table, leader.target_code, *checks)
        status = result[0]
    if status in _ENTRY_ERRORS:
        raise CorruptRecordError(_ENTRY_ERRORS[status](result[2]), position=result[1])
    table = table[: result[-1]]
    if status in _REWRITES:
        if status == _kernels.NO_BATCHES:
            raise InvalidRecordError("an append needs at least one record batch")
        if status == _kernels.LEGACY:
            view = memoryview(convert_legacy(complete_batches(view), config, origin, source))
            table = batch_table(view)
        if target is not None and _needs_recompression(table, target.code):
            view = memoryview(_recompress(view, table, target, config, source))
            table = batch_table(view)
        data = np.frombuffer(view, np.uint8)
        result = _kernels.validate_batches(data, table, 0, len(table), _NO_RECORDS, -1, *checks)
    return view, table, _settle(view, data, table, result, 0, len(table), checks, source)


def _settle(view: memoryview, data: np.ndarray, table: np.ndarray, result: tuple, start: int, stop: int,
            checks: tuple, source: str) -> tuple:
    """Finish a validate_batches `result` over table[start:stop]: check each batch's CRC where
    Kafka does (after its magic and size), decompress compressed batches' records for the walk
    and resume there, and raise the first failure. Returns the final OK result."""
    checked = start  # rows below this have a checked CRC
    while True:
        status, row = result[0], result[1]
        upto = row if status in (OK, _kernels.ERR_MAGIC, _kernels.ERR_TOO_LARGE) else row + 1
        if checked < upto:
            _check_crcs(view, table, checked, upto)
            checked = upto
        if status == OK:
            return result
        if status != _kernels.NEEDS_RECORDS:
            _raise_batch_error(view, result, table, checks, source)
        records = np.frombuffer(read_batch(view, int(table[row, _kernels.POSITION])).records_bytes(), np.uint8)
        result = _kernels.validate_batches(data, table, row, stop, records, row, *checks)


def _check_crcs(view: memoryview, table: np.ndarray, start: int, stop: int) -> None:
    """CorruptRecordError unless the CRC of each batch of table[start:stop] matches."""
    for row in table[start:stop].tolist():
        position = row[_kernels.POSITION]
        computed = crc32c(view[position + ATTRIBUTES_OFFSET : position + row[_kernels.BATCH_LENGTH] + LOG_OVERHEAD])
        stored = row[_kernels.CRC]
        if stored != computed:
            raise CorruptRecordError(
                f"batch CRC-32C mismatch: stored {stored:#010x}, computed {computed:#010x}", position=position)


def _raise_batch_error(view: memoryview, result: tuple, table: np.ndarray, checks: tuple, source: str) -> None:
    """Raise the error validate_batches reported (Kafka's messages)."""
    status, row, value, at = result[:4]
    header = BatchHeader._make(table[row, _kernels.HEADER_COLUMNS].tolist())
    position = int(table[row, _kernels.POSITION])
    max_message_bytes, now = checks[2], checks[4]
    if status == _kernels.ERR_MAGIC:
        raise InvalidRecordError(
            f"batch magic {value} is not the same as the first batch's magic byte 2 in {source}")
    if status == _kernels.ERR_TOO_LARGE:
        raise RecordTooLargeError(
            f"the record batch size in the append to {source} is {value} bytes "
            f"which exceeds the maximum configured value of {max_message_bytes}")
    if status == _kernels.ERR_CODEC:
        raise CorruptRecordError(f"unknown compression codec {value}", position=position)
    if status == _kernels.ERR_NEGATIVE_COUNT:
        raise CorruptRecordError("negative record count or last offset delta", position=position)
    if status == _kernels.ERR_COUNT_FIT:
        raise CorruptRecordError(
            f"record count {header.record_count} cannot fit in {value} bytes", position=position)
    if status == _kernels.ERR_CLIENT_COUNT:
        raise InvalidRecordError(f"invalid reported count for record batch: {header.record_count}")
    if status == _kernels.ERR_OFFSET_RANGE:
        raise InvalidRecordError(
            f"inconsistent batch offset range [{header.base_offset}, {header.last_offset}] "
            f"and count of records {header.record_count}")
    if status == _kernels.ERR_CONTROL:
        raise InvalidRecordError("clients are not allowed to write control records")
    if status == _kernels.ERR_SEQUENCE:
        raise InvalidRecordError(
            f"invalid sequence number {header.base_sequence} in record batch with "
            f"producerId {header.producer_id}")
    if status == _kernels.ERR_TIMESTAMP_TYPE:
        raise InvalidRecordError(
            "invalid timestamp type in a client batch: producers must not set LogAppendTime")
    if status == _kernels.ERR_NULL_KEY:
        _raise_null_keys(read_batch(view, position), source)
    # Python ints in the messages: no int64 overflow for the Long.MAX defaults.
    if status == _kernels.ERR_TIMESTAMP_BEFORE:
        _raise_timestamps(read_batch(view, position), now, checks[5], checks[6],
                          f"timestamp {value} of a record in the batch at position {position} is more than "
                          f"message.timestamp.before.max.ms={checks[5]} before the log's time {now}")
    if status == _kernels.ERR_TIMESTAMP_AFTER:
        _raise_timestamps(read_batch(view, position), now, checks[5], checks[6],
                          f"timestamp {value} of a record in the batch at position {position} is more than "
                          f"message.timestamp.after.max.ms={checks[6]} after the log's time {now}")
    if status in (ERR_OFFSET_DELTA, ERR_TRAILING_BYTES):
        raise InvalidRecordError(
            f"batch at position {position} holds records that disagree with its "
            f"header count {header.record_count}: {STATUS_MESSAGES[status]}")
    compressed = header.attributes & COMPRESSION_MASK
    raise CorruptRecordError(f"{STATUS_MESSAGES[status]} (record byte {at})",
                             position=position if compressed else position + V2_HEADER_SIZE + at)


def _raise_null_keys(batch: RecordBatch, source: str) -> None:
    """RecordValidationError naming each record of `batch` without a key (Kafka's KIP-467
    record errors: the client learns which records failed, not only that the batch did)."""
    why = f"{source} is a compacted topic's partition: it cannot accept a record without a key"
    try:
        null = np.flatnonzero(batch.columns().key_null).tolist()
    except CorruptRecordError:  # a damaged count the record walk allowed: the batch fails without names
        null = []
    raise RecordValidationError(why, [(i, why) for i in null])


def _raise_timestamps(batch: RecordBatch, now: int, before_max: int, after_max: int, message: str) -> None:
    """InvalidTimestampError naming each record of `batch` timestamped more than `before_max`
    before or `after_max` after `now` (KIP-467 record errors, as for null keys)."""
    try:
        stamps = batch.columns().timestamp.tolist()
    except CorruptRecordError:  # a damaged count the record walk allowed: the batch fails without names
        stamps = []
    bad = [(i, f"timestamp {t} is out of range: it must be within [{now - before_max}, {now + after_max}]")
           for i, t in enumerate(stamps) if t != NO_TIMESTAMP and (now - t > before_max or t - now > after_max)]
    raise InvalidTimestampError(message, bad)


def _needs_recompression(table: np.ndarray, code: int) -> bool:
    """True when a magic 2 batch's codec is not the topic's `code`."""
    v2 = table[:, _kernels.MAGIC] == 2
    return bool(((table[v2, _kernels.ATTRIBUTES] & COMPRESSION_MASK) != code).any())


def _rewrite_max_timestamps(view: memoryview, table: np.ndarray, log_append: bool) -> None:
    """Stamp each batch's validated max timestamp (and with `log_append` the LogAppendTime
    attribute) and its new CRC, in the buffer and the table (Kafka's setMaxTimestamp)."""
    rows = table[:, [_kernels.POSITION, _kernels.BATCH_LENGTH, _kernels.ATTRIBUTES, _kernels.MAX_TIMESTAMP,
                     _kernels.VALIDATED_MAX_TIMESTAMP]].tolist()
    for row, (position, length, attributes, stored, validated) in enumerate(rows):
        if not log_append and stored == validated:
            continue
        if log_append:
            attributes |= TIMESTAMP_TYPE_BIT
            _INT16.pack_into(view, position + ATTRIBUTES_OFFSET, attributes)
        _INT64.pack_into(view, position + MAX_TIMESTAMP_OFFSET, validated)
        crc = crc32c(view[position + ATTRIBUTES_OFFSET : position + length + LOG_OVERHEAD])
        _UINT32.pack_into(view, position + CRC_OFFSET, crc)
        table[row, _kernels.ATTRIBUTES] = attributes
        table[row, _kernels.MAX_TIMESTAMP] = validated
        table[row, _kernels.CRC] = crc


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
    table = batch_table(view)
    batches = [read_batch(view, position) for position in table[:, _kernels.POSITION].tolist()]
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
    producers = bool((table[:, _kernels.PRODUCER_ID] > NO_PRODUCER_ID).any())
    return ValidatedBatches(table, view, first, last, max_ts, offset_of_max, count, None, producers)


def roll_offset(validated: ValidatedBatches) -> int:
    """The offset a segment rolled for this append is named at least by (Kafka's maybeRoll):
    the first offset, or for a legacy first batch, whose first inner offset is not in its
    header, `last offset - Int.MaxValue`, so the roll falls back to the log end offset."""
    if len(validated.table) and validated.first_magic < 2:
        return validated.last_offset - INT32_MAX
    return validated.first_offset


def _recompress(view: memoryview, table: np.ndarray, codec: Codec, config: LogConfig, source: str) -> bytearray:
    """Re-encode batches with the topic's compression.type at its compression.<codec>.level
    (Kafka's buildRecordsAndAssignOffsets), each checked as a client's batch first."""
    data = np.frombuffer(view, np.uint8)
    # Each batch gets a client's header checks, without the record walk (done after).
    checks = (0, NO_PARTITION_LEADER_EPOCH, config.max_message_bytes, _kernels.CLIENT, 0,
              config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms)
    out = bytearray()
    for row, position in enumerate(table[:, _kernels.POSITION].tolist()):
        result = _kernels.validate_batches(data, table, row, row + 1, _NO_RECORDS, -1, *checks)
        _settle(view, data, table, result, row, row + 1, checks, source)
        batch = read_batch(view, position)
        arrow = batch.to_arrow()
        out += build_batch_columnar(
            arrow.column("key"), arrow.column("value"), timestamps=arrow.column("timestamp"),
            headers=arrow.column("headers"), compression=codec.name,
            compression_level=config.compression_level(codec.name),
            producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence, is_transactional=batch.is_transactional)
    return out

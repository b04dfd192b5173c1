"""numba kernels of the Log's append path (records/_kernels.py holds the codec's own, and the
varint reader and status codes both use).

`batch_table` parses the header of every entry of an append into one int64 row each (the
columns below); `validate_batches` is the leader's per-batch validation over that table
(Kafka's LogValidator checks, in its order, except the CRC, which the caller checks with the
`crc32c` package) and stamps offsets and the leader epoch; `_scan_records` is Kafka's "skip
key/value" record walk it uses (a private kernel, not inlined: numba's inlining made the walk
four times slower): it checks the structure of every record of a v2 batch and
gathers what validation needs (timestamp range, null keys, offset deltas) without copying
keys, values or headers.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from logstore.records._kernels import (
    ERR_HEADER_COUNT,
    ERR_HEADER_KEY,
    ERR_HEADER_VALUE,
    ERR_KEY_LENGTH,
    ERR_OFFSET_DELTA,
    ERR_RECORD_LENGTH,
    ERR_RECORD_SIZE_MISMATCH,
    ERR_TRAILING_BYTES,
    ERR_VALUE_LENGTH,
    ERR_VARINT,
    MIN_HEADER_SIZE,
    MIN_RECORD_BODY,
    MIN_RECORD_SIZE,
    OK,
    read_zigzag,
)
from logstore.records.compression import CODECS
from logstore.records.header import (
    ATTRIBUTES_OFFSET,
    BASE_SEQUENCE_OFFSET,
    BASE_TIMESTAMP_OFFSET,
    COMPRESSION_MASK,
    CONTROL_BIT,
    CRC_OFFSET,
    LAST_OFFSET_DELTA_OFFSET,
    LEGACY_ATTRIBUTES_OFFSET,
    LEGACY_CRC_OFFSET,
    LEGACY_MIN_MESSAGE,
    LEGACY_TIMESTAMP_OFFSET,
    LEGACY_V0_HEADER,
    LEGACY_V1_HEADER,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    MIN_V2_BATCH_LENGTH,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    PARTITION_LEADER_EPOCH_OFFSET,
    PRODUCER_EPOCH_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORD_OVERHEAD_V0,
    RECORDS_COUNT_OFFSET,
    SIZE_OFFSET,
    TIMESTAMP_TYPE_BIT,
    V2_HEADER_SIZE,
)

VARINT_MAX_BYTES = 5
VARLONG_MAX_BYTES = 10

# Columns of a batch table: the entry's position, then header.BatchHeader's fields in order
# (legacy entries hold its "none" values), then the max timestamp validation settled on.
POSITION = 0
BASE_OFFSET = 1
BATCH_LENGTH = 2
PARTITION_LEADER_EPOCH = 3
MAGIC = 4
CRC = 5
ATTRIBUTES = 6
LAST_OFFSET_DELTA = 7
BASE_TIMESTAMP = 8
MAX_TIMESTAMP = 9
PRODUCER_ID = 10
PRODUCER_EPOCH = 11
BASE_SEQUENCE = 12
RECORD_COUNT = 13
VALIDATED_MAX_TIMESTAMP = 14
COLUMNS = 15
HEADER_COLUMNS = slice(BASE_OFFSET, RECORD_COUNT + 1)

# batch_table's status codes (after records._kernels' record-walk codes).
ERR_ENTRY_LENGTH = 20  # value: the size field
ERR_TRUNCATED_HEADER = 21
ERR_BATCH_LENGTH = 22  # value: the batch length
ERR_TRUNCATED_MESSAGE = 23
ERR_MESSAGE_SIZE = 24  # value: the size field
ERR_UNKNOWN_MAGIC = 25  # value: the magic byte
ERR_TRAILING_ENTRY = 26  # value: the bytes left
TABLE_TOO_SMALL = 27  # value: the rows needed
# validate_batches' status codes; the CRC is checked before every check from ERR_CODEC on.
ERR_MAGIC = 30
ERR_TOO_LARGE = 31  # value: the batch's size in bytes
ERR_CODEC = 32  # value: the codec id
ERR_NEGATIVE_COUNT = 33
ERR_COUNT_FIT = 34  # value: the bytes after the header
ERR_CLIENT_COUNT = 35
ERR_OFFSET_RANGE = 36
ERR_CONTROL = 37
ERR_SEQUENCE = 38
ERR_TIMESTAMP_TYPE = 39
ERR_NULL_KEY = 40
ERR_TIMESTAMP_BEFORE = 41  # value: the record's timestamp
ERR_TIMESTAMP_AFTER = 42  # value: the record's timestamp
NEEDS_RECORDS = 50  # a compressed batch: the caller decompresses its records and resumes there
# leader_batches' statuses for appends the caller first rewrites into new v2 batches.
NO_BATCHES = 51
LEGACY = 52  # the first entry is a magic 0/1 message
RECOMPRESS = 53  # a magic 2 batch's codec is not the topic's

# validate_batches' flags.
CLIENT = 1  # origin client: the checks Kafka makes of producers' batches
COMPACT = 2  # a compacted topic: every record needs a key
LOG_APPEND_TIME = 4  # message.timestamp.type=LogAppendTime
SCAN = 8  # walk the records and stamp offsets (without: the header checks only)
_CODEC_COUNT = len(CODECS)
_V1_HEADER_SIZE = LEGACY_V1_HEADER.size
_V0_HEADER_SIZE = LEGACY_V0_HEADER.size
_V1_MIN_MESSAGE = LEGACY_MIN_MESSAGE[1]
_V0_MIN_MESSAGE = LEGACY_MIN_MESSAGE[0]


@njit(cache=True, inline="always")
def _uint(buf, pos, size):
    """Big-endian unsigned integer of `size` bytes at pos."""
    value = np.int64(0)
    for i in range(size):
        value = (value << 8) | np.int64(buf[pos + i])
    return value


@njit(cache=True, inline="always")
def _int(buf, pos, size):
    """Big-endian signed integer of `size` (2, 4 or 8) bytes at pos."""
    value = _uint(buf, pos, size)
    if size < 8 and value >= np.int64(1) << (8 * size - 1):
        value -= np.int64(1) << (8 * size)
    return value


@njit(cache=True, inline="always")
def _put(buf, pos, size, value):
    """Write `value` big-endian in `size` bytes at pos."""
    for i in range(size - 1, -1, -1):
        buf[pos + i] = value & 0xFF
        value >>= 8


@njit(cache=True, inline="always")
def _exceeds(a, b, limit):
    """a - b > limit for any int64 a, b and a limit >= 0, without overflow."""
    return a > b and np.uint64(a) - np.uint64(b) > np.uint64(limit)


@njit(cache=True)
def batch_table(buf):
    """Header of every complete entry of `buf` (any magic), one row each (the columns above).

    Returns (status, position, value, table): the checks of records.BatchIterator and
    read_batch_header, stopping at the first failing entry; an entry running past the end
    ends the table, and bytes left after the last one are ERR_TRAILING_ENTRY.
    """
    status, position, value = _parse_entries(buf, np.empty((0, COLUMNS), np.int64))
    table = np.empty((value if status == TABLE_TOO_SMALL else 0, COLUMNS), np.int64)
    if status == TABLE_TOO_SMALL:
        status, position, value = _parse_entries(buf, table)
    return status, position, value, table


@njit(cache=True, inline="always")
def _parse_entries(buf, table):
    """batch_table's work into `table`: (status, position, value), with OK the row count in
    value, or TABLE_TOO_SMALL and the rows needed."""
    end = buf.size
    count = 0
    pos = 0
    while end - pos >= LOG_OVERHEAD:
        size = _int(buf, pos + SIZE_OFFSET, 4)
        if size < RECORD_OVERHEAD_V0:
            return ERR_ENTRY_LENGTH, pos, size
        if size + LOG_OVERHEAD > end - pos:
            break
        magic = np.int64(buf[pos + MAGIC_OFFSET])
        remaining = end - pos
        if magic == 2:
            if remaining < V2_HEADER_SIZE:
                return ERR_TRUNCATED_HEADER, pos, 0
            if size < MIN_V2_BATCH_LENGTH:
                return ERR_BATCH_LENGTH, pos, size
        elif magic == 0 or magic == 1:
            if remaining < (_V1_HEADER_SIZE if magic == 1 else _V0_HEADER_SIZE):
                return ERR_TRUNCATED_MESSAGE, pos, 0
            if size < (_V1_MIN_MESSAGE if magic == 1 else _V0_MIN_MESSAGE):
                return ERR_MESSAGE_SIZE, pos, size
        else:
            return ERR_UNKNOWN_MAGIC, pos, magic
        count += 1
        pos += size + LOG_OVERHEAD
    if pos != end:
        return ERR_TRAILING_ENTRY, pos, end - pos
    if count > table.shape[0]:
        return TABLE_TOO_SMALL, 0, count
    pos = 0
    for row in range(count):
        magic = np.int64(buf[pos + MAGIC_OFFSET])
        table[row, POSITION] = pos
        table[row, BASE_OFFSET] = _int(buf, pos, 8)
        table[row, BATCH_LENGTH] = _int(buf, pos + SIZE_OFFSET, 4)
        table[row, MAGIC] = magic
        table[row, CRC] = _uint(buf, pos + CRC_OFFSET, 4)
        if magic == 2:
            table[row, PARTITION_LEADER_EPOCH] = _int(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, 4)
            table[row, ATTRIBUTES] = _int(buf, pos + ATTRIBUTES_OFFSET, 2)
            table[row, LAST_OFFSET_DELTA] = _int(buf, pos + LAST_OFFSET_DELTA_OFFSET, 4)
            table[row, BASE_TIMESTAMP] = _int(buf, pos + BASE_TIMESTAMP_OFFSET, 8)
            table[row, MAX_TIMESTAMP] = _int(buf, pos + MAX_TIMESTAMP_OFFSET, 8)
            table[row, PRODUCER_ID] = _int(buf, pos + PRODUCER_ID_OFFSET, 8)
            table[row, PRODUCER_EPOCH] = _int(buf, pos + PRODUCER_EPOCH_OFFSET, 2)
            table[row, BASE_SEQUENCE] = _int(buf, pos + BASE_SEQUENCE_OFFSET, 4)
            table[row, RECORD_COUNT] = _int(buf, pos + RECORDS_COUNT_OFFSET, 4)
        else:
            # Legacy: offset, size, crc, magic, attributes, [timestamp] (docs/FORMAT.md "Legacy messages").
            table[row, CRC] = _uint(buf, pos + LEGACY_CRC_OFFSET, 4)
            attributes = np.int64(buf[pos + LEGACY_ATTRIBUTES_OFFSET])
            table[row, ATTRIBUTES] = attributes - 256 if attributes >= 128 else attributes
            timestamp = _int(buf, pos + LEGACY_TIMESTAMP_OFFSET, 8) if magic == 1 else np.int64(NO_TIMESTAMP)
            table[row, PARTITION_LEADER_EPOCH] = -1
            table[row, LAST_OFFSET_DELTA] = 0
            table[row, BASE_TIMESTAMP] = timestamp
            table[row, MAX_TIMESTAMP] = timestamp
            table[row, PRODUCER_ID] = NO_PRODUCER_ID
            table[row, PRODUCER_EPOCH] = -1
            table[row, BASE_SEQUENCE] = -1
            table[row, RECORD_COUNT] = 1
        table[row, VALIDATED_MAX_TIMESTAMP] = table[row, MAX_TIMESTAMP]
        pos += table[row, BATCH_LENGTH] + LOG_OVERHEAD
    return OK, pos, count


@njit(cache=True)
def _scan_records(buf, start, end, count, base_timestamp):
    """Walk `count` records in buf[start:end] by records.record_grammar's rules, record i
    carrying offset delta i.

    Returns (status, error position, min timestamp (ignoring -1), max timestamp, any null key);
    status is one of records._kernels' codes.
    """
    pos = start
    min_ts = np.int64(0x7FFFFFFFFFFFFFFF)
    max_ts = np.int64(NO_TIMESTAMP)
    null_key = False
    for i in range(count):
        length, p = read_zigzag(buf, pos, end, VARINT_MAX_BYTES)
        if p < 0:
            return ERR_VARINT, pos, min_ts, max_ts, null_key
        if length < MIN_RECORD_BODY or length > end - p:
            return ERR_RECORD_LENGTH, pos, min_ts, max_ts, null_key
        record_end = p + length
        p += 1  # attributes
        delta, p = read_zigzag(buf, p, record_end, VARLONG_MAX_BYTES)
        if p < 0:
            return ERR_VARINT, pos, min_ts, max_ts, null_key
        ts = base_timestamp + delta
        if ts != NO_TIMESTAMP and ts < min_ts:
            min_ts = ts
        if ts > max_ts:
            max_ts = ts
        delta, p = read_zigzag(buf, p, record_end, VARINT_MAX_BYTES)
        if p < 0:
            return ERR_VARINT, pos, min_ts, max_ts, null_key
        if delta != i:
            return ERR_OFFSET_DELTA, pos, min_ts, max_ts, null_key
        n, p = read_zigzag(buf, p, record_end, VARINT_MAX_BYTES)  # key
        if p < 0:
            return ERR_VARINT, pos, min_ts, max_ts, null_key
        if n < -1 or n > record_end - p:
            return ERR_KEY_LENGTH, pos, min_ts, max_ts, null_key
        if n == -1:
            null_key = True
        elif n > 0:
            p += n
        n, p = read_zigzag(buf, p, record_end, VARINT_MAX_BYTES)  # value
        if p < 0:
            return ERR_VARINT, pos, min_ts, max_ts, null_key
        if n < -1 or n > record_end - p:
            return ERR_VALUE_LENGTH, pos, min_ts, max_ts, null_key
        if n > 0:
            p += n
        headers, p = read_zigzag(buf, p, record_end, VARINT_MAX_BYTES)
        if p < 0:
            return ERR_VARINT, pos, min_ts, max_ts, null_key
        if headers < 0 or headers > (record_end - p) // MIN_HEADER_SIZE:
            return ERR_HEADER_COUNT, pos, min_ts, max_ts, null_key
        for _ in range(headers):
            n, p = read_zigzag(buf, p, record_end, VARINT_MAX_BYTES)
            if p < 0:
                return ERR_VARINT, pos, min_ts, max_ts, null_key
            if n < 0 or n > record_end - p:
                return ERR_HEADER_KEY, pos, min_ts, max_ts, null_key
            p += n
            n, p = read_zigzag(buf, p, record_end, VARINT_MAX_BYTES)
            if p < 0:
                return ERR_VARINT, pos, min_ts, max_ts, null_key
            if n < -1 or n > record_end - p:
                return ERR_HEADER_VALUE, pos, min_ts, max_ts, null_key
            if n > 0:
                p += n
        if p != record_end:
            return ERR_RECORD_SIZE_MISMATCH, pos, min_ts, max_ts, null_key
        pos = record_end
    if pos != end:
        return ERR_TRAILING_BYTES, pos, min_ts, max_ts, null_key
    return OK, pos, min_ts, max_ts, null_key


@njit(cache=True)
def validate_batches(buf, table, start, stop, records, records_row, first_offset, leader_epoch,
                     max_message_bytes, flags, now, before_max, after_max):
    """Validate the magic 2 batches table[start:stop] of `buf` (rows from `batch_table`) as a
    leader does, in Kafka's order except the CRC; with `scan`, also walk each batch's records
    and stamp its base offset (counting from `first_offset` at row 0) and `leader_epoch`, in
    `buf` and the table, and record its validated max timestamp.

    A compressed batch's records are walked in `records`, its decompressed records section,
    when it is row `records_row`; any other stops with NEEDS_RECORDS. Returns (status, row,
    value, record byte, last offset, max timestamp, its offset, record count, any producer id,
    any validated max timestamp differing from the header's): at the first failing row its
    status and detail, else OK with the aggregates over the whole table.
    """
    client = flags & CLIENT
    compact = flags & COMPACT
    log_append = flags & LOG_APPEND_TIME
    next_offset = first_offset
    if start > 0:
        next_offset = table[start - 1, BASE_OFFSET] + table[start - 1, LAST_OFFSET_DELTA] + 1
    for row in range(start, stop):
        position = table[row, POSITION]
        magic = table[row, MAGIC]
        if magic != 2:
            return ERR_MAGIC, row, magic, 0, 0, 0, 0, 0, False, False
        size = table[row, BATCH_LENGTH] + LOG_OVERHEAD
        if size > max_message_bytes:
            return ERR_TOO_LARGE, row, size, 0, 0, 0, 0, 0, False, False
        attributes = table[row, ATTRIBUTES]
        codec = attributes & COMPRESSION_MASK
        if codec >= _CODEC_COUNT:
            return ERR_CODEC, row, codec, 0, 0, 0, 0, 0, False, False
        count = table[row, RECORD_COUNT]
        delta = table[row, LAST_OFFSET_DELTA]
        if count < 0 or delta < 0:
            return ERR_NEGATIVE_COUNT, row, 0, 0, 0, 0, 0, 0, False, False
        body = size - V2_HEADER_SIZE
        if codec == 0 and count > body // MIN_RECORD_SIZE:
            return ERR_COUNT_FIT, row, body, 0, 0, 0, 0, 0, False, False
        if client:
            if count <= 0:
                return ERR_CLIENT_COUNT, row, 0, 0, 0, 0, 0, 0, False, False
            if delta + 1 != count:
                return ERR_OFFSET_RANGE, row, 0, 0, 0, 0, 0, 0, False, False
            if attributes & CONTROL_BIT:
                return ERR_CONTROL, row, 0, 0, 0, 0, 0, 0, False, False
            if table[row, PRODUCER_ID] > NO_PRODUCER_ID and table[row, BASE_SEQUENCE] < 0:
                return ERR_SEQUENCE, row, 0, 0, 0, 0, 0, 0, False, False
            if attributes & TIMESTAMP_TYPE_BIT:
                return ERR_TIMESTAMP_TYPE, row, 0, 0, 0, 0, 0, 0, False, False
        if not flags & SCAN:
            continue
        if codec == 0:
            status, at, low, high, null_key = _scan_records(
                buf, position + V2_HEADER_SIZE, position + size, count, table[row, BASE_TIMESTAMP])
            at -= position + V2_HEADER_SIZE
        elif row == records_row:
            status, at, low, high, null_key = _scan_records(
                records, 0, records.size, count, table[row, BASE_TIMESTAMP])
        else:
            return NEEDS_RECORDS, row, 0, 0, 0, 0, 0, 0, False, False
        if status != OK:
            return status, row, 0, at, 0, 0, 0, 0, False, False
        if compact and null_key:
            return ERR_NULL_KEY, row, 0, 0, 0, 0, 0, 0, False, False
        if not log_append and count:
            if low != NO_TIMESTAMP and _exceeds(now, low, before_max):
                return ERR_TIMESTAMP_BEFORE, row, low, 0, 0, 0, 0, 0, False, False
            if high != NO_TIMESTAMP and _exceeds(high, now, after_max):
                return ERR_TIMESTAMP_AFTER, row, high, 0, 0, 0, 0, 0, False, False
        _put(buf, position, 8, next_offset)
        _put(buf, position + PARTITION_LEADER_EPOCH_OFFSET, 4, leader_epoch)
        table[row, BASE_OFFSET] = next_offset
        table[row, PARTITION_LEADER_EPOCH] = leader_epoch
        table[row, VALIDATED_MAX_TIMESTAMP] = now if log_append else high
        next_offset += delta + 1
    max_timestamp = np.int64(NO_TIMESTAMP)
    offset_of_max = np.int64(-1)
    records_total = np.int64(0)
    producers = False
    rewrites = False
    for row in range(table.shape[0]):
        producers |= table[row, PRODUCER_ID] > NO_PRODUCER_ID
        rewrites |= table[row, VALIDATED_MAX_TIMESTAMP] != table[row, MAX_TIMESTAMP]
        timestamp = table[row, VALIDATED_MAX_TIMESTAMP]
        if timestamp > max_timestamp:
            max_timestamp = timestamp
            offset_of_max = table[row, BASE_OFFSET] + table[row, LAST_OFFSET_DELTA]
        records_total += table[row, RECORD_COUNT]
    return (OK, stop, 0, 0, next_offset - 1, max_timestamp, offset_of_max, records_total, producers,
            rewrites)


@njit(cache=True)
def leader_batches(buf, table, target_codec, first_offset, leader_epoch, max_message_bytes, flags, now,
                   before_max, after_max):
    """A leader append's batch table (`batch_table`, into the rows of `table`) validated by
    `validate_batches` over all rows: its result with the row count appended. Stops early with
    the table's status (TABLE_TOO_SMALL: the rows needed in value), NO_BATCHES, LEGACY, or, for a
    `target_codec` >= 0 (the topic's compression.type), RECOMPRESS."""
    status, position, rows = _parse_entries(buf, table)
    if status != OK or rows == 0 or table[0, MAGIC] < 2:
        if status == OK:
            status = NO_BATCHES if rows == 0 else LEGACY
        return status, position, rows, 0, 0, 0, 0, 0, False, False, rows
    table = table[:rows]
    if target_codec >= 0:
        for row in range(rows):
            if table[row, MAGIC] == 2 and table[row, ATTRIBUTES] & COMPRESSION_MASK != target_codec:
                return RECOMPRESS, row, 0, 0, 0, 0, 0, 0, False, False, rows
    result = validate_batches(buf, table, 0, rows, buf[:0], -1, first_offset, leader_epoch, max_message_bytes,
                              flags, now, before_max, after_max)
    return result + (rows,)

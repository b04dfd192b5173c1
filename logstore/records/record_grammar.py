"""The v2 record grammar (docs/FORMAT.md "Record"), walked in plain Python: the reference the
three compiled walkers are held to (records._kernels.decode_records, the validator's
logstore._kernels._scan_records and the cleaner's compaction._kernels.scan_records), as
aiokafka keeps `_MemoryRecordsPy` beside its compiled twin. Slow on purpose: one record field
at a time, in the order of Kafka's DefaultRecord.readFrom.

The rules, per record: a length of at least MIN_RECORD_BODY that fits the batch; attributes;
timestampDelta (varlong); offsetDelta; key and value lengths of -1 (null) or more that fit the
record; a header count that is not negative and that the record's bytes can hold; header keys
that are not null; and fields that fill the declared length exactly. After the batch's record
count, no bytes may be left. Kafka refuses the same records, some with another message (it
reads a length below the minimum, or a header count past the record, as a size mismatch).
logstore is stricter in two corners Kafka never writes: a length below -1, which Kafka reads as
null, and a varint whose value does not fit 32 bits, whose extra bits Kafka drops.
"""

from __future__ import annotations

from typing import NamedTuple

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
    OK,
)

VARINT_BYTES = 5
VARLONG_BYTES = 10
_UINT32_LIMIT = 1 << 32
_UINT64_MASK = (1 << 64) - 1


class RecordSpan(NamedTuple):
    """One record as the walk found it: its bytes [start, end) (length varint included) and fields."""

    start: int
    end: int
    timestamp_delta: int
    offset_delta: int
    key_length: int
    value_length: int
    header_count: int


class Walk(NamedTuple):
    """The outcome: `status` (records._kernels' codes), where the failing field and its record
    start (on OK both are where the walk ended), and the records read before any failure."""

    status: int
    field_position: int
    record_position: int
    records: list[RecordSpan]


class _Refused(Exception):
    def __init__(self, status: int, position: int):
        self.status, self.position = status, position


def _zigzag(buf: bytes, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    """The zigzag varint at `pos` (not past `end`) and the position after it; _Refused(ERR_VARINT)
    when it runs past `end`, is longer than `max_bytes` or (an int32) does not fit 32 bits."""
    z = shift = 0
    for at in range(pos, min(pos + max_bytes, end)):
        z |= (buf[at] & 0x7F) << shift
        if buf[at] < 0x80:
            if max_bytes == VARINT_BYTES and z >= _UINT32_LIMIT:
                break
            z &= _UINT64_MASK
            return (z >> 1) ^ -(z & 1), at + 1
        shift += 7
    raise _Refused(ERR_VARINT, pos)


def _length(buf: bytes, pos: int, end: int, lowest: int, status: int) -> tuple[int, int]:
    """A key, value or header length at `pos`: at least `lowest`, and its bytes inside `end`."""
    n, after = _zigzag(buf, pos, end, VARINT_BYTES)
    if n < lowest or n > end - after:
        raise _Refused(status, pos)
    return n, after + max(n, 0)


def _record(buf: bytes, pos: int, end: int, index: int, check_offset_delta: bool) -> RecordSpan:
    length, p = _zigzag(buf, pos, end, VARINT_BYTES)
    if length < MIN_RECORD_BODY or length > end - p:
        raise _Refused(ERR_RECORD_LENGTH, pos)
    record_end = p + length
    timestamp_delta, q = _zigzag(buf, p + 1, record_end, VARLONG_BYTES)  # after the attributes
    offset_delta, p = _zigzag(buf, q, record_end, VARINT_BYTES)
    if check_offset_delta and offset_delta != index:
        raise _Refused(ERR_OFFSET_DELTA, q)
    key_length, q = _length(buf, p, record_end, -1, ERR_KEY_LENGTH)
    value_length, p = _length(buf, q, record_end, -1, ERR_VALUE_LENGTH)
    headers, q = _zigzag(buf, p, record_end, VARINT_BYTES)
    if headers < 0 or headers > (record_end - q) // MIN_HEADER_SIZE:
        raise _Refused(ERR_HEADER_COUNT, p)
    for _ in range(headers):
        _, q = _length(buf, q, record_end, 0, ERR_HEADER_KEY)
        _, q = _length(buf, q, record_end, -1, ERR_HEADER_VALUE)
    if q != record_end:
        raise _Refused(ERR_RECORD_SIZE_MISMATCH, pos)
    return RecordSpan(pos, record_end, timestamp_delta, offset_delta, key_length, value_length, headers)


def walk_records(buf: bytes, start: int, end: int, count: int, *, check_offset_delta: bool = False) -> Walk:
    """Walk `count` records in buf[start:end]. With `check_offset_delta` (the leader's validation)
    record i must carry offset delta i, as Kafka's LogValidator requires of producers' batches."""
    records: list[RecordSpan] = []
    pos = start
    try:
        for index in range(count):
            records.append(_record(buf, pos, end, index, check_offset_delta))
            pos = records[-1].end
    except _Refused as refused:
        return Walk(refused.status, refused.position, pos, records)
    if pos != end:
        return Walk(ERR_TRAILING_BYTES, pos, pos, records)
    return Walk(OK, pos, pos, records)

"""The leader's validation kernels against a plain-Python model of Kafka's LogValidator: for
batches damaged at random (header bytes, with or without a repaired CRC, truncations, junk)
and random topic configs, both raise the same error or stamp the same bytes."""

import struct

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from logstore import LogConfig, Record, _kernels
from logstore.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
    RecordValidationError,
)
from logstore.log_validator import validate_leader_append
from logstore.records import build_batch, crc32c, read_batch
from logstore.records._kernels import ERR_OFFSET_DELTA, ERR_TRAILING_BYTES, OK, STATUS_MESSAGES
from logstore.records.batch import check_batch
from logstore.records.header import V2_HEADER_SIZE, read_batch_header
from tests.support.clock import NOW

SOURCE = "t-0"


def model(buf: bytearray, config: LogConfig, next_offset: int, now: int, epoch: int, origin: str):
    """Kafka's leader validation of magic 2 batches, one batch and one check at a time."""
    view = memoryview(buf)
    positions, position = [], 0
    while len(buf) - position >= 12:
        size = struct.unpack_from(">i", buf, position + 8)[0]
        if size < 14:
            raise CorruptRecordError(f"entry length {size} below the minimum", position=position)
        if size + 12 > len(buf) - position:
            break
        read_batch_header(view, position)
        positions.append(position)
        position += size + 12
    if position != len(buf):
        raise CorruptRecordError(f"{len(buf) - position} trailing bytes do not form a complete batch",
                                 position=position)
    if not positions:
        raise InvalidRecordError("an append needs at least one record batch")
    log_append = config.message_timestamp_type == "LogAppendTime"
    first, max_ts, offset_of_max, count = next_offset, -1, -1, 0
    for position in positions:
        h = read_batch_header(view, position)
        end = position + h.batch_length + 12
        if h.magic != 2:
            raise InvalidRecordError(
                f"batch magic {h.magic} is not the same as the first batch's magic byte 2 in {SOURCE}")
        if h.batch_length + 12 > config.max_message_bytes:
            raise RecordTooLargeError(
                f"the record batch size in the append to {SOURCE} is {h.batch_length + 12} bytes "
                f"which exceeds the maximum configured value of {config.max_message_bytes}")
        check_batch(view[position:end], h, position)
        if origin == "client":
            if h.record_count <= 0:
                raise InvalidRecordError(f"invalid reported count for record batch: {h.record_count}")
            if h.last_offset_delta + 1 != h.record_count:
                raise InvalidRecordError(
                    f"inconsistent batch offset range [{h.base_offset}, {h.last_offset}] "
                    f"and count of records {h.record_count}")
            if h.attributes & 0x20:
                raise InvalidRecordError("clients are not allowed to write control records")
            if h.producer_id >= 0 and h.base_sequence < 0:
                raise InvalidRecordError(
                    f"invalid sequence number {h.base_sequence} in record batch with producerId {h.producer_id}")
            if h.attributes & 0x08:
                raise InvalidRecordError(
                    "invalid timestamp type in a client batch: producers must not set LogAppendTime")
        compressed = h.attributes & 0x07
        data, start, stop = np.frombuffer(view, np.uint8), position + V2_HEADER_SIZE, end
        if compressed:
            data = np.frombuffer(read_batch(view, position).records_bytes(), np.uint8)
            start, stop = 0, data.size
        status, at, low, high, null_key = _kernels._scan_records(data, start, stop, h.record_count,
                                                                h.base_timestamp)
        if status in (ERR_OFFSET_DELTA, ERR_TRAILING_BYTES):
            raise InvalidRecordError(f"batch at position {position} holds records that disagree with its "
                                     f"header count {h.record_count}: {STATUS_MESSAGES[status]}")
        if status != OK:
            raise CorruptRecordError(f"{STATUS_MESSAGES[status]} (record byte {at - start})",
                                     position=position if compressed else position + V2_HEADER_SIZE + at - start)
        if config.compact and null_key:
            raise RecordValidationError(
                f"{SOURCE} is a compacted topic's partition: it cannot accept a record without a key", [])
        if not log_append and h.record_count:
            before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
            if low != -1 and now - int(low) > before:
                raise InvalidTimestampError(
                    f"timestamp {low} of a record in the batch at position {position} is more than "
                    f"message.timestamp.before.max.ms={before} before the log's time {now}", [])
            if high != -1 and int(high) - now > after:
                raise InvalidTimestampError(
                    f"timestamp {high} of a record in the batch at position {position} is more than "
                    f"message.timestamp.after.max.ms={after} after the log's time {now}", [])
        struct.pack_into(">q", buf, position, next_offset)
        struct.pack_into(">i", buf, position + 12, epoch)
        batch_max = now if log_append else int(high)
        if log_append or batch_max != h.max_timestamp:
            attributes = h.attributes | (0x08 if log_append else 0)
            struct.pack_into(">hiqq", buf, position + 21, attributes, h.last_offset_delta, h.base_timestamp,
                             batch_max)
            struct.pack_into(">I", buf, position + 17, crc32c(view[position + 21:end]))
        last = next_offset + h.last_offset_delta
        if batch_max > max_ts:
            max_ts, offset_of_max = batch_max, last
        next_offset = last + 1
        count += h.record_count
    return first, next_offset - 1, max_ts, offset_of_max, count


def outcome(function, buf, *args):
    try:
        result = function(buf, *args)
    except (InvalidRecordError, CorruptRecordError) as exc:
        return type(exc).__name__, str(exc)
    if not isinstance(result, tuple):
        result = (result.first_offset, result.last_offset, result.max_timestamp,
                  result.offset_of_max_timestamp, result.record_count)
    return "ok", bytes(buf), result


def kernel(buf, config, next_offset, now, epoch, origin):
    return validate_leader_append(buf, config, next_offset, now, epoch, origin, source=SOURCE)


records = st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=4)), st.binary(max_size=6),
                             st.one_of(st.integers(-2, 3000), st.integers(-4_000_000, 4_000_000))),
                   min_size=1, max_size=5)
batches = st.tuples(records, st.sampled_from(["none", "none", "gzip"]), st.sampled_from([-1, -1, 7]))
# (batch, byte, new value, repair the CRC): header bytes, the first record's, and most often
# the magic, attributes, lastOffsetDelta, producer id, base sequence and record count.
damage = st.tuples(st.integers(0, 2), st.one_of(st.integers(0, 90), st.sampled_from([16, 21, 22, 26, 43, 56, 60])),
                   st.integers(0, 255), st.sampled_from([True, True, False]))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=st.lists(batches, min_size=1, max_size=3), damages=st.lists(damage, max_size=2),
       tail=st.sampled_from([b""] * 6 + [b"\x00\x01", b"\x00" * 12]), cut=st.sampled_from([0] * 6 + [1, 3]),
       origin=st.sampled_from(["client", "coordinator"]), compact=st.booleans(),
       log_append=st.booleans(), max_bytes=st.sampled_from([100, 200, 1_000_000]),
       before=st.sampled_from([1000, 2**63 - 1, 2**63 - 1]), after=st.sampled_from([0, 3_600_000, 3_600_000]),
       next_offset=st.integers(0, 2**40), epoch=st.integers(-1, 5))
def test_the_kernels_validate_like_the_model(specs, damages, tail, cut, origin, compact, log_append, max_bytes,
                                             before, after, next_offset, epoch):
    parts = []
    for recs, codec, producer in specs:
        built = build_batch([Record(i, NOW + ts, k, v) for i, (k, v, ts) in enumerate(recs)],
                            compression=codec, producer_id=producer, producer_epoch=0 if producer >= 0 else -1,
                            base_sequence=0 if producer >= 0 else -1)
        parts.append(bytearray(built))
    for which, offset, value, fix_crc in damages:
        part = parts[which % len(parts)]
        part[offset % len(part)] = value
        if fix_crc:
            struct.pack_into(">I", part, 17, crc32c(bytes(part[21:])))
    data = b"".join(parts)
    data = data[: len(data) - cut] + tail if cut else data + tail
    config = LogConfig.coerce({
        "cleanup.policy": "compact" if compact else "delete", "max.message.bytes": max_bytes,
        "message.timestamp.type": "LogAppendTime" if log_append else "CreateTime",
        "message.timestamp.before.max.ms": before, "message.timestamp.after.max.ms": after})
    args = (config, next_offset, NOW, epoch, origin)
    try:
        first_magic = read_batch_header(memoryview(data), 0).magic if len(data) >= 17 else 2
    except CorruptRecordError:
        first_magic = 2
    if first_magic < 2:
        return  # legacy conversion: its own tests
    got = outcome(kernel, bytearray(data), *args)
    event(got[0] if got[0] == "ok" else " ".join(got[1].split(" ")[:2]).strip("0123456789 "))
    assert got == outcome(model, bytearray(data), *args)

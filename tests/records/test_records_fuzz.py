"""Fuzzing every reader of logstore.records with random and mutated real batches: only our
errors escape, nothing hangs, and no length field makes a reader allocate what it says."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logstore.errors import InvalidRecordError, LogstoreError
from logstore.records import (
    COMPRESSION_NAMES,
    Record,
    batches_to_arrow,
    build_batch,
    build_control_batch,
    build_legacy_entry,
    crc32c,
    decode_varint,
    encode_varint,
    iter_batches,
    parse_control_record,
    read_batch_header,
    size_of_varint,
)
from tests.records.test_records_corruption import allocation_peak

LIMIT = 1 << 20  # max_inflated_bytes for every decode: a bomb must stop here
PROPERTIES = ("base_offset", "last_offset", "next_offset", "size_in_bytes", "partition_leader_epoch",
              "magic", "crc", "attributes", "compression", "timestamp_type", "base_timestamp",
              "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "last_sequence",
              "record_count", "is_transactional", "is_control", "delete_horizon_ms")


def _records() -> list[Record]:
    return [Record(i, 1_700_000_000_000 + i, b"key-%d" % i if i % 3 else None, b"value" * i,
                   (("h", b"x"),) if i % 2 else ()) for i in range(6)]


def _seeds() -> list[bytes]:
    plain = [Record(r.offset, r.timestamp, r.key, r.value) for r in _records()]
    seeds = [build_batch(_records(), compression=c) for c in COMPRESSION_NAMES]
    seeds += [build_legacy_entry(plain[:1] if c == "none" else plain, magic=m, compression=c)
              for m in (0, 1) for c in ("none", "gzip", "snappy", "lz4")]
    seeds.append(build_control_batch("commit", producer_id=7, producer_epoch=1, coordinator_epoch=3,
                                     base_offset=16, timestamp=1))
    seeds.append(seeds[0] + seeds[2])
    return seeds


SEEDS = _seeds()


def restamp(data: bytearray) -> bytearray:
    """Recompute a v2 batch's CRC so the checks behind it are reached."""
    if len(data) >= 61 and data[16] == 2:
        struct.pack_into(">I", data, 17, crc32c(data[21:]))
    return data


@st.composite
def mutated(draw) -> bytes:
    """A real batch (or two) with byte edits, length-field overwrites, a cut or an insertion."""
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for where, value in draw(st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), max_size=4)):
        data[where % len(data)] = value
    for where, value in draw(st.lists(st.tuples(st.integers(0, 1 << 16),
                                                st.sampled_from([-1, 0, 1, 14, 61, 2**31 - 1, -(2**31)])),
                                      max_size=2)):
        at = where % max(1, len(data) - 4)
        struct.pack_into(">i", data, at, value)
    action = draw(st.sampled_from(["keep", "cut", "insert"]))
    if action == "cut":
        data = data[: draw(st.integers(0, len(data)))]
    elif action == "insert":
        at = draw(st.integers(0, len(data)))
        data[at:at] = draw(st.binary(min_size=1, max_size=16))
    if draw(st.booleans()):
        restamp(data)
    return bytes(data)


def attempt(call, *args, **kwargs) -> object:
    """Call; our errors are fine (and return None), anything else fails the test."""
    try:
        return call(*args, **kwargs)
    except LogstoreError:
        return None


def only_our_errors(data: bytes, position: int = 0) -> None:
    """Everything a reader may do with untrusted bytes, through every public entry point, each
    tried on its own so one error does not hide the next reader's bug."""
    if len(data) - position >= 61:
        attempt(read_batch_header, data, position)
    batches = iter_batches(memoryview(data), position)
    for batch in attempt(list, batches) or []:
        for name in PROPERTIES:
            attempt(getattr, batch, name)
        attempt(batch.is_valid)
        attempt(batch.compute_crc)
        attempt(batch.validate, deep=True, max_inflated_bytes=LIMIT)
        records = attempt(batch.records, max_inflated_bytes=LIMIT)
        attempt(batch.columns, max_inflated_bytes=LIMIT)
        attempt(batch.to_arrow, max_inflated_bytes=LIMIT)
        if records and attempt(getattr, batch, "is_control"):
            attempt(parse_control_record, records[0])
    assert 0 <= batches.valid_end - position <= len(data) - position
    attempt(batches_to_arrow, [data[position:]], max_inflated_bytes=LIMIT)


@settings(max_examples=800, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_real_batches_raise_only_our_errors(data):
    only_our_errors(data)


@settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=600), st.integers(0, 64))
def test_random_bytes_at_any_position_raise_only_our_errors(data, position):
    only_our_errors(data, min(position, len(data)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_no_length_field_makes_a_reader_allocate_what_it_claims(data):
    with allocation_peak() as peak:
        only_our_errors(data)
    assert peak[0] < 16 * LIMIT


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=12), st.integers(-4, 14), st.sampled_from([5, 10]))
def test_varint_decoding_of_random_bytes_raises_only_our_errors(data, position, max_bytes):
    try:
        value, end = decode_varint(data, position, max_bytes=max_bytes)
    except LogstoreError:
        return
    assert 0 <= position < end <= len(data)
    assert decode_varint(encode_varint(value), max_bytes=max_bytes) == (value, size_of_varint(value))


def test_varint_from_a_negative_position_does_not_read_from_the_end():
    with pytest.raises(InvalidRecordError, match="position -1"):
        decode_varint(b"\x02", -1)


def test_varint_encoding_outside_int64_is_our_error():
    with pytest.raises(InvalidRecordError, match="does not fit in an int64"):
        encode_varint(2**63)

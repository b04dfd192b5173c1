"""Corrupt and hostile input: detected, bounded, and reported only as our error types."""

from __future__ import annotations

import contextlib
import struct
import tracemalloc
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logstore.errors import CorruptRecordError, InvalidRecordError
from logstore.records import (
    COMPRESSION_NAMES,
    Record,
    RecordBatch,
    build_batch,
    build_legacy_entry,
    crc32c,
    iter_batches,
    read_batch,
)
from logstore.records.compression import XERIAL_HEADER, XERIAL_MAGIC, compress
from logstore.records.header import RECORDS_COUNT_OFFSET, V2_HEADER

CODES = {name: code for code, name in enumerate(COMPRESSION_NAMES)}


def small_records() -> list[Record]:
    return [Record(0, 100, b"key", b"value", (("h", b"x"),)), Record(1, 99, None, b"v2"),
            Record(2, 101, b"k3", None)]


def restamp_crc(data: bytearray) -> bytearray:
    """Recompute the CRC so a test reaches the checks behind it."""
    struct.pack_into(">I", data, 17, crc32c(data[21:]))
    return data


def raw_batch(records_section: bytes, *, attributes: int = 0, count: int = 1) -> bytes:
    """A magic 2 batch around an arbitrary (possibly compressed) records section."""
    header = V2_HEADER.pack(0, 61 - 12 + len(records_section), -1, 2, 0, attributes,
                            max(count - 1, 0), 0, 0, -1, -1, -1, count)
    return bytes(restamp_crc(bytearray(header + records_section)))


@contextlib.contextmanager
def allocation_peak() -> Iterator[list[int]]:
    """Trace allocations in the block; afterwards the list holds the peak in bytes."""
    peak = [0]
    tracemalloc.start()
    try:
        yield peak
    finally:
        peak[0] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()


def decode_everything(data) -> None:
    """Everything a reader may do with untrusted bytes."""
    batches = iter_batches(data)
    for batch in batches:
        batch.is_valid()
        batch.records(max_inflated_bytes=1 << 20)
        batch.to_arrow(max_inflated_bytes=1 << 20)


@pytest.mark.parametrize("compression", COMPRESSION_NAMES)
def test_every_flipped_byte_in_crc_range_is_detected(compression):
    data = build_batch(small_records(), compression=compression)
    for i in range(17, len(data)):
        flipped = bytearray(data)
        flipped[i] ^= 0x5A
        assert not RecordBatch(flipped).is_valid(), f"byte {i}"


@pytest.mark.parametrize("magic", [0, 1])
def test_every_flipped_byte_of_a_legacy_message_is_detected(magic):
    data = build_legacy_entry([Record(3, 5, b"k", b"v")], magic=magic)
    for i in range(12, len(data)):
        flipped = bytearray(data)
        flipped[i] ^= 0x5A
        try:
            batch = read_batch(flipped)
        except CorruptRecordError:
            continue
        assert not batch.is_valid(), f"byte {i}"


@pytest.mark.parametrize("compression", COMPRESSION_NAMES)
def test_flipped_bytes_behind_a_fixed_crc_raise_only_corrupt_record_error(compression):
    data = build_batch(small_records(), compression=compression)
    for i in range(21, len(data)):
        for mask in (0x01, 0x80, 0xFF):
            flipped = bytearray(data)
            flipped[i] ^= mask
            with contextlib.suppress(CorruptRecordError):
                decode_everything(restamp_crc(flipped))


def test_truncated_batches_are_torn_tails_or_corrupt():
    data = build_batch(small_records())
    for cut in range(len(data)):
        batches = iter_batches(data[:cut])
        assert list(batches) == []
        assert batches.valid_end == 0 and batches.torn == (cut > 0)
        with pytest.raises(CorruptRecordError):
            RecordBatch(data[:cut])


@pytest.mark.parametrize("length", [2**31 - 1, 2**30, 10**9])
def test_length_field_past_the_end_is_a_torn_tail_without_allocation(length):
    data = bytearray(build_batch(small_records()))
    struct.pack_into(">i", data, 8, length)
    with allocation_peak() as peak:
        batches = iter_batches(bytes(data))
        assert list(batches) == []
        with pytest.raises(CorruptRecordError):
            RecordBatch(bytes(data))
    assert batches.torn and batches.valid_end == 0
    assert peak[0] < 1 << 20


@pytest.mark.parametrize("length", [-1, -(2**31), 0, 5])
def test_length_field_below_the_minimum_is_corrupt(length):
    good = build_batch(small_records())
    data = bytearray(good)
    struct.pack_into(">i", data, 8, length)
    with pytest.raises(CorruptRecordError) as caught:
        list(iter_batches(good + bytes(data)))
    assert caught.value.position == len(good)


def test_unknown_magic_is_corrupt():
    data = bytearray(build_batch(small_records()))
    data[16] = 7
    with pytest.raises(CorruptRecordError):
        RecordBatch(data)


def test_huge_record_count_raises_without_allocation():
    data = bytearray(build_batch(small_records()))
    struct.pack_into(">i", data, RECORDS_COUNT_OFFSET, 2**31 - 1)
    restamp_crc(data)
    batch = RecordBatch(data)
    with allocation_peak() as peak:
        with pytest.raises(CorruptRecordError):
            batch.validate()
        with pytest.raises(CorruptRecordError):
            batch.records()
    assert peak[0] < 1 << 20


@pytest.mark.parametrize("compression", ["gzip", "lz4", "zstd", "snappy"])
def test_huge_record_count_in_compressed_batch_raises(compression):
    data = bytearray(build_batch(small_records(), compression=compression))
    struct.pack_into(">i", data, RECORDS_COUNT_OFFSET, 2**31 - 1)
    with pytest.raises(CorruptRecordError):
        RecordBatch(restamp_crc(data)).records()


def test_record_count_too_small_leaves_trailing_bytes():
    data = bytearray(build_batch(small_records()))
    struct.pack_into(">i", data, RECORDS_COUNT_OFFSET, 2)
    with pytest.raises(CorruptRecordError, match="left over"):
        RecordBatch(restamp_crc(data)).records()


@pytest.mark.parametrize("record", [
    b"\xfe\xff\xff\xff\x0f",                      # record length 2^31 - 1
    b"\x0e\x00\x00\x00\xfe\xff\xff\xff\x0f\x00\x00",  # key length 2^31 - 1
    b"\x0c\x00\x00\x00\x03\x00\x00",              # key length -2
    b"\x0c\x00\x00\x00\x01\x01\xfe\xff\xff\xff\x0f",  # header count 2^31 - 1
    b"\x0c\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x00",  # 11-byte varlong
    b"\x0c\x00\x00\x00\x01\x01\x00\x00",          # record longer than its fields
])
def test_hostile_record_fields_raise_corrupt_record_error(record):
    batch = RecordBatch(raw_batch(record))
    tracemalloc.start()
    with pytest.raises(CorruptRecordError):
        batch.records()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 1 << 20


def test_header_key_must_be_utf8():
    record = b"\x12\x00\x00\x00\x01\x01\x02\x02\xff\x01"
    with pytest.raises(CorruptRecordError, match="UTF-8"):
        RecordBatch(raw_batch(record)).records()
    with pytest.raises(CorruptRecordError, match="UTF-8"):
        RecordBatch(raw_batch(record)).to_arrow()


@pytest.mark.parametrize("compression", ["gzip", "lz4", "zstd"])
def test_decompression_bomb_stops_at_the_limit(compression):
    bomb = compress(CODES[compression], bytes(32 << 20))
    batch = RecordBatch(raw_batch(bomb, attributes=CODES[compression]))
    with allocation_peak() as peak, pytest.raises(CorruptRecordError, match="inflate past"):
        batch.records(max_inflated_bytes=1 << 20)
    assert peak[0] < 8 << 20


def test_decompression_bomb_stops_at_the_default_limit():
    bomb = compress(CODES["zstd"], bytes(80 << 20))
    with pytest.raises(CorruptRecordError, match="inflate past"):
        RecordBatch(raw_batch(bomb, attributes=CODES["zstd"])).records()


@pytest.mark.parametrize("declared", [2**32 - 1, 2**31, (1 << 20) + 1])
def test_snappy_block_declaring_a_huge_length_raises_before_inflating(declared):
    varint = bytearray()
    while declared >= 0x80:
        varint.append(declared & 0x7F | 0x80)
        declared >>= 7
    varint.append(declared)
    block = bytes(varint) + b"\x00" * 8
    xerial = XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1) + struct.pack(">i", len(block)) + block
    for section in (block, xerial):
        batch = RecordBatch(raw_batch(section, attributes=CODES["snappy"]))
        with allocation_peak() as peak, pytest.raises(CorruptRecordError):
            batch.records(max_inflated_bytes=1 << 20)
        assert peak[0] < 4 << 20


def test_xerial_blocks_together_exceeding_the_limit_raise():
    chunk = compress(CODES["snappy"], bytes(600 << 10))
    body = chunk + chunk[len(XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1)):]
    with pytest.raises(CorruptRecordError, match="limit"):
        RecordBatch(raw_batch(body, attributes=CODES["snappy"])).records(max_inflated_bytes=1 << 20)


@pytest.mark.parametrize("garbage", [b"", b"\x00", b"not compressed at all", b"\x28\xb5\x2f\xfd" * 4])
@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4", "zstd"])
def test_undecodable_compressed_sections_are_corrupt(compression, garbage):
    batch = RecordBatch(raw_batch(garbage, attributes=CODES[compression]))
    with pytest.raises(CorruptRecordError):
        batch.records()


def test_unknown_codec_is_corrupt():
    batch = RecordBatch(raw_batch(b"\x00" * 8, attributes=6))
    assert not batch.is_valid()
    with pytest.raises(CorruptRecordError):
        _ = batch.compression
    with pytest.raises(CorruptRecordError):
        batch.records()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(min_size=0, max_size=400))
def test_random_bytes_raise_only_corrupt_record_error(data):
    with contextlib.suppress(CorruptRecordError):
        decode_everything(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(COMPRESSION_NAMES + ("legacy0", "legacy1")),
       st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=6))
def test_mutated_batches_raise_only_corrupt_record_error(kind, edits):
    if kind.startswith("legacy"):
        legacy = [Record(r.offset, r.timestamp, r.key, r.value) for r in small_records()]
        data = bytearray(build_legacy_entry(legacy, magic=int(kind[-1]), compression="gzip"))
    else:
        data = bytearray(build_batch(small_records(), compression=kind))
    for where, value in edits:
        data[where % len(data)] = value
    if data[16] == 2 and len(data) >= 61:
        restamp_crc(data)
    with contextlib.suppress(CorruptRecordError):
        decode_everything(bytes(data))


def test_random_multi_byte_mutations_never_escape_our_errors():
    rng = np.random.default_rng(7)
    data = build_batch([Record(i, i, b"k%d" % i, b"v" * i) for i in range(50)], compression="lz4")
    for _ in range(300):
        mutated = bytearray(data)
        for where in rng.integers(0, len(data), 3):
            mutated[where] = int(rng.integers(0, 256))
        with contextlib.suppress(CorruptRecordError):
            decode_everything(bytes(restamp_crc(mutated)))


@pytest.mark.parametrize("position", [-20, -1, 81, 10**12])
def test_iter_batches_from_outside_the_buffer_is_an_error_not_an_empty_walk(position):
    data = build_batch(small_records()[:1])
    assert len(data) == 80
    with pytest.raises(InvalidRecordError, match=f"position {position} is outside"):
        iter_batches(data, position)

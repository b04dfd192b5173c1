"""Property tests: build/decode round trips over the full field ranges, both builders, Arrow."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logstore.records import (
    COMPRESSION_NAMES,
    HEADERS_TYPE,
    Record,
    RecordBatch,
    batches_to_arrow,
    build_batch,
    build_batch_columnar,
    iter_batches,
)
from logstore.records.varint import decode_varint, encode_varint, size_of_varint

INT64 = st.integers(-(2**63), 2**63 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT16 = st.integers(-(2**15), 2**15 - 1)
maybe_bytes = st.none() | st.binary(max_size=200)
headers = st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=16)),
                   max_size=3).map(tuple)


@st.composite
def record_lists(draw, max_records: int = 12):
    base_offset = draw(st.integers(0, 2**62))
    first = draw(st.integers(0, 5))
    gaps = draw(st.lists(st.integers(1, 1000), max_size=max_records - 1))
    deltas = np.cumsum([first, *gaps]).tolist()
    records = [Record(base_offset + d, draw(INT64), draw(maybe_bytes), draw(maybe_bytes), draw(headers))
               for d in deltas]
    return base_offset, records


@st.composite
def batch_options(draw):
    producer_id = draw(st.integers(-1, 2**63 - 1))
    return {
        "compression": draw(st.sampled_from(COMPRESSION_NAMES)),
        "timestamp_type": draw(st.sampled_from(["CreateTime", "LogAppendTime"])),
        "producer_id": producer_id,
        "producer_epoch": draw(INT16),
        "base_sequence": draw(INT32),
        "is_transactional": producer_id >= 0 and draw(st.booleans()),
        "partition_leader_epoch": draw(INT32),
    }


def records_from_table(table: pa.Table) -> list[Record]:
    return [Record(row["offset"], row["timestamp"], row["key"], row["value"],
                   tuple((h["key"], h["value"]) for h in row["headers"]))
            for row in table.to_pylist()]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_lists(), batch_options())
def test_build_decode_round_trip_over_full_field_ranges(base_and_records, options):
    base_offset, records = base_and_records
    data = build_batch(records, base_offset=base_offset, **options)
    batch = RecordBatch(data)
    batch.validate(deep=True)
    assert batch.base_offset == base_offset
    assert batch.last_offset == records[-1].offset
    assert batch.record_count == len(records)
    assert batch.compression == options["compression"]
    assert batch.timestamp_type == options["timestamp_type"]
    assert batch.producer_id == options["producer_id"]
    assert batch.producer_epoch == options["producer_epoch"]
    assert batch.base_sequence == options["base_sequence"]
    assert batch.partition_leader_epoch == options["partition_leader_epoch"]
    assert batch.is_transactional == options["is_transactional"]
    assert batch.max_timestamp == max(r.timestamp for r in records)
    expected = records
    if options["timestamp_type"] == "LogAppendTime":
        expected = [Record(r.offset, batch.max_timestamp, r.key, r.value, r.headers) for r in records]
    assert batch.records() == expected
    assert records_from_table(batch.to_arrow()) == expected


@settings(max_examples=80, deadline=None)
@given(record_lists(), st.sampled_from(COMPRESSION_NAMES))
def test_columnar_builder_writes_the_same_bytes_as_the_record_builder(base_and_records, compression):
    base_offset, records = base_and_records
    expected = build_batch(records, base_offset=base_offset, compression=compression)
    header_array = pa.array([list(r.headers) for r in records], type=HEADERS_TYPE)
    columnar = build_batch_columnar(
        pa.array([r.key for r in records], pa.binary()),
        pa.array([r.value for r in records], pa.binary()),
        timestamps=np.array([r.timestamp for r in records], np.int64),
        offsets=pa.array([r.offset for r in records], pa.int64()),
        headers=header_array, base_offset=base_offset, compression=compression)
    assert columnar == expected


@settings(max_examples=40, deadline=None)
@given(st.lists(record_lists(max_records=5), min_size=1, max_size=4))
def test_batches_to_arrow_concatenates_every_batch(batches):
    buffers = [build_batch(records, base_offset=base) for base, records in batches]
    table = batches_to_arrow([b"".join(buffers)])
    assert records_from_table(table) == [r for _, records in batches for r in records]
    assert batches_to_arrow([RecordBatch(b) for b in buffers]).equals(table)


@given(INT64)
def test_varint_round_trip_and_size(value):
    encoded = encode_varint(value)
    assert len(encoded) == size_of_varint(value)
    assert decode_varint(encoded) == (value, len(encoded))


@pytest.mark.parametrize("compression", COMPRESSION_NAMES)
def test_large_record_round_trips(compression):
    value = np.random.default_rng(1).integers(0, 256, 3 << 20, dtype=np.uint8).tobytes()
    records = [Record(0, 1, b"big", value), Record(1, 0, None, value[: 1 << 20])]
    assert RecordBatch(build_batch(records, compression=compression)).records() == records


def test_columnar_inputs_numpy_fixed_width_sliced_and_chunked():
    keys = np.arange(40, dtype=">u8").view("S8")
    values = np.frombuffer(bytes(range(256)) * 10, np.uint8)[: 40 * 64].reshape(40, 64)
    expected = [Record(i, 7, keys[i : i + 1].tobytes(), values[i].tobytes()) for i in range(40)]
    data = build_batch_columnar(keys, values, timestamps=7)
    assert RecordBatch(data).records() == expected
    sliced_keys = pa.array([r.key for r in expected], pa.large_binary()).slice(10, 20)
    chunked_values = pa.chunked_array([pa.array([r.value for r in expected[10:20]]),
                                       pa.array([r.value for r in expected[20:30]])])
    data = build_batch_columnar(sliced_keys, chunked_values, timestamps=7, base_offset=10,
                                offsets=np.arange(10, 30))
    assert RecordBatch(data).records() == expected[10:30]


def test_columnar_string_keys_and_null_columns():
    data = build_batch_columnar(pa.array(["a", None, "ü"]), None, timestamps=[1, 2, 3])
    assert RecordBatch(data).records() == [Record(0, 1, b"a"), Record(1, 2, None),
                                           Record(2, 3, "ü".encode())]


def test_delete_horizon_keeps_record_timestamps():
    records = [Record(0, 1_000, b"k", None), Record(1, 2_000, b"j", b"v")]
    batch = RecordBatch(build_batch(records, delete_horizon_ms=5_000))
    assert batch.delete_horizon_ms == 5_000 and batch.base_timestamp == 5_000
    assert batch.records() == records


def test_iter_batches_reads_many_batches_in_order():
    buffers = [build_batch([Record(i, i, b"k", b"v")], base_offset=i, compression=c)
               for i, c in enumerate(COMPRESSION_NAMES * 3)]
    batches = iter_batches(b"".join(buffers))
    assert [b.base_offset for b in batches] == list(range(15))
    assert batches.valid_end == sum(map(len, buffers))


def _scalar_record_bytes(timestamp_delta: int, offset_delta: int, record: Record) -> bytes:
    """One record encoded field by field with the scalar varint codec (docs/FORMAT.md "Record")."""
    def field(data: bytes | None) -> bytes:
        return encode_varint(-1) if data is None else encode_varint(len(data)) + data

    body = b"".join([
        b"\x00", encode_varint(timestamp_delta), encode_varint(offset_delta), field(record.key),
        field(record.value), encode_varint(len(record.headers)),
        *(field(k.encode()) + field(v) for k, v in record.headers),
    ])
    return encode_varint(len(body)) + body


@settings(max_examples=100, deadline=None)
@given(record_lists(max_records=6))
def test_kernel_encoding_matches_the_scalar_varint_codec(base_and_records):
    base_offset, records = base_and_records
    data = build_batch(records, base_offset=base_offset)
    base_timestamp = records[0].timestamp
    wrap = 1 << 64
    expected = b"".join(
        _scalar_record_bytes((r.timestamp - base_timestamp + 2**63) % wrap - 2**63,
                             r.offset - base_offset, r)
        for r in records)
    assert data[61:] == expected

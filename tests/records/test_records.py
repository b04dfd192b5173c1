"""Core record batch behaviour: build/decode round trips, header fields, iteration, samples."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from logstore.errors import CorruptRecordError, InvalidRecordError
from logstore.records import (
    COMPRESSION_NAMES,
    ControlRecord,
    LegacyRecordBatch,
    Record,
    RecordBatch,
    build_batch,
    build_batch_columnar,
    build_control_batch,
    build_legacy_entry,
    crc32,
    crc32c,
    iter_batches,
    parse_control_record,
    read_batch,
    read_batch_header,
    set_base_offset_and_epoch,
    set_log_append_time,
)
from logstore.records.header import V2_HEADER_DTYPE, V2_HEADER_SIZE, BatchHeader
from tests.support.paths import KAFKA_SAMPLE

SAMPLES = KAFKA_SAMPLE


def sample_records() -> list[Record]:
    return [
        Record(0, 1_700_000_000_000, b"key-0", b"value-0"),
        Record(1, 1_699_999_999_000, None, b"older timestamp"),
        Record(2, 1_700_000_000_500, b"k", None),
        Record(3, 1_700_000_001_000, b"", b"", (("h1", b"v"), ("nul", None), ("ünï", b""))),
    ]


@pytest.mark.parametrize("compression", COMPRESSION_NAMES)
def test_build_then_decode_round_trips_every_codec(compression):
    records = sample_records()
    batch = RecordBatch(build_batch(records, compression=compression))
    batch.validate(deep=True)
    assert batch.compression == compression
    assert batch.records() == records


def test_header_fields_follow_the_builder_arguments():
    data = build_batch(sample_records(), base_offset=0, producer_id=77, producer_epoch=3,
                       base_sequence=10, is_transactional=True, partition_leader_epoch=5)
    batch = RecordBatch(data)
    assert (batch.base_offset, batch.last_offset, batch.next_offset) == (0, 3, 4)
    assert batch.size_in_bytes == len(data) == batch.batch_length + 12
    assert batch.magic == 2 and batch.partition_leader_epoch == 5
    assert batch.base_timestamp == 1_700_000_000_000
    assert batch.max_timestamp == 1_700_000_001_000
    assert (batch.producer_id, batch.producer_epoch) == (77, 3)
    assert (batch.base_sequence, batch.last_sequence) == (10, 13)
    assert batch.record_count == 4
    assert batch.is_transactional and not batch.is_control
    assert batch.timestamp_type == "CreateTime"
    assert batch.delete_horizon_ms is None
    assert batch.crc == crc32c(data[21:])
    assert read_batch_header(data, 0).record_count == 4


def test_last_sequence_wraps_past_int32_max_like_kafka():
    records = [Record(i, 0, None, b"x") for i in range(3)]
    batch = RecordBatch(build_batch(records, producer_id=1, producer_epoch=0, base_sequence=2**31 - 2))
    assert batch.last_sequence == 0


def test_log_append_time_overrides_record_timestamps():
    data = bytearray(build_batch(sample_records(), timestamp_type="LogAppendTime"))
    set_log_append_time(data, 0, 1_800_000_000_000)
    batch = RecordBatch(data)
    batch.validate()
    assert batch.timestamp_type == "LogAppendTime"
    assert {r.timestamp for r in batch.records()} == {1_800_000_000_000}


def test_set_base_offset_and_epoch_keeps_crc_valid():
    data = bytearray(build_batch(sample_records()))
    set_base_offset_and_epoch(data, 0, 1000, 7)
    batch = RecordBatch(data)
    assert batch.is_valid()
    assert batch.base_offset == 1000 and batch.partition_leader_epoch == 7
    assert [r.offset for r in batch.records()] == [1000, 1001, 1002, 1003]
    with pytest.raises(InvalidRecordError):
        set_base_offset_and_epoch(bytes(data), 0, 1, 1)


def test_iter_batches_stops_before_torn_tail():
    one = build_batch(sample_records())
    two = build_batch([Record(r.offset + 4, r.timestamp, r.key, r.value, r.headers) for r in sample_records()],
                      base_offset=4, compression="zstd")
    buffer = one + two + two[:30]
    batches = iter_batches(buffer)
    assert [b.base_offset for b in batches] == [0, 4]
    assert batches.valid_end == len(one) + len(two)
    assert batches.torn


def test_iter_batches_on_clean_end_is_not_torn():
    data = build_batch(sample_records())
    batches = iter_batches(data)
    assert len(list(batches)) == 1
    assert batches.valid_end == len(data) and not batches.torn


def test_empty_batch_keeps_offsets_and_producer_state():
    data = build_batch([], base_offset=10, producer_id=5, producer_epoch=1, base_sequence=3,
                       last_offset_delta=4)
    batch = RecordBatch(data)
    batch.validate(deep=True)
    assert (batch.base_offset, batch.last_offset, batch.record_count) == (10, 14, 0)
    assert batch.records() == []


def test_builder_rejects_bad_arguments():
    with pytest.raises(InvalidRecordError):
        build_batch([Record(1, 0), Record(1, 0)])
    with pytest.raises(InvalidRecordError):
        build_batch([Record(0, 0)], compression="brotli")
    with pytest.raises(InvalidRecordError):
        build_batch([Record(0, 0, "text", None)])
    with pytest.raises(InvalidRecordError):
        build_batch([Record(0, 0)], producer_epoch=1 << 20)
    with pytest.raises(InvalidRecordError):
        build_batch(["not a record"])


def copy_sample_logs(tmp_path: Path) -> list[Path]:
    target = tmp_path / "plain-0"
    shutil.copytree(SAMPLES / "logdir" / "plain-0", target)
    return sorted(target.glob("*.log"))


def test_kafka_written_segments_decode_completely(tmp_path):
    offsets = []
    codecs = set()
    for path in copy_sample_logs(tmp_path):
        data = path.read_bytes()
        batches = iter_batches(data)
        for batch in batches:
            batch.validate(deep=True)
            codecs.add(batch.compression)
            records = batch.records()
            assert len(records) == batch.record_count
            offsets.extend(r.offset for r in records)
        assert batches.valid_end == len(data) and not batches.torn
    assert offsets == list(range(720))
    assert codecs == set(COMPRESSION_NAMES)


def _dump_lines(name: str) -> list[str]:
    text = (SAMPLES / "dump-logsegments" / "plain-0" / f"{name}.log.txt").read_text()
    return text.splitlines()


def test_kafka_written_records_match_dump_logsegments(tmp_path):
    path = copy_sample_logs(tmp_path)[0]
    batches = list(iter_batches(path.read_bytes()))
    batch_lines = [line for line in _dump_lines(path.stem) if line.startswith("baseOffset:")]
    record_lines = [line for line in _dump_lines(path.stem) if line.startswith("| offset:")]
    assert len(batches) == len(batch_lines)
    for batch, line in zip(batches, batch_lines, strict=True):
        fields = line.split()
        assert int(fields[fields.index("crc:") + 1]) == batch.crc
        assert int(fields[fields.index("size:") + 1]) == batch.size_in_bytes
        assert fields[fields.index("compresscodec:") + 1] == batch.compression
    records = [r for b in batches for r in b.records()]
    for record, line in zip(records, record_lines, strict=True):
        fields = line.split()
        assert int(fields[fields.index("offset:") + 1]) == record.offset
        assert int(fields[fields.index("CreateTime:") + 1]) == record.timestamp
        key_size = int(fields[fields.index("keySize:") + 1])
        value_size = int(fields[fields.index("valueSize:") + 1])
        assert key_size == (-1 if record.key is None else len(record.key))
        assert value_size == (-1 if record.value is None else len(record.value))
        header_keys = fields[fields.index("headerKeys:") + 1].strip("[]")
        assert header_keys == ",".join(k for k, _ in record.headers)
        if "key:" in fields:
            assert record.key.decode() == fields[fields.index("key:") + 1]


def test_kafka_append_inputs_parse(tmp_path):
    inputs = tmp_path / "plain-0.records"
    shutil.copy(SAMPLES / "inputs" / "plain-0.records", inputs)
    data = inputs.read_bytes()
    batches = iter_batches(data)
    total = sum(len(b.records()) for b in batches if b.is_valid())
    assert total == 720
    assert batches.valid_end == len(data)


def test_golden_batch_matches_format_by_hand():
    data = build_batch([Record(5, 1000, b"k", b"v", (("h", b"x"),))], base_offset=5,
                       partition_leader_epoch=2)
    record = bytes([
        0x18,        # length 12 (zigzag 24)
        0x00,        # attributes
        0x00,        # timestampDelta 0
        0x00,        # offsetDelta 0
        0x02, 0x6B,  # key length 1, "k"
        0x02, 0x76,  # value length 1, "v"
        0x02,        # one header
        0x02, 0x68,  # header key length 1, "h"
        0x02, 0x78,  # header value length 1, "x"
    ])
    header_after_crc = struct.pack(">hiqqqhii", 0, 0, 1000, 1000, -1, -1, -1, 1)
    crc = crc32c(header_after_crc + record)
    expected = (struct.pack(">qiib", 5, 61 - 12 + len(record), 2, 2) + struct.pack(">I", crc)
                + header_after_crc + record)
    assert data == expected


def test_one_header_declaration_serves_struct_dtype_and_named_tuple():
    data = build_batch([Record(7, 1234, b"k", b"v")], base_offset=7, producer_id=9, producer_epoch=1,
                       base_sequence=3)
    by_struct = read_batch_header(data)
    by_dtype = np.frombuffer(data, V2_HEADER_DTYPE, count=1)[0]
    assert V2_HEADER_DTYPE.itemsize == V2_HEADER_SIZE == 61
    assert BatchHeader._fields == V2_HEADER_DTYPE.names
    assert tuple(int(by_dtype[name]) for name in V2_HEADER_DTYPE.names) == tuple(by_struct)


def test_record_batch_rejects_entry_past_buffer_end():
    data = build_batch(sample_records())
    with pytest.raises(CorruptRecordError):
        RecordBatch(data[:-1])


def test_legacy_messages_read_through_the_batch_interface():
    records = [Record(10, 1_000, b"a", b"1"), Record(11, 3_000, None, b"2"), Record(12, 2_000, b"c", None)]
    data = build_legacy_entry(records, magic=1, compression="gzip")
    batch = read_batch(data)
    assert isinstance(batch, LegacyRecordBatch) and batch.is_valid()
    assert (batch.base_offset, batch.last_offset, batch.next_offset) == (10, 12, 13)
    assert batch.record_count == 3 and batch.last_offset_delta == 2
    assert batch.max_timestamp == 3_000 and batch.timestamp_type == "CreateTime"
    assert (batch.partition_leader_epoch, batch.producer_id, batch.base_sequence) == (-1, -1, -1)
    assert not batch.is_transactional and not batch.is_control and batch.delete_horizon_ms is None
    assert batch.crc == crc32(data[16:]) and batch.compute_crc() == batch.crc
    assert batch.records() == records
    assert batch.to_arrow().column("key").to_pylist() == [b"a", None, b"c"]
    header = read_batch_header(data, 0)
    assert (header.magic, header.base_offset, header.next_offset) == (1, 12, 13)


def test_legacy_log_append_time_wrapper_stamps_inner_records():
    records = [Record(0, 5, b"a", b"1"), Record(1, 6, b"b", b"2")]
    batch = read_batch(build_legacy_entry(records, magic=1, compression="snappy", log_append_time=99))
    assert batch.timestamp_type == "LogAppendTime"
    assert [r.timestamp for r in batch.records()] == [99, 99]


def test_legacy_magic_0_has_no_timestamps():
    batch = read_batch(build_legacy_entry([Record(4, 123, b"k", b"v")], magic=0))
    assert batch.records() == [Record(4, -1, b"k", b"v")]
    assert batch.max_timestamp == -1 and batch.size_in_bytes == 12 + 4 + 2 + 4 + 1 + 4 + 1
    with pytest.raises(InvalidRecordError):
        set_log_append_time(bytearray(bytes(batch)), 0, 5)


def test_control_batches_build_and_parse():
    data = build_control_batch("commit", producer_id=8, producer_epoch=2, coordinator_epoch=5,
                               timestamp=1_000, base_offset=40, partition_leader_epoch=3)
    batch = RecordBatch(data)
    assert batch.is_control and batch.is_transactional and batch.is_valid()
    assert (batch.producer_id, batch.producer_epoch, batch.partition_leader_epoch) == (8, 2, 3)
    (record,) = batch.records()
    assert record.key == b"\x00\x00\x00\x01" and record.value == b"\x00\x00\x00\x00\x00\x05"
    assert parse_control_record(record) == ControlRecord("commit", 1, 0, 5)
    abort = RecordBatch(build_control_batch("abort", producer_id=8, producer_epoch=2,
                                            coordinator_epoch=0, timestamp=1)).records()[0]
    assert parse_control_record(abort).kind == "abort"


def test_control_record_parsing_rejects_malformed_markers():
    assert parse_control_record(Record(0, 0, b"\x00\x00\x00\x07", None)).kind == "unknown"
    for key, value in [(b"\x00", b""), (None, None), (b"\xff\xff\x00\x01", b"\x00" * 6),
                       (b"\x00\x00\x00\x01", b"\x00\x00"), (b"\x00\x00\x00\x00", b"\x80\x00\x00\x00\x00\x00")]:
        with pytest.raises(CorruptRecordError):
            parse_control_record(Record(0, 0, key, value))
    with pytest.raises(InvalidRecordError):
        build_control_batch("rollback", producer_id=1, producer_epoch=0, coordinator_epoch=0, timestamp=0)


def test_columnar_builder_rejects_bad_columns():
    keys = pa.array([b"a", b"b"])
    bad_calls = [
        lambda: build_batch_columnar(keys, pa.array([b"x"])),
        lambda: build_batch_columnar(pa.array([1, 2]), None),
        lambda: build_batch_columnar(keys, None, timestamps=[1, 2, 3]),
        lambda: build_batch_columnar(keys, None, timestamps=["a", "b"]),
        lambda: build_batch_columnar(keys, None, offsets=[1, 1]),
        lambda: build_batch_columnar(keys, None, offsets=[0, 2**31]),
        lambda: build_batch_columnar(keys, None, headers=[[(None, b"v")], []]),
        lambda: build_batch_columnar(keys, None, headers=[[("k", "text")], []]),
        lambda: build_batch_columnar(keys, None, headers=[()]),
        lambda: build_batch_columnar(keys, None, timestamp_type="Now"),
        lambda: build_batch_columnar(keys, None, is_transactional=True),
    ]
    for call in bad_calls:
        with pytest.raises(InvalidRecordError):
            call()


def test_batches_read_from_any_buffer_type():
    data = build_batch(sample_records(), compression="gzip")
    expected = sample_records()
    for buffer in (data, bytearray(data), memoryview(data), np.frombuffer(data, np.uint8)):
        assert RecordBatch(buffer).records() == expected
        assert [r for b in iter_batches(buffer) for r in b] == expected
    padded = b"\x00" * 7 + data
    assert RecordBatch(padded, 7).records() == expected
    assert RecordBatch(padded, 7).position == 7 and bytes(RecordBatch(padded, 7)) == data


@pytest.mark.parametrize("timestamp", [2**63, -(2**63) - 1, 2**64])
def test_a_timestamp_outside_int64_is_named_as_out_of_range(timestamp):
    with pytest.raises(InvalidRecordError, match="timestamps out of the int64 range"):
        build_batch([Record(0, timestamp, b"k", b"v")])


def test_record_batch_refuses_legacy_entries_and_read_batch_picks_the_class_by_magic():
    legacy = build_legacy_entry([Record(4, 123, b"k", b"v")], magic=1)
    with pytest.raises(InvalidRecordError, match="read_batch"):
        RecordBatch(legacy)
    assert type(read_batch(legacy)) is LegacyRecordBatch
    assert type(read_batch(build_batch([Record(0, 1, b"k", b"v")]))) is RecordBatch

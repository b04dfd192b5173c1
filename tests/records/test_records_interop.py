"""Interop with kafka-python's record code: our bytes decode there, theirs decode here.

kafka-python's optional codec packages (python-snappy, lz4, zstandard, xxhash) are not
installed; the fixture plugs pyarrow's block codecs into the hooks kafka-python calls, so
its own framing code (xerial snappy, batch layout, legacy wrappers, the old-Kafka LZ4
checksum) still runs.
"""

from __future__ import annotations

import io
from types import SimpleNamespace

import kafka.codec
import kafka.record.default_records as kafka_default
import kafka.record.legacy_records as kafka_legacy
import pyarrow as pa
import pytest
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from logstore.records import (
    COMPRESSION_NAMES,
    Record,
    RecordBatch,
    build_batch,
    build_control_batch,
    build_legacy_entry,
    iter_batches,
    read_batch,
)
from logstore.records.compression import xxh32_short

CODES = {name: code for code, name in enumerate(COMPRESSION_NAMES)}
LEGACY_CODECS = ["none", "gzip", "snappy", "lz4"]


def _raw_snappy_decompress(data: bytes) -> bytes:
    length, shift = 0, 0
    for b in data[:5]:
        length |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            break
    return pa.Codec("snappy").decompress(data, decompressed_size=length, asbytes=True)


def _stream_decompress(codec: str):
    def decompress(data) -> bytes:
        return pa.CompressedInputStream(io.BytesIO(bytes(data)), codec).read()
    return decompress


@pytest.fixture
def kafka_codecs(monkeypatch):
    """Give kafka-python snappy, lz4, zstd and xxhash backed by pyarrow."""
    snappy = SimpleNamespace(
        compress=lambda data: pa.Codec("snappy").compress(bytes(data), asbytes=True),
        decompress=_raw_snappy_decompress)
    lz4_encode = lambda data: pa.Codec("lz4").compress(bytes(data), asbytes=True)  # noqa: E731
    lz4_decode = _stream_decompress("lz4")
    zstd_encode = lambda data: pa.Codec("zstd").compress(bytes(data), asbytes=True)  # noqa: E731
    zstd_decode = _stream_decompress("zstd")
    xxhash = SimpleNamespace(xxh32=lambda data: SimpleNamespace(
        digest=lambda: xxh32_short(bytes(data)).to_bytes(4, "big")))
    monkeypatch.setattr(kafka.codec, "snappy", snappy)
    monkeypatch.setattr(kafka.codec, "lz4", SimpleNamespace())
    monkeypatch.setattr(kafka.codec, "zstd", SimpleNamespace())
    monkeypatch.setattr(kafka.codec, "xxhash", xxhash)
    monkeypatch.setattr(kafka.codec, "lz4_encode", lz4_encode)
    monkeypatch.setattr(kafka.codec, "lz4_decode", lz4_decode)
    for module in (kafka_default, kafka_legacy):
        monkeypatch.setattr(module, "lz4_encode", lz4_encode)
        monkeypatch.setattr(module, "lz4_decode", lz4_decode)
    monkeypatch.setattr(kafka_default, "zstd_encode", zstd_encode)
    monkeypatch.setattr(kafka_default, "zstd_decode", zstd_decode)


def interop_records(base: int = 0) -> list[Record]:
    filler = b"compressible payload " * 20
    return [
        Record(base, 1_700_000_000_000, b"key-0", filler),
        Record(base + 1, 1_699_999_000_000, None, filler + b"1"),
        Record(base + 2, 1_700_000_005_000, b"key-2", None),
        Record(base + 3, 1_700_000_001_000, b"", b"",
               (("trace", b"abc"), ("null", None), ("ключ", b"\x00\xff"))),
        *[Record(base + i, 1_700_000_000_000 + i, b"k%d" % i, filler) for i in range(4, 60)],
    ]


def kafka_python_view(record) -> Record:
    """kafka-python's record as ours (it reports magic 0's missing timestamp as None, Kafka as -1)."""
    timestamp = -1 if record.timestamp is None else record.timestamp
    return Record(record.offset, timestamp, record.key, record.value,
                  tuple((k, v) for k, v in record.headers))


@pytest.mark.parametrize("compression", COMPRESSION_NAMES)
def test_our_batches_decode_in_kafka_python(kafka_codecs, compression):
    records = interop_records(100)
    data = build_batch(records, base_offset=100, compression=compression, producer_id=9,
                       producer_epoch=2, base_sequence=50, partition_leader_epoch=4)
    memory = MemoryRecords(data)
    batch = memory.next_batch()
    assert batch.validate_crc()
    assert batch.compression_type == CODES[compression]
    assert (batch.base_offset, batch.last_offset) == (100, 159)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9, 2, 50)
    assert batch.leader_epoch == 4
    assert [kafka_python_view(r) for r in batch] == records
    assert memory.next_batch() is None


@pytest.mark.parametrize("compression", COMPRESSION_NAMES)
def test_kafka_python_batches_decode_here(kafka_codecs, compression):
    records = interop_records()
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=CODES[compression],
                                        is_transactional=0, producer_id=-1, producer_epoch=-1,
                                        base_sequence=-1, batch_size=1 << 20)
    for r in records:
        builder.append(r.offset, timestamp=r.timestamp, key=r.key, value=r.value,
                       headers=list(r.headers))
    data = bytes(builder.build())
    batch = RecordBatch(data)
    batch.validate(deep=True)
    assert batch.compression == compression
    assert batch.records() == records


def test_kafka_python_transactional_batch_decodes_here():
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=1,
                                        producer_id=42, producer_epoch=3, base_sequence=7,
                                        batch_size=1 << 20)
    builder.append(0, timestamp=5, key=b"k", value=b"v", headers=[])
    batch = RecordBatch(bytes(builder.build()))
    batch.validate()
    assert batch.is_transactional and not batch.is_control
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (42, 3, 7)


def test_our_control_batch_reads_as_control_in_kafka_python():
    data = build_control_batch("abort", producer_id=42, producer_epoch=3, coordinator_epoch=11,
                               timestamp=123, base_offset=77)
    batch = MemoryRecords(data).next_batch()
    assert batch.is_control_batch and batch.is_transactional
    (record,) = list(batch)
    assert record.abort and record.version == 0


def _set_wrapper_offset(entry: bytes, offset: int) -> bytes:
    """What a broker does to a producer's wrapper message: stamp the last absolute offset."""
    return offset.to_bytes(8, "big") + entry[8:]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("compression", LEGACY_CODECS)
def test_kafka_python_legacy_messages_decode_here(kafka_codecs, magic, compression):
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=CODES[compression],
                                       batch_size=1 << 20)
    count = 1 if compression == "none" else 5
    for i in range(count):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=b"k%d" % i if i else None,
                       value=b"value %d " % i * 10)
    data = bytes(builder.build())
    if compression != "none":
        # magic 1 inner offsets are relative, magic 0 ones absolute (0..count-1 here).
        data = _set_wrapper_offset(data, (1000 if magic == 1 else 0) + count - 1)
    theirs = [kafka_python_view(r) for r in MemoryRecords(data).next_batch()]
    batch = read_batch(data)
    batch.validate(deep=True)
    assert batch.magic == magic and batch.compression == compression
    assert batch.records() == theirs
    assert batch.record_count == count
    assert batch.last_offset == theirs[-1].offset and batch.base_offset == theirs[0].offset


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("compression", LEGACY_CODECS)
def test_our_legacy_entries_decode_in_kafka_python(kafka_codecs, magic, compression):
    count = 1 if compression == "none" else 4
    records = [Record(500 + i, 1_700_000_000_000 + i if magic else -1, b"k", b"v%d" % i * 30)
               for i in range(count)]
    data = build_legacy_entry(records, magic=magic, compression=compression)
    batch = MemoryRecords(data).next_batch()
    assert batch.validate_crc()
    assert [kafka_python_view(r) for r in batch] == records


def test_mixed_magics_iterate_in_one_buffer(kafka_codecs):
    legacy = build_legacy_entry([Record(0, 10, b"a", b"b")], magic=1)
    v2 = build_batch([Record(1, 11, b"c", b"d")], base_offset=1, compression="lz4")
    batches = iter_batches(legacy + v2)
    assert [(b.magic, [r.value for r in b.records()]) for b in batches] == [(1, [b"b"]), (2, [b"d"])]
    assert batches.valid_end == len(legacy) + len(v2)

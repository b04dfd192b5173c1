"""Compression framing: what Kafka writes, what other writers produce, and bounded reads."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from logstore.errors import CorruptRecordError, InvalidRecordError
from logstore.records import COMPRESSION_NAMES, iter_batches
from logstore.records.compression import (
    GZIP,
    LZ4,
    LZ4_FRAME_HEADER,
    SNAPPY,
    XERIAL_BLOCK_SIZE,
    XERIAL_MAGIC,
    ZSTD,
    compress,
    compression_code,
    decompress,
    xxh32_short,
)

PAYLOAD = b"".join(b"record %06d with a value that repeats a little; " % i for i in range(4000))
SAMPLES = Path("/work/shared/kafka-samples/plain")


def stream_compress(codec: str, data: bytes) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.CompressedOutputStream(sink, codec) as out:
        out.write(data)
    return sink.getvalue().to_pybytes()


@pytest.mark.parametrize("code", [GZIP, SNAPPY, LZ4, ZSTD])
def test_compress_then_decompress_round_trips(code):
    for data in (b"", b"x", PAYLOAD):
        assert decompress(code, compress(code, data)) == data


def test_lz4_frame_header_matches_kafkas_writer(tmp_path):
    assert bytes.fromhex("04224d18604082") == LZ4_FRAME_HEADER
    assert xxh32_short(b"") == 0x02CC5D05  # the xxHash32 reference value for empty input
    logs = tmp_path / "plain-0"
    shutil.copytree(SAMPLES / "logdir" / "plain-0", logs)
    lz4_sections = [bytes(b.view[61:]) for path in sorted(logs.glob("*.log"))
                    for b in iter_batches(path.read_bytes()) if b.compression == "lz4"]
    assert lz4_sections and all(s.startswith(LZ4_FRAME_HEADER) for s in lz4_sections)


def test_lz4_blocks_are_independent_and_64k():
    frame = compress(LZ4, PAYLOAD)
    assert frame[4] & 0x20  # block independence: Kafka's reader needs it
    assert pa.Codec("lz4").decompress(frame, decompressed_size=len(PAYLOAD), asbytes=True) == PAYLOAD


def test_reads_lz4_frames_with_linked_blocks_and_checksums():
    assert decompress(LZ4, pa.Codec("lz4").compress(PAYLOAD, asbytes=True)) == PAYLOAD
    assert decompress(LZ4, stream_compress("lz4", PAYLOAD)) == PAYLOAD


def test_snappy_writes_xerial_blocks_and_reads_raw_blocks():
    framed = compress(SNAPPY, PAYLOAD)
    assert framed.startswith(XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01")
    assert len(PAYLOAD) > XERIAL_BLOCK_SIZE
    assert decompress(SNAPPY, framed) == PAYLOAD
    assert decompress(SNAPPY, pa.Codec("snappy").compress(PAYLOAD, asbytes=True)) == PAYLOAD


def test_zstd_reads_streamed_and_concatenated_frames():
    assert decompress(ZSTD, stream_compress("zstd", PAYLOAD)) == PAYLOAD
    two = compress(ZSTD, PAYLOAD) + compress(ZSTD, b"tail")
    assert decompress(ZSTD, two) == PAYLOAD + b"tail"


def test_gzip_reads_concatenated_members():
    two = compress(GZIP, PAYLOAD) + compress(GZIP, b"tail")
    assert decompress(GZIP, two) == PAYLOAD + b"tail"


@pytest.mark.parametrize("code", [GZIP, SNAPPY, LZ4, ZSTD])
def test_limit_is_inclusive(code):
    data = compress(code, PAYLOAD)
    assert decompress(code, data, limit=len(PAYLOAD)) == PAYLOAD
    with pytest.raises(CorruptRecordError):
        decompress(code, data, limit=len(PAYLOAD) - 1)


def test_compression_codes_follow_the_attribute_bits():
    assert [compression_code(n) for n in COMPRESSION_NAMES] == [0, 1, 2, 3, 4]
    with pytest.raises(InvalidRecordError):
        compression_code("brotli")


def test_zstd_declared_content_size_past_limit_streams_and_stops():
    data = compress(ZSTD, bytes(4 << 20))
    with pytest.raises(CorruptRecordError, match="inflate past"):
        decompress(ZSTD, data, limit=1 << 20)

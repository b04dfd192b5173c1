"""Compression framing: what Kafka writes, what other writers produce, and bounded reads."""

from __future__ import annotations

import shutil
import struct
import zlib

import pyarrow as pa
import pytest

from logstore.errors import CorruptRecordError, InvalidRecordError
from logstore.records import COMPRESSION_NAMES, iter_batches
from logstore.records.compression import (
    CODECS,
    GZIP,
    LZ4,
    LZ4_FRAME_HEADER,
    SNAPPY,
    XERIAL_BLOCK_SIZE,
    XERIAL_MAGIC,
    ZSTD,
    UnknownCompressionError,
    codec_by_code,
    codec_by_name,
    compress,
    compression_code,
    decompress,
    xxh32_short,
)
from logstore.records.header import V2_HEADER_SIZE
from tests.support.paths import KAFKA_SAMPLE

PAYLOAD = b"".join(b"record %06d with a value that repeats a little; " % i for i in range(4000))
SAMPLES = KAFKA_SAMPLE


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


def jdk_gzip(data: bytes, level: int = 6) -> bytes:
    """What java.util.zip.GZIPOutputStream writes on JDK 16+ (Kafka's gzip): the header with
    MTIME 0, XFL 0 and OS 255, zlib's raw deflate, then CRC-32 and length little-endian."""
    deflater = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = deflater.compress(data) + deflater.flush()
    return bytes.fromhex("1f8b08000000000000ff") + body + struct.pack("<II", zlib.crc32(data), len(data))


def test_gzip_writes_what_kafka_writes_on_jdk17():
    sections = [bytes(b.view[V2_HEADER_SIZE:]) for path in sorted((SAMPLES / "logdir" / "plain-0").glob("*.log"))
                for b in iter_batches(path.read_bytes()) if b.compression == "gzip"]
    assert len(sections) > 30
    assert all(compress(GZIP, decompress(GZIP, s)) == s for s in sections)
    for level in (1, 6, 9):
        assert compress(GZIP, PAYLOAD, level=level) == jdk_gzip(PAYLOAD, level)


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


def test_the_codec_table_maps_names_and_codes_both_ways():
    for codec in CODECS:
        assert codec_by_name(codec.name) is codec_by_code(codec.code) is codec
        if codec.code:
            assert codec.decompress(codec.compress(PAYLOAD)) == PAYLOAD
    assert [c.level_config for c in CODECS if c.level_config] == [
        "compression.gzip.level", "compression.lz4.level", "compression.zstd.level"]
    with pytest.raises(UnknownCompressionError, match="'brotli'"):
        codec_by_name("brotli")
    with pytest.raises(UnknownCompressionError):
        codec_by_code(5)


@pytest.mark.parametrize("name, low, high", [("gzip", 1, 9), ("lz4", 1, 12), ("zstd", 1, 19)])
def test_levels_change_the_bytes_and_every_level_decodes(name, low, high):
    codec = codec_by_name(name)
    fast, small = codec.compress(PAYLOAD, level=low), codec.compress(PAYLOAD, level=high)
    assert len(small) < len(fast)
    assert codec.decompress(fast) == codec.decompress(small) == PAYLOAD


@pytest.mark.parametrize("name, level", [("gzip", 1), ("lz4", 17), ("zstd", 1)])
def test_a_log_recompresses_at_the_topics_configured_level(tmp_path, name, level):
    """compression.type recompresses appends at compression.<codec>.level, as Kafka's
    LogValidator does."""
    from logstore.config import LogConfig
    from logstore.log import Log
    from logstore.records import Record, build_batch
    from logstore.records.header import V2_HEADER_SIZE

    codec = codec_by_name(name)
    records = [Record(i, 1_000 + i, b"k%d" % i, PAYLOAD[i * 100:(i + 1) * 100]) for i in range(200)]
    bodies = {}
    for configured in (None, level):
        config = {"compression.type": name}
        if configured is not None:
            config[f"compression.{name}.level"] = configured
        with Log.open(tmp_path / f"t-{configured}-0", config) as log:
            log.append(build_batch(records))
            (batch,) = list(log.read(0).batches())
            body = bytes(batch.view[V2_HEADER_SIZE:])
            level_used = log.config.compression_level(name)
            assert level_used == (configured if configured is not None else LogConfig()[
                f"compression.{name}.level"])
            assert body == codec.compress(codec.decompress(body), level=level_used)
            assert [r.value for r in batch.records()] == [r.value for r in records]
            bodies[configured] = body
    assert bodies[None] != bodies[level]

"""Batch compression codecs (docs/FORMAT.md "Compression framing") with bounded decompression.

gzip, lz4 (frame) and zstd decompress through pyarrow streams read in chunks, so a
hostile batch stops inflating as soon as it passes the limit; snappy (xerial framing or
one raw block) is bounded by each block's declared length before it is inflated.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import lru_cache

import pyarrow as pa

from logstore.errors import CorruptRecordError, InvalidRecordError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4


class UnknownCompressionError(InvalidRecordError):
    """A compression name or attribute code that is not in Kafka's codec table."""


@dataclass(frozen=True)
class Codec:
    """One row of Kafka's codec table: the attribute code, the name configs and tools use, and
    the topic/producer config that sets its level (None when the codec has no levels)."""

    code: int
    name: str
    level_config: str | None = None

    def compress(self, data, level: int | None = None) -> bytes:
        """Compress a records block with Kafka's framing, at ``level`` (None: the default)."""
        return compress(self.code, data, level=level)

    def decompress(self, data, *, limit: int = 64 << 20, position: int = 0) -> bytes:
        """Inflate a records block, never past ``limit`` bytes (see decompress)."""
        return decompress(self.code, data, limit=limit, position=position)


CODECS = (
    Codec(NONE, "none"),
    Codec(GZIP, "gzip", "compression.gzip.level"),
    Codec(SNAPPY, "snappy"),
    Codec(LZ4, "lz4", "compression.lz4.level"),
    Codec(ZSTD, "zstd", "compression.zstd.level"),
)
COMPRESSION_NAMES = tuple(codec.name for codec in CODECS)
COMPRESSION_CODES = {codec.name: codec.code for codec in CODECS}
_BY_NAME = {codec.name: codec for codec in CODECS}


def codec_by_name(name: str) -> Codec:
    """The codec called ``name``; UnknownCompressionError names the known ones otherwise."""
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        raise UnknownCompressionError(
            f"unknown compression {name!r}; one of {COMPRESSION_NAMES}") from None


def codec_by_code(code: int) -> Codec:
    """The codec with attribute code ``code``; UnknownCompressionError for a code Kafka lacks."""
    if not 0 <= code < len(CODECS):
        raise UnknownCompressionError(f"unknown compression codec {code}")
    return CODECS[code]

# Default ceiling for one batch's inflated records; Kafka's own limits (message.max.bytes,
# fetch sizes) are far below it.
DEFAULT_MAX_INFLATED_BYTES = 64 << 20
_READ_CHUNK = 1 << 20

# snappy-java ("xerial") stream framing: magic, int32 version, int32 compatible version,
# then blocks of int32 compressed length + raw snappy block.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = struct.Struct(">8sii")
XERIAL_VERSION = 1
XERIAL_COMPATIBLE_VERSION = 1
XERIAL_BLOCK_SIZE = 32 * 1024
_INT32 = struct.Struct(">i")

# LZ4 frame as Kafka's KafkaLZ4BlockOutputStream writes it: magic, FLG = version 01 +
# independent blocks, BD = 64 KiB max block, HC = (xxh32(FLG BD) >> 8) & 0xFF; blocks are
# little-endian uint32 sizes (high bit = stored uncompressed); a zero size ends the frame.
LZ4_MAGIC = b"\x04\x22\x4d\x18"
LZ4_FLG_BD = b"\x60\x40"
LZ4_BLOCK_SIZE = 64 * 1024
LZ4_UNCOMPRESSED_BIT = 0x80000000
_UINT32_LE = struct.Struct("<I")
LZ4_END_MARK = b"\x00\x00\x00\x00"

_PRIME1, _PRIME2, _PRIME3, _PRIME4, _PRIME5 = (
    2654435761, 2246822519, 3266489917, 668265263, 374761393)
_MASK32 = 0xFFFFFFFF


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK32


def xxh32_short(data: bytes, seed: int = 0) -> int:
    """xxHash32 of an input shorter than 16 bytes (enough for an LZ4 frame descriptor)."""
    if len(data) >= 16:
        raise ValueError("xxh32_short takes fewer than 16 bytes")
    h = (seed + _PRIME5 + len(data)) & _MASK32
    i = 0
    while i + 4 <= len(data):
        h = (h + int.from_bytes(data[i:i + 4], "little") * _PRIME3) & _MASK32
        h = (_rotl32(h, 17) * _PRIME4) & _MASK32
        i += 4
    for b in data[i:]:
        h = (h + b * _PRIME5) & _MASK32
        h = (_rotl32(h, 11) * _PRIME1) & _MASK32
    h = ((h ^ (h >> 15)) * _PRIME2) & _MASK32
    h = ((h ^ (h >> 13)) * _PRIME3) & _MASK32
    return h ^ (h >> 16)


def lz4_descriptor_checksum(descriptor: bytes) -> int:
    """The HC byte of an LZ4 frame descriptor (FLG, BD and optional fields)."""
    return (xxh32_short(descriptor) >> 8) & 0xFF


LZ4_FRAME_HEADER = LZ4_MAGIC + LZ4_FLG_BD + bytes([lz4_descriptor_checksum(LZ4_FLG_BD)])

_STREAM_CODECS = {GZIP: "gzip", LZ4: "lz4", ZSTD: "zstd"}
_snappy = pa.Codec("snappy")
_lz4_raw = pa.Codec("lz4_raw")
# Kafka's defaults: compression.gzip.level -1 (zlib's 6), compression.zstd.level 3.
_GZIP_DEFAULT_LEVEL, _ZSTD_DEFAULT_LEVEL = 6, 3
_gzip = pa.Codec("gzip", compression_level=_GZIP_DEFAULT_LEVEL)
_zstd = pa.Codec("zstd", compression_level=_ZSTD_DEFAULT_LEVEL)
# The gzip member header (RFC 1952) java.util.zip.GZIPOutputStream writes, as Kafka's batches
# carry it on JDK 16+: no flags, MTIME 0, XFL 0 and OS 255 (unknown). zlib writes OS 3 (Unix) and
# XFL 2 or 4 at levels 9 and 1, which would change the batch's CRC; the deflate data is the same.
JAVA_GZIP_HEADER = bytes.fromhex("1f8b08000000000000ff")
# lz4-java's high compressor takes levels up to 17; the LZ4 library (and pyarrow) stops at 12.
_LZ4_MAX_LEVEL = 12

# zstd frame header (RFC 8878 3.1.1.1): magic, descriptor byte, optional window byte,
# dictionary id (0/1/2/4 bytes), frame content size (0/1/2/4/8 bytes).
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_ZSTD_DICT_ID_SIZES = (0, 1, 2, 4)
_ZSTD_CONTENT_SIZE_SIZES = (0, 2, 4, 8)


def compression_code(name: str) -> int:
    """Return the attribute code (0-4) for a codec name; UnknownCompressionError when unknown."""
    return codec_by_name(name).code


@lru_cache(maxsize=32)
def _leveled(name: str, level: int) -> pa.Codec:
    return pa.Codec(name, compression_level=level)


def compress(code: int, data, level: int | None = None) -> bytes:
    """Compress a bytes-like block with codec ``code`` using Kafka's framing, at the codec's
    ``level`` as Kafka's compression.<codec>.level gives it (None: Kafka's default; gzip -1 is
    zlib's default)."""
    if code == GZIP:
        codec = _gzip if level is None or level == -1 else _leveled("gzip", level)
        member = codec.compress(data, asbytes=True)
        return b"".join((JAVA_GZIP_HEADER, memoryview(member)[len(JAVA_GZIP_HEADER):]))
    if code == SNAPPY:
        return _snappy_xerial(memoryview(data).cast("B"))
    if code == LZ4:
        raw = _lz4_raw if level is None else _leveled("lz4_raw", min(level, _LZ4_MAX_LEVEL))
        return _lz4_frame(memoryview(data).cast("B"), raw)
    if code == ZSTD:
        return (_zstd if level is None else _leveled("zstd", level)).compress(data, asbytes=True)
    raise UnknownCompressionError(f"cannot compress with codec {code}")


def _snappy_xerial(view: memoryview) -> bytes:
    parts = [XERIAL_HEADER.pack(XERIAL_MAGIC, XERIAL_VERSION, XERIAL_COMPATIBLE_VERSION)]
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = _snappy.compress(view[start:start + XERIAL_BLOCK_SIZE], asbytes=True)
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _lz4_frame(view: memoryview, raw: pa.Codec) -> bytes:
    parts = [LZ4_FRAME_HEADER]
    for start in range(0, len(view), LZ4_BLOCK_SIZE):
        chunk = view[start:start + LZ4_BLOCK_SIZE]
        block = raw.compress(chunk, asbytes=True)
        if len(block) >= len(chunk):
            parts.append(_UINT32_LE.pack(len(chunk) | LZ4_UNCOMPRESSED_BIT))
            parts.append(bytes(chunk))
        else:
            parts.append(_UINT32_LE.pack(len(block)))
            parts.append(block)
    parts.append(LZ4_END_MARK)
    return b"".join(parts)


def decompress(code: int, data, *, limit: int = DEFAULT_MAX_INFLATED_BYTES, position: int = 0) -> bytes:
    """Inflate a compressed records block; never produces more than ``limit`` bytes.

    Raises CorruptRecordError (at ``position``) for undecodable data or data inflating
    past ``limit``.
    """
    try:
        if code == SNAPPY:
            return _snappy_decompress(memoryview(data).cast("B"), limit, position)
        if code == ZSTD:
            size = _zstd_content_size(data)
            if size is not None and size <= limit:
                try:
                    return _zstd.decompress(data, decompressed_size=size, asbytes=True)
                except (OSError, ValueError, pa.ArrowException):
                    pass  # e.g. several frames: the bounded stream below reads them all
        name = _STREAM_CODECS.get(code)
        if name is None:
            raise CorruptRecordError(f"unknown compression codec {code}", position=position)
        return _read_bounded(pa.CompressedInputStream(pa.py_buffer(data), name), limit, position)
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise CorruptRecordError(f"cannot decompress {COMPRESSION_NAMES[code]} records: {exc}",
                                 position=position) from None


def _zstd_content_size(data) -> int | None:
    """The content size a single zstd frame declares in its header, or None when absent."""
    header = bytes(memoryview(data)[:18])
    if len(header) < 6 or header[:4] != ZSTD_MAGIC:
        return None
    descriptor = header[4]
    single_segment = bool(descriptor & 0x20)
    size_field = _ZSTD_CONTENT_SIZE_SIZES[descriptor >> 6] or (1 if single_segment else 0)
    if not size_field:
        return None
    start = 5 + (0 if single_segment else 1) + _ZSTD_DICT_ID_SIZES[descriptor & 0x03]
    if len(header) < start + size_field:
        return None
    size = int.from_bytes(header[start:start + size_field], "little")
    return size + 256 if size_field == 2 else size


def _read_bounded(stream, limit: int, position: int) -> bytes:
    chunks = []
    total = 0
    chunk_size = min(limit + 1, _READ_CHUNK)
    while True:
        chunk = stream.read(chunk_size)
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > limit:
            raise CorruptRecordError(f"compressed records inflate past {limit} bytes", position=position)
        chunks.append(chunk)


def _raw_snappy_length(block: memoryview, position: int) -> int:
    """The uncompressed length a raw snappy block declares (an unsigned varint prefix)."""
    length = 0
    for i in range(min(5, len(block))):
        b = block[i]
        length |= (b & 0x7F) << (7 * i)
        if b < 0x80:
            return length
    raise CorruptRecordError("bad snappy block length", position=position)


def _snappy_block(block: memoryview, budget: int, position: int) -> bytes:
    length = _raw_snappy_length(block, position)
    if length > budget:
        raise CorruptRecordError("compressed records inflate past the limit", position=position)
    return _snappy.decompress(block, decompressed_size=length, asbytes=True)


def _snappy_decompress(view: memoryview, limit: int, position: int) -> bytes:
    if view[:len(XERIAL_MAGIC)] != XERIAL_MAGIC:
        return _snappy_block(view, limit, position)
    pos = XERIAL_HEADER.size
    if len(view) < pos:
        raise CorruptRecordError("truncated xerial snappy header", position=position)
    parts = []
    budget = limit
    while pos < len(view):
        if pos + 4 > len(view):
            raise CorruptRecordError("truncated xerial snappy block length", position=position)
        (size,) = _INT32.unpack_from(view, pos)
        pos += 4
        if size < 0 or size > len(view) - pos:
            raise CorruptRecordError("xerial snappy block runs past the end", position=position)
        block = _snappy_block(view[pos:pos + size], budget, position)
        budget -= len(block)
        parts.append(block)
        pos += size
    return b"".join(parts)

"""Varints, one value at a time: zigzag (Kafka's varint / varlong, protobuf sint32/sint64 style)
and unsigned (Kafka's unsigned varint: compact lengths and tagged fields of flexible versions).

The public scalar codec for tools that pick single records apart; bulk record encoding and
decoding use the numba kernels in ``_kernels``, which property tests check against these.
"""

from __future__ import annotations

from logstore.errors import CorruptRecordError, InvalidRecordError

MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def encode_unsigned_varint(value: int) -> bytes:
    """Encode a non-negative int as an unsigned base-128 varint (Kafka's writeUnsignedVarint)."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Encode a signed int64 as a zigzag varint (1 to 10 bytes); InvalidRecordError outside int64."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise InvalidRecordError(f"{value} does not fit in an int64")
    return encode_unsigned_varint((value << 1) ^ (value >> 63))


def size_of_varint(value: int) -> int:
    """Return how many bytes ``encode_varint(value)`` takes."""
    z = (value << 1) ^ (value >> 63)
    size = 1
    while z >= 0x80:
        z >>= 7
        size += 1
    return size


def decode_varint(buffer, position: int = 0, *, max_bytes: int = MAX_VARLONG_BYTES) -> tuple[int, int]:
    """Decode a zigzag varint at ``position``; return (value, next position).

    ``max_bytes`` is 5 for Kafka's varint (int32) and 10 for varlong (int64).
    Raises CorruptRecordError when the varint runs past the buffer or is too long, and
    InvalidRecordError for a negative position (it would read from the end).
    """
    if position < 0:
        raise InvalidRecordError(f"position {position} is outside the buffer")
    z = 0
    shift = 0
    end = len(buffer)
    pos = position
    for _ in range(max_bytes):
        if pos >= end:
            raise CorruptRecordError("varint runs past the end of the buffer", position=position)
        b = buffer[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        if b < 0x80:
            value = (z >> 1) ^ -(z & 1)
            low, high = (_INT32_MIN, _INT32_MAX) if max_bytes == MAX_VARINT_BYTES else (_INT64_MIN, _INT64_MAX)
            if not low <= value <= high:
                raise CorruptRecordError("varint out of range", position=position)
            return value, pos
        shift += 7
    raise CorruptRecordError(f"varint longer than {max_bytes} bytes", position=position)

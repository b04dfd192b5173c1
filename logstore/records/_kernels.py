"""numba kernels for the record walks numpy cannot vectorise (varint encode/decode, gathers).

``read_zigzag``, ``write_zigzag`` and ``zigzag_size`` are the one varint reader and writer
every kernel (the log's validator, the cleaner) inlines, and the status codes here the one set
they report with.

Every kernel bounds-checks against the buffer it is given and reports corruption with a
status code and the byte position instead of raising, so the caller can raise our own
error type. Status codes are listed in ``STATUS_MESSAGES``.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

OK = 0
ERR_VARINT = 1
ERR_RECORD_LENGTH = 2
ERR_KEY_LENGTH = 3
ERR_VALUE_LENGTH = 4
ERR_HEADER_COUNT = 5
ERR_HEADER_KEY = 6
ERR_HEADER_VALUE = 7
ERR_RECORD_SIZE_MISMATCH = 8
ERR_TRAILING_BYTES = 9
ERR_OFFSET_DELTA = 10

STATUS_MESSAGES = {
    ERR_VARINT: "truncated, overlong or out-of-range varint",
    ERR_RECORD_LENGTH: "record length out of range or past the end of the batch",
    ERR_KEY_LENGTH: "record key length out of range",
    ERR_VALUE_LENGTH: "record value length out of range",
    ERR_HEADER_COUNT: "record header count out of range",
    ERR_HEADER_KEY: "record header key length out of range",
    ERR_HEADER_VALUE: "record header value length out of range",
    ERR_RECORD_SIZE_MISMATCH: "record fields do not fill the record's declared length",
    ERR_TRAILING_BYTES: "bytes left over after the batch's declared record count",
    ERR_OFFSET_DELTA: "record offset delta is not its index in the batch",
}

# Smallest possible record body: attributes, timestampDelta, offsetDelta, keyLength,
# valueLength, headersCount — one byte each (docs/FORMAT.md "Record").
MIN_RECORD_BODY = 6
# Smallest record including its length varint.
MIN_RECORD_SIZE = MIN_RECORD_BODY + 1
# Smallest header: key length 0 and value length -1.
MIN_HEADER_SIZE = 2

_LOW63 = 0x7FFFFFFFFFFFFFFF
_LOW57 = 0x01FFFFFFFFFFFFFF
_UINT32_LIMIT = 1 << 32


@njit(cache=True, inline="always")
def read_zigzag(buf, pos, end, max_bytes):
    """Zigzag varint at pos, not past end, of at most max_bytes (5: an int32 varint, 10: a
    varlong): (value, next pos), next pos -1 when truncated, overlong or out of range.
    One-byte values, the common case, take the short path."""
    if pos >= end:
        return np.int64(0), -1
    z = np.int64(buf[pos])
    if z < 0x80:
        return (z >> 1) ^ -(z & 1), pos + 1
    z &= 0x7F
    shift = 7
    pos += 1
    for _ in range(max_bytes - 1):
        if pos >= end:
            return np.int64(0), -1
        b = np.int64(buf[pos])
        pos += 1
        z |= (b & 0x7F) << shift
        if b < 0x80:
            if max_bytes == 5 and (z < 0 or z >= _UINT32_LIMIT):
                return np.int64(0), -1
            return ((z >> 1) & _LOW63) ^ -(z & 1), pos
        shift += 7
    return np.int64(0), -1


@njit(cache=True, inline="always")
def zigzag_size(value):
    z = (value << 1) ^ (value >> 63)
    size = 1
    while z & ~0x7F:
        z = (z >> 7) & _LOW57
        size += 1
    return size


@njit(cache=True, inline="always")
def write_zigzag(out, pos, value):
    z = (value << 1) ^ (value >> 63)
    while z & ~0x7F:
        out[pos] = (z & 0x7F) | 0x80
        pos += 1
        z = (z >> 7) & _LOW57
    out[pos] = z
    return pos + 1


@intrinsic
def _memcpy(typingctx, dst, dst_pos, src, src_pos, size):
    """memcpy(dst.data + dst_pos, src.data + src_pos, size) for 1-D uint8 arrays.

    An order of magnitude faster than numpy slice assignment for short keys and values;
    callers guarantee both ranges lie inside their arrays.
    """
    sig = types.void(dst, dst_pos, src, src_pos, size)

    def codegen(context, builder, signature, args):
        dst_array = context.make_array(signature.args[0])(context, builder, args[0])
        src_array = context.make_array(signature.args[2])(context, builder, args[2])
        cgutils.raw_memcpy(builder, builder.gep(dst_array.data, [args[1]]),
                           builder.gep(src_array.data, [args[3]]), args[4], 1)
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True)
def decode_records(buf, start, end, count):
    """Walk ``count`` v2 records in buf[start:end], copying keys and values out.

    Returns (status, error position, total headers, offset_delta, timestamp_delta,
    key_offsets, key_data, key_null, value_offsets, value_data, value_null, headers_pos,
    headers_count); offsets are int32 Arrow offsets (n + 1), data arrays are sized to the
    input and filled up to their last offset. The caller checks count fits in the input.
    """
    offset_delta = np.empty(count, np.int64)
    timestamp_delta = np.empty(count, np.int64)
    key_offsets = np.empty(count + 1, np.int32)
    key_data = np.empty(end - start, np.uint8)
    key_null = np.zeros(count, np.bool_)
    value_offsets = np.empty(count + 1, np.int32)
    value_data = np.empty(end - start, np.uint8)
    value_null = np.zeros(count, np.bool_)
    headers_pos = np.empty(count, np.int64)
    headers_count = np.empty(count, np.int64)
    result = (offset_delta, timestamp_delta, key_offsets, key_data, key_null, value_offsets,
              value_data, value_null, headers_pos, headers_count)
    key_offsets[0] = 0
    value_offsets[0] = 0
    key_at = 0
    value_at = 0
    total_headers = 0
    pos = start
    for i in range(count):
        length, p = read_zigzag(buf, pos, end, 5)
        if p < 0:
            return ERR_VARINT, pos, total_headers, result
        if length < MIN_RECORD_BODY or length > end - p:
            return ERR_RECORD_LENGTH, pos, total_headers, result
        record_end = p + length
        p += 1  # attributes: unused
        ts, q = read_zigzag(buf, p, record_end, 10)
        if q < 0:
            return ERR_VARINT, p, total_headers, result
        timestamp_delta[i] = ts
        od, p = read_zigzag(buf, q, record_end, 5)
        if p < 0:
            return ERR_VARINT, q, total_headers, result
        offset_delta[i] = od
        kl, q = read_zigzag(buf, p, record_end, 5)
        if q < 0:
            return ERR_VARINT, p, total_headers, result
        if kl < -1 or kl > record_end - q:
            return ERR_KEY_LENGTH, p, total_headers, result
        if kl < 0:
            key_null[i] = True
        else:
            _memcpy(key_data, key_at, buf, q, kl)
            key_at += kl
            q += kl
        key_offsets[i + 1] = key_at
        vl, p = read_zigzag(buf, q, record_end, 5)
        if p < 0:
            return ERR_VARINT, q, total_headers, result
        if vl < -1 or vl > record_end - p:
            return ERR_VALUE_LENGTH, q, total_headers, result
        if vl < 0:
            value_null[i] = True
        else:
            _memcpy(value_data, value_at, buf, p, vl)
            value_at += vl
            p += vl
        value_offsets[i + 1] = value_at
        hc, q = read_zigzag(buf, p, record_end, 5)
        if q < 0:
            return ERR_VARINT, p, total_headers, result
        if hc < 0 or hc > (record_end - q) // MIN_HEADER_SIZE:
            return ERR_HEADER_COUNT, p, total_headers, result
        headers_pos[i] = p
        headers_count[i] = hc
        total_headers += hc
        for _ in range(hc):
            hk, p = read_zigzag(buf, q, record_end, 5)
            if p < 0:
                return ERR_VARINT, q, total_headers, result
            if hk < 0 or hk > record_end - p:
                return ERR_HEADER_KEY, q, total_headers, result
            p += hk
            hv, q = read_zigzag(buf, p, record_end, 5)
            if q < 0:
                return ERR_VARINT, p, total_headers, result
            if hv < -1 or hv > record_end - q:
                return ERR_HEADER_VALUE, p, total_headers, result
            if hv > 0:
                q += hv
        if q != record_end:
            return ERR_RECORD_SIZE_MISMATCH, pos, total_headers, result
        pos = record_end
    if pos != end:
        return ERR_TRAILING_BYTES, pos, total_headers, result
    return OK, pos, total_headers, result


@njit(cache=True)
def decode_headers(buf, headers_pos, headers_count, total):
    """Copy out every header of records already checked by ``decode_records``.

    Returns (list_offsets per record, key_offsets, key_data, value_offsets, value_data,
    value_null), with int32 Arrow offsets, in record order.
    """
    n = len(headers_pos)
    list_offsets = np.empty(n + 1, np.int32)
    key_offsets = np.empty(total + 1, np.int32)
    value_offsets = np.empty(total + 1, np.int32)
    value_null = np.zeros(total, np.bool_)
    key_bytes = 0
    value_bytes = 0
    for i in range(n):
        _, p = read_zigzag(buf, headers_pos[i], len(buf), 5)
        for _ in range(headers_count[i]):
            kl, p = read_zigzag(buf, p, len(buf), 5)
            key_bytes += kl
            p += kl
            vl, p = read_zigzag(buf, p, len(buf), 5)
            if vl > 0:
                value_bytes += vl
                p += vl
    key_data = np.empty(key_bytes, np.uint8)
    value_data = np.empty(value_bytes, np.uint8)
    list_offsets[0] = 0
    key_offsets[0] = 0
    value_offsets[0] = 0
    key_at = 0
    value_at = 0
    j = 0
    for i in range(n):
        _, p = read_zigzag(buf, headers_pos[i], len(buf), 5)
        for _ in range(headers_count[i]):
            kl, p = read_zigzag(buf, p, len(buf), 5)
            _memcpy(key_data, key_at, buf, p, kl)
            key_at += kl
            p += kl
            key_offsets[j + 1] = key_at
            vl, p = read_zigzag(buf, p, len(buf), 5)
            if vl < 0:
                value_null[j] = True
            else:
                _memcpy(value_data, value_at, buf, p, vl)
                value_at += vl
                p += vl
            value_offsets[j + 1] = value_at
            j += 1
        list_offsets[i + 1] = j
    return list_offsets, key_offsets, key_data, value_offsets, value_data, value_null


@njit(cache=True)
def encode_headers(list_offsets, key_data, key_offsets, value_data, value_offsets, value_null):
    """Encode every record's header block (count varint, then key/value pairs).

    Header i of the flattened arrays belongs to record r when
    list_offsets[r] <= i < list_offsets[r + 1]. Returns (blob, int64 offsets per record).
    """
    n = len(list_offsets) - 1
    total = 0
    for r in range(n):
        total += zigzag_size(np.int64(list_offsets[r + 1] - list_offsets[r]))
        for i in range(list_offsets[r], list_offsets[r + 1]):
            kl = np.int64(key_offsets[i + 1] - key_offsets[i])
            total += zigzag_size(kl) + kl
            if value_null[i]:
                total += 1
            else:
                vl = np.int64(value_offsets[i + 1] - value_offsets[i])
                total += zigzag_size(vl) + vl
    out = np.empty(total, np.uint8)
    offsets = np.empty(n + 1, np.int64)
    p = 0
    for r in range(n):
        offsets[r] = p
        p = write_zigzag(out, p, np.int64(list_offsets[r + 1] - list_offsets[r]))
        for i in range(list_offsets[r], list_offsets[r + 1]):
            ks = key_offsets[i]
            kl = np.int64(key_offsets[i + 1] - ks)
            p = write_zigzag(out, p, kl)
            _memcpy(out, p, key_data, ks, kl)
            p += kl
            if value_null[i]:
                p = write_zigzag(out, p, np.int64(-1))
            else:
                vs = value_offsets[i]
                vl = np.int64(value_offsets[i + 1] - vs)
                p = write_zigzag(out, p, vl)
                _memcpy(out, p, value_data, vs, vl)
                p += vl
    offsets[n] = p
    return out, offsets


@njit(cache=True)
def encode_records(header_room, offset_delta, timestamp_delta, key_data, key_offsets, key_null,
                   value_data, value_offsets, value_null, headers_blob, headers_offsets,
                   has_headers):
    """Encode v2 records into a new uint8 array, leaving ``header_room`` bytes in front.

    Keys/values are Arrow-style (data, offsets, null flags); headers are pre-encoded blocks
    (``encode_headers``) or, without ``has_headers``, a zero count per record.
    """
    n = len(offset_delta)
    body = np.empty(n, np.int64)
    total = 0
    for i in range(n):
        size = 1 + zigzag_size(timestamp_delta[i]) + zigzag_size(offset_delta[i])
        if key_null[i]:
            size += 1
        else:
            kl = np.int64(key_offsets[i + 1] - key_offsets[i])
            size += zigzag_size(kl) + kl
        if value_null[i]:
            size += 1
        else:
            vl = np.int64(value_offsets[i + 1] - value_offsets[i])
            size += zigzag_size(vl) + vl
        if has_headers:
            size += headers_offsets[i + 1] - headers_offsets[i]
        else:
            size += 1
        body[i] = size
        total += zigzag_size(size) + size
    out = np.empty(header_room + total, np.uint8)
    p = header_room
    for i in range(n):
        p = write_zigzag(out, p, body[i])
        out[p] = 0
        p = write_zigzag(out, p + 1, timestamp_delta[i])
        p = write_zigzag(out, p, offset_delta[i])
        if key_null[i]:
            p = write_zigzag(out, p, np.int64(-1))
        else:
            ks = key_offsets[i]
            kl = np.int64(key_offsets[i + 1] - ks)
            p = write_zigzag(out, p, kl)
            _memcpy(out, p, key_data, ks, kl)
            p += kl
        if value_null[i]:
            p = write_zigzag(out, p, np.int64(-1))
        else:
            vs = value_offsets[i]
            vl = np.int64(value_offsets[i + 1] - vs)
            p = write_zigzag(out, p, vl)
            _memcpy(out, p, value_data, vs, vl)
            p += vl
        if has_headers:
            hs = headers_offsets[i]
            hl = headers_offsets[i + 1] - hs
            _memcpy(out, p, headers_blob, hs, hl)
            p += hl
        else:
            out[p] = 0
            p += 1
    return out

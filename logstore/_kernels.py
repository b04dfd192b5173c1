"""numba kernels of the Log's leader append path (records/_kernels.py holds the codec's own).

`scan_records` is Kafka's "skip key/value" record walk: it checks the structure of every
record of a v2 batch and gathers what validation needs (timestamp range, null keys, offset
deltas) without copying keys, values or headers.
"""

from __future__ import annotations

import numpy as np
from numba import njit

OK = 0
ERR_VARINT = 1
ERR_LENGTH = 2
ERR_FIELD = 3
ERR_OFFSET_DELTA = 4
ERR_TRAILING = 5

STATUS_MESSAGES = {
    ERR_VARINT: "truncated or overlong varint",
    ERR_LENGTH: "record length out of range",
    ERR_FIELD: "record field length out of range or not filling the record",
    ERR_OFFSET_DELTA: "record offset delta is not its index in the batch",
    ERR_TRAILING: "record bytes left over after the batch's record count",
}

NO_TIMESTAMP = -1
VARINT_MAX_BYTES = 5
VARLONG_MAX_BYTES = 10


@njit(cache=True, inline="always")
def _uvarint(buf, pos, end, max_bytes):
    """Unsigned base-128 varint at pos (not past end, at most max_bytes): (value, next pos);
    next pos -1 when truncated or overlong. One-byte values take the short path."""
    if pos >= end:
        return np.int64(0), -1
    b = buf[pos]
    if b < 0x80:
        return np.int64(b), pos + 1
    z = np.int64(b & 0x7F)
    shift = 7
    pos += 1
    limit = 7 * max_bytes
    while pos < end and shift < limit:
        b = buf[pos]
        pos += 1
        z |= np.int64(b & 0x7F) << shift
        if b < 0x80:
            return z, pos
        shift += 7
    return np.int64(0), -1


@njit(cache=True, inline="always")
def _unzigzag(z):
    return ((z >> 1) & 0x7FFFFFFFFFFFFFFF) ^ -(z & 1)


@njit(cache=True)
def scan_records(buf, start, end, count, base_timestamp):
    """Walk `count` records in buf[start:end].

    Returns (status, error position, min timestamp (ignoring -1), max timestamp, any null key).
    """
    pos = start
    min_ts = np.int64(0x7FFFFFFFFFFFFFFF)
    max_ts = np.int64(NO_TIMESTAMP)
    null_key = False
    for i in range(count):
        z, p = _uvarint(buf, pos, end, VARINT_MAX_BYTES)
        if p < 0:
            return ERR_VARINT, pos, min_ts, max_ts, null_key
        length = _unzigzag(z)
        if length < 6 or length > end - p:
            return ERR_LENGTH, pos, min_ts, max_ts, null_key
        record_end = p + length
        p += 1  # attributes
        z, p = _uvarint(buf, p, record_end, VARLONG_MAX_BYTES)
        if p < 0:
            return ERR_VARINT, pos, min_ts, max_ts, null_key
        ts = base_timestamp + _unzigzag(z)
        if ts != NO_TIMESTAMP and ts < min_ts:
            min_ts = ts
        if ts > max_ts:
            max_ts = ts
        z, p = _uvarint(buf, p, record_end, VARINT_MAX_BYTES)
        if p < 0:
            return ERR_VARINT, pos, min_ts, max_ts, null_key
        if _unzigzag(z) != i:
            return ERR_OFFSET_DELTA, pos, min_ts, max_ts, null_key
        z, p = _uvarint(buf, p, record_end, VARINT_MAX_BYTES)  # key
        if p < 0:
            return ERR_VARINT, pos, min_ts, max_ts, null_key
        n = _unzigzag(z)
        if n < -1 or n > record_end - p:
            return ERR_FIELD, pos, min_ts, max_ts, null_key
        if n == -1:
            null_key = True
        elif n > 0:
            p += n
        z, p = _uvarint(buf, p, record_end, VARINT_MAX_BYTES)  # value
        if p < 0:
            return ERR_VARINT, pos, min_ts, max_ts, null_key
        n = _unzigzag(z)
        if n < -1 or n > record_end - p:
            return ERR_FIELD, pos, min_ts, max_ts, null_key
        if n > 0:
            p += n
        z, p = _uvarint(buf, p, record_end, VARINT_MAX_BYTES)
        headers = _unzigzag(z)
        if p < 0 or headers < 0:
            return ERR_FIELD, pos, min_ts, max_ts, null_key
        for _ in range(headers):
            z, p = _uvarint(buf, p, record_end, VARINT_MAX_BYTES)
            n = _unzigzag(z)
            if p < 0 or n < 0 or n > record_end - p:
                return ERR_FIELD, pos, min_ts, max_ts, null_key
            p += n
            z, p = _uvarint(buf, p, record_end, VARINT_MAX_BYTES)
            n = _unzigzag(z)
            if p < 0 or n < -1 or n > record_end - p:
                return ERR_FIELD, pos, min_ts, max_ts, null_key
            if n > 0:
                p += n
        if p != record_end:
            return ERR_FIELD, pos, min_ts, max_ts, null_key
        pos = record_end
    if pos != end:
        return ERR_TRAILING, pos, min_ts, max_ts, null_key
    return OK, pos, min_ts, max_ts, null_key

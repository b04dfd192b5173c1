"""numba kernels of the Log's leader append path (records/_kernels.py holds the codec's own,
and the varint reader and status codes both use).

`scan_records` is Kafka's "skip key/value" record walk: it checks the structure of every
record of a v2 batch and gathers what validation needs (timestamp range, null keys, offset
deltas) without copying keys, values or headers.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from logstore.records._kernels import (
    ERR_HEADER_COUNT,
    ERR_HEADER_KEY,
    ERR_HEADER_VALUE,
    ERR_KEY_LENGTH,
    ERR_OFFSET_DELTA,
    ERR_RECORD_LENGTH,
    ERR_RECORD_SIZE_MISMATCH,
    ERR_TRAILING_BYTES,
    ERR_VALUE_LENGTH,
    ERR_VARINT,
    MIN_RECORD_BODY,
    OK,
    read_zigzag,
)

NO_TIMESTAMP = -1
VARINT_MAX_BYTES = 5
VARLONG_MAX_BYTES = 10


@njit(cache=True)
def scan_records(buf, start, end, count, base_timestamp):
    """Walk `count` records in buf[start:end].

    Returns (status, error position, min timestamp (ignoring -1), max timestamp, any null key);
    status is one of records._kernels' codes.
    """
    pos = start
    min_ts = np.int64(0x7FFFFFFFFFFFFFFF)
    max_ts = np.int64(NO_TIMESTAMP)
    null_key = False
    for i in range(count):
        length, p = read_zigzag(buf, pos, end, VARINT_MAX_BYTES)
        if p < 0:
            return ERR_VARINT, pos, min_ts, max_ts, null_key
        if length < MIN_RECORD_BODY or length > end - p:
            return ERR_RECORD_LENGTH, pos, min_ts, max_ts, null_key
        record_end = p + length
        p += 1  # attributes
        delta, p = read_zigzag(buf, p, record_end, VARLONG_MAX_BYTES)
        if p < 0:
            return ERR_VARINT, pos, min_ts, max_ts, null_key
        ts = base_timestamp + delta
        if ts != NO_TIMESTAMP and ts < min_ts:
            min_ts = ts
        if ts > max_ts:
            max_ts = ts
        delta, p = read_zigzag(buf, p, record_end, VARINT_MAX_BYTES)
        if p < 0:
            return ERR_VARINT, pos, min_ts, max_ts, null_key
        if delta != i:
            return ERR_OFFSET_DELTA, pos, min_ts, max_ts, null_key
        n, p = read_zigzag(buf, p, record_end, VARINT_MAX_BYTES)  # key
        if p < 0:
            return ERR_VARINT, pos, min_ts, max_ts, null_key
        if n < -1 or n > record_end - p:
            return ERR_KEY_LENGTH, pos, min_ts, max_ts, null_key
        if n == -1:
            null_key = True
        elif n > 0:
            p += n
        n, p = read_zigzag(buf, p, record_end, VARINT_MAX_BYTES)  # value
        if p < 0:
            return ERR_VARINT, pos, min_ts, max_ts, null_key
        if n < -1 or n > record_end - p:
            return ERR_VALUE_LENGTH, pos, min_ts, max_ts, null_key
        if n > 0:
            p += n
        headers, p = read_zigzag(buf, p, record_end, VARINT_MAX_BYTES)
        if p < 0 or headers < 0:
            return ERR_HEADER_COUNT, pos, min_ts, max_ts, null_key
        for _ in range(headers):
            n, p = read_zigzag(buf, p, record_end, VARINT_MAX_BYTES)
            if p < 0 or n < 0 or n > record_end - p:
                return ERR_HEADER_KEY, pos, min_ts, max_ts, null_key
            p += n
            n, p = read_zigzag(buf, p, record_end, VARINT_MAX_BYTES)
            if p < 0 or n < -1 or n > record_end - p:
                return ERR_HEADER_VALUE, pos, min_ts, max_ts, null_key
            if n > 0:
                p += n
        if p != record_end:
            return ERR_RECORD_SIZE_MISMATCH, pos, min_ts, max_ts, null_key
        pos = record_end
    if pos != end:
        return ERR_TRAILING_BYTES, pos, min_ts, max_ts, null_key
    return OK, pos, min_ts, max_ts, null_key

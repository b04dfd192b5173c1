"""Decoding record batches straight into Arrow columns (offset, timestamp, key, value, headers)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyarrow as pa

from logstore.errors import CorruptRecordError
from logstore.records import _kernels
from logstore.records.batch import RecordBatch, RecordColumns, iter_batches
from logstore.records.builder import HEADER_TYPE, HEADERS_TYPE
from logstore.records.compression import DEFAULT_MAX_INFLATED_BYTES

RECORD_SCHEMA = pa.schema([
    ("offset", pa.int64()),
    ("timestamp", pa.int64()),
    ("key", pa.binary()),
    ("value", pa.binary()),
    ("headers", HEADERS_TYPE),
])
_BINARY = pa.binary()
_EMPTY_HEADER_PAIRS = pa.array([], type=HEADER_TYPE)


def _binary_array(data: np.ndarray, pos: np.ndarray, length: np.ndarray, kind: pa.DataType = _BINARY) -> pa.Array:
    """Gather (pos, length) slices of data into one Arrow binary/string array; -1 = null."""
    values, offsets = _kernels.gather(data, pos, length)
    nulls = length < 0
    null_count = int(np.count_nonzero(nulls))
    validity = pa.py_buffer(np.packbits(~nulls, bitorder="little")) if null_count else None
    return pa.Array.from_buffers(kind, len(pos), [validity, pa.py_buffer(offsets), pa.py_buffer(values)],
                                 null_count)


def _headers_array(cols: RecordColumns, position: int) -> pa.Array:
    list_offsets = np.zeros(cols.headers_count.size + 1, np.int32)
    np.cumsum(cols.headers_count, out=list_offsets[1:])
    if cols.header_key_pos.size:
        keys = _binary_array(cols.data, cols.header_key_pos, cols.header_key_len, pa.string())
        try:
            keys.validate(full=True)
        except pa.ArrowInvalid:
            raise CorruptRecordError("header key is not UTF-8", position=position) from None
        values = _binary_array(cols.data, cols.header_value_pos, cols.header_value_len)
        pairs = pa.StructArray.from_arrays([keys, values], fields=list(HEADER_TYPE))
    else:
        pairs = _EMPTY_HEADER_PAIRS
    return pa.ListArray.from_arrays(pa.array(list_offsets), pairs, type=HEADERS_TYPE)


def columns_to_record_batch(cols: RecordColumns, position: int = 0) -> pa.RecordBatch:
    """Turn one batch's decoded columns into a pyarrow.RecordBatch of RECORD_SCHEMA."""
    return pa.RecordBatch.from_arrays([
        pa.array(cols.offset),
        pa.array(cols.timestamp),
        _binary_array(cols.data, cols.key_pos, cols.key_len),
        _binary_array(cols.data, cols.value_pos, cols.value_len),
        _headers_array(cols, position),
    ], schema=RECORD_SCHEMA)


def columns_to_table(cols: RecordColumns, position: int = 0) -> pa.Table:
    """Turn one batch's decoded columns into a pyarrow.Table of RECORD_SCHEMA."""
    return pa.Table.from_batches([columns_to_record_batch(cols, position)], schema=RECORD_SCHEMA)


def batches_to_arrow(buffers_or_batches: Iterable, *,
                     max_inflated_bytes: int = DEFAULT_MAX_INFLATED_BYTES) -> pa.Table:
    """Decode many batches into one pyarrow.Table (one chunk per batch).

    Takes RecordBatch objects and/or bytes-like buffers of concatenated batches (a partial
    trailing batch in a buffer is ignored). Raises CorruptRecordError on bad bytes.
    """
    if isinstance(buffers_or_batches, RecordBatch | bytes | bytearray | memoryview):
        buffers_or_batches = [buffers_or_batches]
    chunks = []
    for item in buffers_or_batches:
        batches = [item] if isinstance(item, RecordBatch) else iter_batches(item)
        for batch in batches:
            cols = batch.columns(max_inflated_bytes=max_inflated_bytes)
            chunks.append(columns_to_record_batch(cols, batch.position))
    return pa.Table.from_batches(chunks, schema=RECORD_SCHEMA)

"""Decoding record batches straight into Arrow columns (offset, timestamp, key, value, headers)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from logstore.errors import CorruptRecordError
from logstore.records.builder import HEADER_TYPE, HEADERS_TYPE
from logstore.records.columns import RecordColumns

RECORD_SCHEMA = pa.schema([
    ("offset", pa.int64()),
    ("timestamp", pa.int64()),
    ("key", pa.binary()),
    ("value", pa.binary()),
    ("headers", HEADERS_TYPE),
])
_BINARY = pa.binary()
_EMPTY_HEADER_PAIRS = pa.nulls(0, HEADER_TYPE)  # pa.array([]) would import pandas (0.2 s)


def _binary_array(data: np.ndarray, offsets: np.ndarray, null: np.ndarray,
                  kind: pa.DataType = _BINARY) -> pa.Array:
    """An Arrow binary/string array over (data, int32 offsets, null flags) without copying."""
    null_count = int(np.count_nonzero(null)) if null.size else 0
    validity = pa.py_buffer(np.packbits(~null, bitorder="little")) if null_count else None
    return pa.Array.from_buffers(kind, offsets.size - 1,
                                 [validity, pa.py_buffer(offsets), pa.py_buffer(data)], null_count)


def _headers_array(cols: RecordColumns, position: int) -> pa.Array:
    if cols.header_key_offsets.size > 1:
        keys = _binary_array(cols.header_key_data, cols.header_key_offsets,
                             np.zeros(0, np.bool_), pa.string())
        try:
            keys.validate(full=True)
        except pa.ArrowInvalid:
            raise CorruptRecordError("header key is not UTF-8", position=position) from None
        values = _binary_array(cols.header_value_data, cols.header_value_offsets,
                               cols.header_value_null)
        pairs = pa.StructArray.from_arrays([keys, values], fields=list(HEADER_TYPE))
    else:
        pairs = _EMPTY_HEADER_PAIRS
    return pa.Array.from_buffers(HEADERS_TYPE, cols.headers_offsets.size - 1,
                                 [None, pa.py_buffer(cols.headers_offsets)], 0, children=[pairs])


def columns_to_record_batch(cols: RecordColumns, position: int = 0) -> pa.RecordBatch:
    """Turn one batch's decoded columns into a pyarrow.RecordBatch of RECORD_SCHEMA."""
    return pa.RecordBatch.from_arrays([
        pa.array(cols.offset),
        pa.array(cols.timestamp),
        _binary_array(cols.key_data, cols.key_offsets, cols.key_null),
        _binary_array(cols.value_data, cols.value_offsets, cols.value_null),
        _headers_array(cols, position),
    ], schema=RECORD_SCHEMA)


def columns_to_table(cols: RecordColumns, position: int = 0) -> pa.Table:
    """Turn one batch's decoded columns into a pyarrow.Table of RECORD_SCHEMA."""
    return pa.Table.from_batches([columns_to_record_batch(cols, position)], schema=RECORD_SCHEMA)

"""Batch builders: build_batch (Record objects) and build_batch_columnar (Arrow/numpy columns).

Both end in one numba kernel that writes every record; the only per-record Python work is
build_batch pulling fields out of its Record objects.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

import numpy as np
import pyarrow as pa

from logstore.errors import InvalidRecordError
from logstore.records import _kernels
from logstore.records.compression import NONE, compress, compression_code
from logstore.records.crc import crc32c
from logstore.records.header import (
    ATTRIBUTES_OFFSET,
    CONTROL_BIT,
    CRC_OFFSET,
    DELETE_HORIZON_BIT,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    V2_HEADER,
    V2_HEADER_SIZE,
)
from logstore.records.header import INT32_MAX as _INT32_MAX
from logstore.records.record import Record

HEADER_TYPE = pa.struct([("key", pa.string()), ("value", pa.binary())])
HEADERS_TYPE = pa.list_(HEADER_TYPE)
_TIMESTAMP_TYPE_CODES = {"CreateTime": 0, "LogAppendTime": 1}
_EMPTY_BYTES = np.empty(0, np.uint8)
_UINT32 = struct.Struct(">I")


def _binary_column(column, n: int | None, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data uint8, int64 offsets of n + 1, null flags) for a key or value column.

    Accepts None (all null), pyarrow binary/string/fixed-size arrays, numpy 2-D uint8 or
    fixed-width bytes ('S') arrays (raw itemsize bytes each), or a sequence of bytes/None.
    """
    if column is None:
        return _EMPTY_BYTES, np.zeros(n + 1, np.int64), np.ones(n, np.bool_)
    if isinstance(column, np.ndarray) and (column.dtype.kind == "S" or (
            column.dtype == np.uint8 and column.ndim == 2)):
        rows = column.shape[0]
        width = column.dtype.itemsize if column.dtype.kind == "S" else column.shape[1]
        data = np.ascontiguousarray(column).view(np.uint8).reshape(-1)
        return data, np.arange(rows + 1, dtype=np.int64) * width, np.zeros(rows, np.bool_)
    if isinstance(column, list | tuple) and None not in column:
        try:
            data = np.frombuffer(b"".join(column), np.uint8)
        except TypeError as exc:
            raise InvalidRecordError(f"{name} must be bytes or None: {exc}") from None
        offsets = np.zeros(len(column) + 1, np.int64)
        np.cumsum(np.fromiter(map(len, column), np.int64, len(column)), out=offsets[1:])
        return data, offsets, np.zeros(len(column), np.bool_)
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if not isinstance(column, pa.Array):
        try:
            column = pa.array(column)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise InvalidRecordError(f"{name} must be bytes or None: {exc}") from None
        if not (pa.types.is_binary(column.type) or pa.types.is_null(column.type)):
            raise InvalidRecordError(f"{name} must be bytes or None, not {column.type}")
    rows = len(column)
    kind = column.type
    buffers = column.buffers()
    if pa.types.is_fixed_size_binary(kind):
        width = kind.byte_width
        data = np.frombuffer(buffers[1], np.uint8)[column.offset * width:(column.offset + rows) * width]
        offsets = np.arange(rows + 1, dtype=np.int64) * width
    elif pa.types.is_binary(kind) or pa.types.is_string(kind) or pa.types.is_large_binary(
            kind) or pa.types.is_large_string(kind):
        wide = pa.types.is_large_binary(kind) or pa.types.is_large_string(kind)
        offsets = np.frombuffer(buffers[1], np.int64 if wide else np.int32)[
            column.offset:column.offset + rows + 1].astype(np.int64)
        data = _EMPTY_BYTES if buffers[2] is None else np.frombuffer(buffers[2], np.uint8)
    elif pa.types.is_null(kind):
        return _EMPTY_BYTES, np.zeros(rows + 1, np.int64), np.ones(rows, np.bool_)
    else:
        raise InvalidRecordError(f"{name} must be a binary or string array, not {kind}")
    if column.null_count:
        nulls = column.is_null().to_numpy(zero_copy_only=False)
    else:
        nulls = np.zeros(rows, np.bool_)
    return data, offsets, nulls


def _int64_column(column, n: int, name: str, default: int) -> np.ndarray:
    if column is None:
        return np.full(n, default, np.int64)
    if isinstance(column, int | np.integer):
        return np.full(n, column, np.int64)
    try:
        if isinstance(column, pa.ChunkedArray | pa.Array):
            if column.null_count:
                raise InvalidRecordError(f"{name} must not contain nulls")
            column = column.to_numpy(zero_copy_only=False)
        arr = np.asarray(column)
        if arr.dtype == object and all(isinstance(v, int) for v in arr.flat):
            raise InvalidRecordError(f"{name} out of the int64 range")  # numpy fell back to objects
        if arr.dtype.kind not in "iub" and arr.size:
            raise InvalidRecordError(f"{name} must be integers, not {arr.dtype}")
        if arr.dtype.kind == "u" and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
            raise InvalidRecordError(f"{name} out of the int64 range")
        arr = arr.astype(np.int64, copy=False).reshape(-1)
    except (OverflowError, TypeError, ValueError) as exc:
        raise InvalidRecordError(f"{name} must be int64 values: {exc}") from None
    if arr.size != n:
        raise InvalidRecordError(f"{name} has {arr.size} entries for {n} records")
    return arr


def _header_blocks(headers, n: int):
    """Encoded header block per record, or None when no record has headers."""
    if headers is None:
        return None
    if isinstance(headers, pa.ChunkedArray):
        headers = headers.combine_chunks()
    if not isinstance(headers, pa.Array):
        if not any(headers):
            if len(headers) != n:
                raise InvalidRecordError(f"headers has {len(headers)} entries for {n} records")
            return None
        try:
            if not all(isinstance(k, str) and (v is None or isinstance(v, bytes))
                       for record_headers in headers if record_headers for k, v in record_headers):
                raise InvalidRecordError("header keys must be str and header values bytes or None")
            headers = pa.array(headers, type=HEADERS_TYPE)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise InvalidRecordError(
                f"headers must be (str, bytes | None) pairs per record: {exc}") from None
    if len(headers) != n:
        raise InvalidRecordError(f"headers has {len(headers)} entries for {n} records")
    if not (pa.types.is_list(headers.type) or pa.types.is_large_list(headers.type)) or not (
            pa.types.is_struct(headers.type.value_type)):
        raise InvalidRecordError(f"headers must be a list<struct<key, value>> array, not {headers.type}")
    wide = pa.types.is_large_list(headers.type)
    list_offsets = np.frombuffer(headers.buffers()[1], np.int64 if wide else np.int32)[
        headers.offset:headers.offset + n + 1].astype(np.int64)
    if n == 0 or list_offsets[-1] == list_offsets[0]:
        return None
    pairs = headers.values
    if pairs.null_count:
        raise InvalidRecordError("a header must be a (key, value) pair, not null")
    fields = pairs.flatten()
    if len(fields) != 2:
        raise InvalidRecordError("a header struct has exactly two fields: key and value")
    key_data, key_offsets, key_null = _binary_column(fields[0], None, "header key")
    if key_null.any():
        raise InvalidRecordError("header keys must not be null")
    value_data, value_offsets, value_null = _binary_column(fields[1], None, "header value")
    return _kernels.encode_headers(list_offsets, key_data, key_offsets, value_data, value_offsets,
                                   value_null)


def build_batch_columnar(keys, values, *, timestamps=None, headers=None, offsets=None,
                         base_offset: int = 0, compression: str = "none",
                         compression_level: int | None = None,
                         timestamp_type: str = "CreateTime", producer_id: int = NO_PRODUCER_ID,
                         producer_epoch: int = NO_PRODUCER_EPOCH, base_sequence: int = NO_SEQUENCE,
                         is_transactional: bool = False, is_control: bool = False,
                         partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                         max_timestamp: int | None = None, delete_horizon_ms: int | None = None,
                         last_offset_delta: int | None = None) -> bytes:
    """Build one magic 2 batch from columns: keys/values as Arrow arrays, numpy or sequences
    (None = all null), timestamps (ms; default -1) and offsets (default base_offset + i).

    headers: per-record sequences of (str, bytes | None) or an Arrow list<struct<key, value>>.
    compression_level: the codec's level as compression.<codec>.level sets it (None: default).
    Raises InvalidRecordError for bad arguments.
    """
    n = next((len(c) for c in (keys, values, offsets, timestamps)
              if c is not None and not isinstance(c, int | np.integer)), 0)
    key_data, key_offsets, key_null = _binary_column(keys, n, "keys")
    value_data, value_offsets, value_null = _binary_column(values, n, "values")
    if key_null.size != n or value_null.size != n:
        raise InvalidRecordError(f"keys ({key_null.size}) and values ({value_null.size}) differ in length")
    ts = _int64_column(timestamps, n, "timestamps", NO_TIMESTAMP)
    if offsets is None:
        offset_delta = np.arange(n, dtype=np.int64)
    else:
        offset_delta = _int64_column(offsets, n, "offsets", 0) - np.int64(base_offset)
        if n and (offset_delta[0] < 0 or offset_delta[-1] > _INT32_MAX
                  or (n > 1 and not (np.diff(offset_delta) > 0).all())):
            raise InvalidRecordError(
                "record offsets must increase strictly from base_offset, within 2^31 of it")
    blocks = _header_blocks(headers, n)
    code = compression_code(compression)
    if timestamp_type not in _TIMESTAMP_TYPE_CODES:
        raise InvalidRecordError(f"timestamp_type must be 'CreateTime' or 'LogAppendTime', not {timestamp_type!r}")
    if delete_horizon_ms is not None:
        base_timestamp = delete_horizon_ms
    else:
        base_timestamp = int(ts[0]) if n else NO_TIMESTAMP
    if max_timestamp is None:
        max_timestamp = int(ts.max()) if n else NO_TIMESTAMP
    if last_offset_delta is None:
        last_offset_delta = int(offset_delta[-1]) if n else 0
    if is_transactional and producer_id < 0:
        raise InvalidRecordError("a transactional batch needs a producer id")
    attributes = (code | _TIMESTAMP_TYPE_CODES[timestamp_type] * TIMESTAMP_TYPE_BIT
                  | is_transactional * TRANSACTIONAL_BIT | is_control * CONTROL_BIT
                  | (delete_horizon_ms is not None) * DELETE_HORIZON_BIT)
    # int64 wrap-around for extreme timestamps matches Kafka's long arithmetic.
    timestamp_delta = ts - np.int64(base_timestamp)
    blob, blob_offsets = blocks if blocks is not None else (_EMPTY_BYTES, np.zeros(1, np.int64))
    room = V2_HEADER_SIZE if code == NONE else 0
    body = _kernels.encode_records(room, offset_delta, timestamp_delta, key_data, key_offsets, key_null,
                                   value_data, value_offsets, value_null, blob, blob_offsets,
                                   blocks is not None)
    if code == NONE:
        out = body
    else:
        compressed = compress(code, body, level=compression_level)
        out = np.empty(V2_HEADER_SIZE + len(compressed), np.uint8)
        out[V2_HEADER_SIZE:] = np.frombuffer(compressed, np.uint8)
    batch_length = out.size - LOG_OVERHEAD
    if batch_length > _INT32_MAX:
        raise InvalidRecordError(f"batch of {out.size} bytes exceeds the 2 GiB format limit")
    try:
        V2_HEADER.pack_into(out, 0, base_offset, batch_length, partition_leader_epoch, 2, 0, attributes,
                            last_offset_delta, base_timestamp, max_timestamp, producer_id,
                            producer_epoch, base_sequence, n)
    except (struct.error, TypeError) as exc:
        raise InvalidRecordError(f"batch header field out of range: {exc}") from None
    _UINT32.pack_into(out, CRC_OFFSET, crc32c(out[ATTRIBUTES_OFFSET:]))
    return out.tobytes()


def build_batch(records: Iterable[Record], *, base_offset: int = 0, compression: str = "none",
                timestamp_type: str = "CreateTime", producer_id: int = NO_PRODUCER_ID,
                producer_epoch: int = NO_PRODUCER_EPOCH, base_sequence: int = NO_SEQUENCE,
                is_transactional: bool = False,
                partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH, **options) -> bytes:
    """Build one magic 2 batch from Record objects (offsets must increase from base_offset).

    ``options`` are passed on to build_batch_columnar (is_control, max_timestamp,
    delete_horizon_ms, last_offset_delta, compression_level). Raises InvalidRecordError for bad
    arguments.
    """
    records = records if isinstance(records, list | tuple) else list(records)
    try:
        offsets = [r.offset for r in records]
        timestamps = [r.timestamp for r in records]
        keys = [r.key for r in records]
        values = [r.value for r in records]
        headers = [r.headers for r in records]
    except AttributeError:
        raise InvalidRecordError("build_batch takes Record objects") from None
    return build_batch_columnar(
        keys, values, timestamps=timestamps, headers=headers, offsets=offsets,
        base_offset=base_offset, compression=compression, timestamp_type=timestamp_type,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
        is_transactional=is_transactional, partition_leader_epoch=partition_leader_epoch, **options)

"""AppendInput: turns what `Log.append` accepts (batch bytes, Records, (key, value) tuples, an
Arrow table) into one writable byte array of v2 batches, the form the validator stamps in place."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from logstore import _kernels
from logstore.config import LogConfig
from logstore.errors import InvalidRecordError
from logstore.leader_append import VALIDATED_FIELDS
from logstore.records import Record, build_batch_columnar

# Appends of immutable bytes up to this size are copied into one reused buffer per log.
SCRATCH_BUFFER_LIMIT = 16 * 1024 * 1024
# Batches per append the reused batch table holds (more get a table of their own).
SCRATCH_TABLE_ROWS = 64


class AppendInput:
    """Builds or copies an append's batches into a writable byte array; keeps one scratch
    buffer, and for the validator a scratch batch table (`table`) and result (`validated`)."""

    def __init__(self) -> None:
        self._scratch = memoryview(bytearray())
        self._scratch_array = np.frombuffer(self._scratch, np.uint8)
        self.table = np.empty((SCRATCH_TABLE_ROWS, _kernels.COLUMNS), np.int64)
        self.validated = np.empty(VALIDATED_FIELDS, np.int64)

    def to_buffer(self, records: Any, now_ms: int, config: LogConfig) -> tuple[np.ndarray, int]:
        """The append's v2 batches in writable memory, as (array, size): a uint8 array whose
        first `size` bytes are the batches (the reused scratch buffer is returned whole: no
        slice per append). A bytearray or writable memoryview is used as given, bytes and
        read-only views are copied, records are built with the topic's compression.type and
        level and `now_ms` for missing timestamps."""
        if type(records) is bytes and len(records) <= self._scratch.nbytes:
            size = len(records)  # the common case of _copy, inline
            self._scratch[:size] = records
            return self._scratch_array, size
        if isinstance(records, bytearray) or (type(records) is memoryview and not records.readonly):
            return _whole(records)  # stamped in place, as Kafka stamps the request's buffer
        if isinstance(records, (bytes, memoryview)):
            return self._copy(records)
        codec = config.compression_codec
        compression = {"compression": "none"} if codec is None else {
            "compression": codec.name, "compression_level": config.compression_level(codec.name)}
        if isinstance(records, pa.Table | pa.RecordBatch):
            return _whole(_build_from_arrow(records, now_ms, compression))
        return _whole(_build_from_items(list(records), now_ms, compression))

    def _copy(self, records: bytes | memoryview) -> tuple[np.ndarray, int]:
        # The leader rewrites offsets in place, so immutable input is copied, into a reused
        # buffer: its pages are already mapped, which saves a page fault per 4 KiB appended.
        source = records if type(records) is bytes else memoryview(records).cast("B")
        size = len(source)
        if size > SCRATCH_BUFFER_LIMIT:
            return _whole(bytearray(source))
        if self._scratch.nbytes < size:
            self._scratch = memoryview(bytearray(size))
            self._scratch_array = np.frombuffer(self._scratch, np.uint8)
        self._scratch[:size] = source
        return self._scratch_array, size


def _whole(buffer: bytearray | memoryview) -> tuple[np.ndarray, int]:
    array = np.frombuffer(buffer, np.uint8)
    return array, array.size


def _build_from_arrow(table: pa.Table | pa.RecordBatch, now_ms: int, compression: dict) -> bytearray:
    names = table.column_names
    timestamps = table.column("timestamp") if "timestamp" in names else np.full(table.num_rows, now_ms, np.int64)
    return bytearray(build_batch_columnar(
        table.column("key") if "key" in names else None,
        table.column("value") if "value" in names else None,
        timestamps=timestamps,
        headers=table.column("headers") if "headers" in names else None,
        **compression))


def _build_from_items(items: list[Any], now_ms: int, compression: dict) -> bytearray:
    if not items:
        raise InvalidRecordError("cannot append an empty list of records")
    keys, values, timestamps, headers = [], [], [], []
    for item in items:
        if isinstance(item, Record):
            keys.append(item.key)
            values.append(item.value)
            timestamps.append(now_ms if item.timestamp is None or item.timestamp < 0 else item.timestamp)
            headers.append(item.headers)
        elif isinstance(item, tuple) and len(item) == 2:
            keys.append(item[0])
            values.append(item[1])
            timestamps.append(now_ms)
            headers.append(())
        else:
            raise InvalidRecordError(f"expected Record or (key, value) tuples, got {type(item).__name__}")
    return bytearray(build_batch_columnar(keys, values, timestamps=timestamps, headers=headers,
                                          **compression))

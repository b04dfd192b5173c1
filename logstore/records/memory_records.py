"""Entries of any magic in a buffer (Kafka's MemoryRecords): the one place that picks the
batch class by magic, so the record modules import each other one way."""

from __future__ import annotations

import struct
from collections.abc import Iterable

import pyarrow as pa

from logstore.errors import CorruptRecordError, InvalidRecordError
from logstore.records.arrow import RECORD_SCHEMA, columns_to_record_batch
from logstore.records.batch import RecordBatch, byte_view
from logstore.records.compression import DEFAULT_MAX_INFLATED_BYTES
from logstore.records.header import LEGACY_MIN_MESSAGE, LOG_OVERHEAD, SIZE_OFFSET, read_batch_header
from logstore.records.legacy import LegacyRecordBatch

_INT32 = struct.Struct(">i")


def read_batch(buffer, position: int = 0) -> RecordBatch:
    """The entry at ``buffer[position:]``: a RecordBatch for magic 2, a LegacyRecordBatch (same
    interface) for magic 0/1. Raises CorruptRecordError when its header cannot be parsed."""
    view = byte_view(buffer)
    if read_batch_header(view, position).magic < 2:
        return LegacyRecordBatch(view, position)
    return RecordBatch(view, position)


class BatchIterator:
    """Iterates the complete batches of a buffer; afterwards ``valid_end`` is where the last
    complete batch ends and ``torn`` says whether a partial batch follows it.

    A header that cannot be valid (unknown magic, length below the minimum) raises
    CorruptRecordError at its position; CRCs are not checked (use RecordBatch.validate()).
    A start position outside the buffer raises InvalidRecordError.
    """

    def __init__(self, buffer, position: int = 0):
        self._view = byte_view(buffer)
        self._end = len(self._view)
        if not 0 <= position <= self._end:  # a negative one would read from the end
            raise InvalidRecordError(f"position {position} is outside the {self._end}-byte buffer")
        self.buffer = buffer
        self.valid_end = position
        self.torn = False

    def __iter__(self) -> BatchIterator:
        return self

    def __next__(self) -> RecordBatch:
        pos = self.valid_end
        remaining = self._end - pos
        if remaining <= 0:
            raise StopIteration
        if remaining < LOG_OVERHEAD:
            self.torn = True
            raise StopIteration
        size = _INT32.unpack_from(self._view, pos + SIZE_OFFSET)[0] + LOG_OVERHEAD
        if size - LOG_OVERHEAD < min(LEGACY_MIN_MESSAGE.values()):
            raise CorruptRecordError(f"entry length {size - LOG_OVERHEAD} below the minimum", position=pos)
        if size > remaining:
            self.torn = True
            raise StopIteration
        batch = read_batch(self._view, pos)
        self.valid_end = pos + size
        return batch


def iter_batches(buffer, position: int = 0) -> BatchIterator:
    """Iterate the batches (any magic) of ``buffer`` from ``position``, stopping before a partial
    trailing batch; see BatchIterator for ``valid_end`` and ``torn``."""
    return BatchIterator(buffer, position)


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

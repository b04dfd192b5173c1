"""What a log's appends and reads return: AppendInfo and FetchResult (Kafka's LogAppendInfo
and FetchDataInfo). Below `log_like` and `log`, so the layers written against LogLike
need not import Log."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import NamedTuple

from logstore.file_slice import FileSlice
from logstore.records import RecordBatch, iter_batches


class AppendInfo(NamedTuple):
    """What an append wrote: offsets, timestamps, record count and bytes."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time: int  # -1 unless message.timestamp.type=LogAppendTime
    record_count: int
    valid_bytes: int
    offset_of_max_timestamp: int  # last offset of the (first) batch holding max_timestamp


#: AppendInfo from a tuple, as AppendInfo._make without its length check (a third cheaper).
append_info = functools.partial(tuple.__new__, AppendInfo)


class SegmentReadResult(NamedTuple):
    """Bytes read from a segment: whole batches from `position` (the batch holding `offset`)."""

    data: bytes | memoryview
    offset: int
    position: int
    first_batch_incomplete: bool
    next_offset: int  # the offset after the last batch in `data` (`offset` when it is empty)


class FetchResult(NamedTuple):
    """Raw batch bytes read from the log and the log's offsets at read time."""

    records: bytes | memoryview | FileSlice  # whole batches; a memoryview when a partial tail was cut
    # off, a FileSlice of the segment file when read with zero_copy (see Log.read)
    first_offset: int  # base offset of the first batch returned (the fetch offset when empty)
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    next_offset: int  # the offset after the last batch in `records` (the fetch offset when empty):
    # where a sequential reader fetches next, found by the read's own walk over the batch headers
    aborted_transactions: tuple = ()  # AbortedTxn entries overlapping a read_committed fetch

    def batches(self) -> Iterator[RecordBatch]:
        """The complete batches in `records`."""
        return iter(iter_batches(self.records))

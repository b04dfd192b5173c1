"""Decoded records of a log, fetch by fetch (what `Log.records` yields): whole batches are
read as a consumer fetches them, then decoded one record at a time from the asked offset."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from logstore.log_results import FetchResult
from logstore.producer_append import committed_batches
from logstore.records import Record, RecordBatch


def iter_log_records(fetch: Callable[[int], FetchResult], start: int, bound: Callable[[], int],
                     read_committed: bool) -> Iterator[Record]:
    """Records from offset `start` while below `bound()` (asked again after every fetch, as the
    log moves), read with `fetch(offset)`; `read_committed` drops aborted records and markers."""
    position = start
    while position < bound():
        fetched = fetch(position)
        if not fetched.records:
            return
        fetched_batches = list(fetched.batches())
        batches: Iterable[RecordBatch] = fetched_batches
        if read_committed:
            batches = committed_batches(fetched_batches, fetched.aborted_transactions)
        for batch in batches:
            if batch.last_offset < position:
                continue
            for record in batch.records():
                if record.offset >= position:
                    yield record
        position = max(position, fetched_batches[-1].next_offset)

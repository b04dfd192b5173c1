"""Kafka's log recovery run in memory over a read-only log: the same batch validation as
`LogSegment.recover` from the segment holding the recovery point on, but a torn or corrupt
tail is hidden rather than truncated and the later segments are left out rather than deleted,
so a read-only open shows exactly the records Kafka keeps and writes no byte."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from logstore.errors import CorruptRecordError
from logstore.segment import LogSegment


def valid_extent(segment: LogSegment) -> tuple[int, int]:
    """(bytes, next offset) of the segment's longest valid prefix: every batch whole, with a
    good CRC and sound header, and an offset its indexes can hold (LogSegment.recover's rules)."""
    valid_bytes, next_offset = 0, segment.base_offset
    try:
        for batch in segment.iter_batches():
            batch.validate()
            if not segment.can_convert_to_relative_offset(batch.last_offset):
                break
            valid_bytes += batch.size_in_bytes
            next_offset = batch.next_offset
    except CorruptRecordError:
        pass  # the invalid batch and everything after it are what recovery drops
    return valid_bytes, next_offset


def recover_read_only(segments: Sequence[LogSegment], recovery_point: int) -> tuple[list[LogSegment], int]:
    """(the segments Kafka's recovery keeps, the bytes it drops) for read-only `segments` in
    offset order. The first segment from the recovery point's on with an invalid tail hides
    it; the segments after it are closed and left out (Kafka deletes them)."""
    kept = list(segments)
    bases = [s.base_offset for s in kept]
    dropped = 0
    for i in range(max(bisect.bisect_right(bases, recovery_point) - 1, 0), len(kept)):
        segment = kept[i]
        valid_bytes, next_offset = valid_extent(segment)
        if valid_bytes < segment.size:
            dropped += segment.size - valid_bytes
            segment.hide_from(valid_bytes, next_offset)
            for later in kept[i + 1:]:
                dropped += later.size
                later.close_handlers()
            return kept[: i + 1], dropped
    return kept, dropped

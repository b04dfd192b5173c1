"""LocalLog: the segment files of one partition directory (Kafka's LocalLog): the ordered
segment list and the work on it — reads across segments, roll, flush, truncation, deletion
with its delay, the crash-safe swap of cleaned segments, lookups by offset and timestamp.

The offsets (log start, log end, recovery point, high watermark), producer state, epochs and
validation are Log's (Kafka's UnifiedLog); Log holds the lock and calls in. Not thread-safe.
"""

from __future__ import annotations

import bisect
import struct
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np

from logstore.checkpoint import fsync_dir
from logstore.clock import Clock
from logstore.config import LogConfig
from logstore.errors import InvalidRecordError, LogClosedError, OffsetOutOfRangeError
from logstore.file_records import TimestampAndOffset
from logstore.file_slice import FileSlice
from logstore.log_files import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX
from logstore.segment import LogSegment
from logstore.segment_options import SegmentOptions, roll_jitter_ms

_INT64 = struct.Struct(">q")


class LocalLog:
    """The live segments of a partition directory, ordered by base offset (the last one is
    active), and the `.deleted` files waiting for `file.delete.delay.ms`."""

    def __init__(self, directory: Path, config: LogConfig, clock: Clock, name: str,
                 guard: threading.RLock | None = None) -> None:
        self.dir = directory
        #: The owning Log's lock, which the descriptor pool takes to close a live segment's files.
        self.guard = guard
        self.config = config  # Log replaces it when the log's config changes
        self.clock = clock
        self.name = name
        #: Copy-on-write: replaced, never changed in place, so readers keep the list they started with.
        self.segments: list[LogSegment] = []
        self.base_offsets: list[int] = []
        self._pending_deletes: list[tuple[int, LogSegment | Path]] = []

    def set_segments(self, segments: Iterable[LogSegment]) -> None:
        """Make `segments` the live ones."""
        self.segments = sorted(segments, key=lambda s: s.base_offset)
        self.base_offsets = [s.base_offset for s in self.segments]
        for segment in self.segments:
            segment.guard = self.guard

    def new_segment(self, base_offset: int) -> LogSegment:
        """Create an empty segment at `base_offset` with this log's options and a fresh jitter."""
        return LogSegment.create(self.dir, base_offset, SegmentOptions.of(
            self.config, self.clock, roll_jitter_ms=roll_jitter_ms(self.config)))

    def segment_index(self, offset: int) -> int:
        """Index in `segments` of the segment that may hold `offset` (the first when below it)."""
        return max(bisect.bisect_right(self.base_offsets, offset) - 1, 0)

    @property
    def size(self) -> int:
        """Total bytes of the live segments."""
        return sum(s.size for s in self.segments)

    # ------------------------------------------------------------------ roll and flush

    def roll(self, new_offset: int) -> LogSegment | None:
        """Close the active segment to appends and start one at `new_offset`; None when the
        active segment is empty and already there. Raises InvalidRecordError below it."""
        active = self.segments[-1]
        if active.base_offset == new_offset and active.size == 0:
            return None
        if new_offset < active.base_offset:
            raise InvalidRecordError(
                f"cannot roll {self.dir} to offset {new_offset} below the active segment {active.base_offset}")
        active.on_become_inactive_segment()
        segment = self.new_segment(new_offset)
        self.set_segments([*self.segments, segment])
        return segment

    def flush(self, from_offset: int, to_offset: int) -> None:
        """fsync the segments holding offsets [`from_offset`, `to_offset`), then the directory."""
        for segment in self.segments[self.segment_index(from_offset):]:
            if segment.base_offset >= to_offset:
                break
            segment.flush()
        fsync_dir(self.dir)

    # ------------------------------------------------------------------ read and search

    def read(self, offset: int, max_bytes: int, limit: int, log_end: int, min_one_batch: bool, *,
             zero_copy: bool = False) -> tuple[bytes | memoryview | FileSlice, int, int] | None:
        """Whole batches from the one holding `offset`, at most `max_bytes` (at least one batch
        with `min_one_batch`), only batches ending below `limit`; (bytes, base offset of the
        first batch, offset after the last), or None when there is none. With `zero_copy` a
        FileSlice of the segment file (for the caller to close) instead of bytes. Raises
        OffsetOutOfRangeError if the segment is deleted during the read."""
        segments = self.segments
        for i in range(self.segment_index(offset), len(segments)):
            segment = segments[i]
            try:
                found = (segment.slice if zero_copy else segment.read)(
                    offset, max_bytes, None, min_one_batch, max_offset=limit if limit < log_end else None)
            except LogClosedError:
                raise OffsetOutOfRangeError(
                    f"offset {offset} of {self.name} was deleted during the read") from None
            if found is not None:
                return _first_slice(segment, *found) if zero_copy else _first_bytes(found.data, found.next_offset)
        return None

    def offset_for_timestamp(self, timestamp: int, log_start_offset: int) -> TimestampAndOffset | None:
        """The first record at or above `log_start_offset` with timestamp >= `timestamp`."""
        for segment in self.segments:
            if segment.largest_timestamp >= timestamp:
                return segment.find_offset_by_timestamp(timestamp, log_start_offset)
        return None

    def max_timestamp_offset(self) -> TimestampAndOffset | None:
        """ListOffsets MAX_TIMESTAMP: the first record holding the log's largest timestamp."""
        best = max(self.segments, key=lambda s: s.max_timestamp_so_far)  # first of the maxima
        target = best.max_timestamp_so_far
        if target < 0:
            return None
        position = best.offset_index.lookup(best.offset_of_max_timestamp).position
        for batch in best.iter_batches(position):
            if batch.max_timestamp == target:
                cols = batch.columns()
                hits = np.flatnonzero(cols.timestamp == target)
                if hits.size:
                    epoch = batch.partition_leader_epoch
                    return TimestampAndOffset(target, int(cols.offset[hits[0]]), epoch if epoch >= 0 else None)
        return None

    # ------------------------------------------------------------------ truncation

    def truncate_to(self, offset: int, schedule_deletes: Callable[[list[LogSegment]], None]) -> int:
        """Hand the segments above `offset` to `schedule_deletes` (renamed first, so a crash
        cannot leave them after a shortened segment), then drop the batches from the one
        holding `offset` in the segment below; returns the new log end offset."""
        doomed = [s for s in self.segments if s.base_offset > offset]
        if doomed:
            self.set_segments(s for s in self.segments if s.base_offset <= offset)
            schedule_deletes(doomed)
        active = self.segments[-1]
        active.truncate_to(offset)
        active.resize_indexes(self.config.segment_index_bytes)
        return active.read_next_offset()

    def truncate_fully(self, offset: int) -> list[LogSegment]:
        """Rename every segment `.deleted` and start one empty segment at `offset`; returns the
        renamed segments, still to delete."""
        doomed = list(self.segments)
        for segment in doomed:
            segment.change_file_suffixes("", DELETED_SUFFIX)
        self.set_segments([self.new_segment(offset)])
        return doomed

    # ------------------------------------------------------------------ deletion and swap

    def remove_segments(self, segments: Iterable[LogSegment]) -> list[LogSegment]:
        """Take the live segments with the base offsets of `segments` out of the list (not the
        active one: roll first) and return them, still to delete."""
        targets = {s.base_offset for s in segments}
        doomed = [s for s in self.segments if s.base_offset in targets]
        if doomed:
            self.set_segments(s for s in self.segments if s not in doomed)
        return doomed

    def schedule_deletes(self, segments: list[LogSegment], other_files: Iterable[Path], *,
                         renamed: bool = False) -> bool:
        """Rename `segments` `.deleted` (unless `renamed`) and queue them and `other_files` for
        deletion `file.delete.delay.ms` from now; True when that delay is 0 (delete now)."""
        if not renamed:
            for segment in segments:
                segment.change_file_suffixes("", DELETED_SUFFIX)
        due = self.clock.time_ms() + self.config.file_delete_delay_ms
        self._pending_deletes.extend((due, s) for s in segments)
        self._pending_deletes.extend((due, path) for path in other_files)
        return self.config.file_delete_delay_ms == 0

    def take_expired(self, now_ms: int) -> list[LogSegment | Path]:
        """Remove from the queue and return the files due for deletion at `now_ms`."""
        due = [s for t, s in self._pending_deletes if t <= now_ms]
        self._pending_deletes = [(t, s) for t, s in self._pending_deletes if t > now_ms]
        return due

    @property
    def pending_deletes(self) -> list[LogSegment]:
        """Segments renamed `.deleted` and waiting for `file.delete.delay.ms`."""
        return [s for _, s in self._pending_deletes if isinstance(s, LogSegment)]

    def swap_in(self, new_segments: Sequence[LogSegment], old_segments: Sequence[LogSegment],
                schedule_deletes: Callable[[list[LogSegment]], None]) -> None:
        """Swap cleaned segments (files ending `.cleaned`) in for the live ones of
        `old_segments`, crash-safely: new files `.cleaned` -> `.swap`, `schedule_deletes` the
        old ones (renamed `.deleted`), then drop `.swap`. A crash at any step reopens to either
        the old or the new segments (LogLoader finishes or rolls back the swap)."""
        new_sorted = sorted(new_segments, key=lambda s: s.base_offset)
        live = set(self.base_offsets)
        old_sorted = sorted((s for s in old_segments if s.base_offset in live), key=lambda s: s.base_offset)
        for segment in reversed(new_sorted):
            segment.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
        fsync_dir(self.dir)
        new_bases = {s.base_offset for s in new_sorted}
        old_ids = {id(s) for s in old_sorted}
        remaining = [s for s in self.segments if id(s) not in old_ids and s.base_offset not in new_bases]
        self.set_segments(remaining + new_sorted)
        schedule_deletes(old_sorted)
        for segment in new_sorted:
            segment.change_file_suffixes(SWAP_SUFFIX, "")
        fsync_dir(self.dir)

    def close(self) -> None:
        """Close every live segment, and let go of the descriptors of those awaiting deletion
        (their files stay `.deleted`: `delete_expired_files` or the next open removes them)."""
        for segment in self.segments:
            segment.close()
        for segment in self.pending_deletes:
            segment.close_handlers()

    def close_handlers(self) -> None:
        """Let go of every segment's descriptors and mappings, writing nothing (as a killed
        process's are closed by the kernel)."""
        for segment in (*self.segments, *self.pending_deletes):
            segment.close_handlers()


def _first_slice(segment: LogSegment, found: FileSlice, next_offset: int) -> tuple[FileSlice, int, int] | None:
    """(`found`, base offset of its first batch, `next_offset`), or None (`found` closed)
    when it is empty."""
    if not found.size:
        found.close()
        return None
    try:
        return found, segment.base_offset_at(found.position), next_offset
    except BaseException:
        found.close()  # its pin, not left to the garbage collector
        raise


def _first_bytes(data: bytes | memoryview, next_offset: int) -> tuple[bytes | memoryview, int, int] | None:
    """(`data`, whole batches, with the base offset of the first and `next_offset`), or None
    when it is empty."""
    return (data, _INT64.unpack_from(data, 0)[0], next_offset) if data else None

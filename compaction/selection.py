"""Choosing what to clean: cleanable range, dirty ratio, why a log is due, dirtiest first.

Pure functions over segment metadata, following Kafka's LogCleanerManager and LogToClean:
- the first dirty offset is the cleaner checkpoint (reset to the log start offset when it falls
  outside [log start, log end]);
- cleaning stops before the first uncleanable offset: the smallest of the last stable offset
  (which is bounded by the high watermark), the active segment's base offset, and the base of
  the first dirty segment whose largest timestamp is within min.compaction.lag.ms of now;
  rounded down to the base offset of the segment holding it;
- dirty ratio = cleanable bytes / (clean bytes + cleanable bytes), by whole segments;
- a log is due when max.compaction.lag.ms has passed for its earliest dirty segment (and there
  are cleanable bytes) or its dirty ratio exceeds min.cleanable.dirty.ratio.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from index.base import MAX_RELATIVE_OFFSET

DUE_MAX_LAG = "max.compaction.lag.ms"
DUE_DIRTY_RATIO = "min.cleanable.dirty.ratio"


@dataclass(frozen=True, slots=True)
class CleanerSegmentInfo:
    """What the cleaner's selection needs to know about one segment (a log's last is its active one)."""

    base_offset: int
    size: int
    largest_timestamp: int
    first_batch_timestamp: int = -1  # max timestamp of its first batch; <= 0 when unknown/empty


@dataclass(frozen=True, slots=True)
class CleanableRange:
    """Kafka's LogToClean: the dirty range of one log and whether and why it is due."""

    first_dirty_offset: int
    first_uncleanable_offset: int  # segment-aligned upper bound (exclusive)
    clean_bytes: int
    cleanable_bytes: int
    dirty_ratio: float
    compaction_delay_ms: int  # how long past max.compaction.lag.ms the earliest dirty segment is
    force_update_checkpoint: bool  # the checkpoint was outside the log and was reset
    due_reason: str | None  # DUE_MAX_LAG, DUE_DIRTY_RATIO or None (not due)

    @property
    def total_bytes(self) -> int:
        """Clean plus cleanable bytes."""
        return self.clean_bytes + self.cleanable_bytes

    @property
    def due(self) -> bool:
        """True when the cleaner would pick this log now."""
        return self.due_reason is not None


def _floor_index(segments: Sequence[CleanerSegmentInfo], offset: int) -> int:
    """Index of the segment holding `offset` (the last with base <= offset; 0 if before all)."""
    idx = 0
    for i, seg in enumerate(segments):
        if seg.base_offset <= offset:
            idx = i
        else:
            break
    return idx


def cleanable_offsets(segments: Sequence[CleanerSegmentInfo], *, log_start_offset: int,
                      log_end_offset: int, last_stable_offset: int, checkpoint: int | None,
                      now_ms: int, min_compaction_lag_ms: int) -> tuple[int, int, bool]:
    """(first dirty offset, first uncleanable offset (not yet segment-aligned), checkpoint reset?)."""
    dirty = log_start_offset if checkpoint is None else checkpoint
    force = False
    if dirty < log_start_offset or dirty > log_end_offset:
        dirty, force = log_start_offset, True
    candidates = [last_stable_offset, segments[-1].base_offset]
    lag = max(min_compaction_lag_ms, 0)
    if lag > 0:
        for seg in segments[_floor_index(segments, dirty):-1]:
            if seg.largest_timestamp > now_ms - lag:
                candidates.append(seg.base_offset)
                break
    return dirty, max(dirty, min(candidates)), force


def max_compaction_delay(segments: Sequence[CleanerSegmentInfo], first_dirty_offset: int,
                         now_ms: int, max_compaction_lag_ms: int) -> int:
    """How far past max.compaction.lag.ms the earliest dirty non-active segment is (0: not yet)."""
    stamps = [s.first_batch_timestamp for s in segments[_floor_index(segments, first_dirty_offset):-1]
              if s.first_batch_timestamp > 0]
    if not stamps:
        return 0
    clean_until = now_ms - max(max_compaction_lag_ms, 0)
    earliest = min(stamps)
    return clean_until - earliest if earliest < clean_until else 0


def cleanable_bytes(segments: Sequence[CleanerSegmentInfo], first_dirty_offset: int,
                    uncleanable_offset: int) -> tuple[int, int]:
    """(segment-aligned first uncleanable offset, bytes of the segments in the dirty range)."""
    upper = segments[_floor_index(segments, uncleanable_offset)].base_offset
    upper = min(upper, segments[-1].base_offset)
    lo = min(first_dirty_offset, upper)
    total = sum(s.size for s in _overlapping(segments, lo, upper))
    return upper, total


def _overlapping(segments: Sequence[CleanerSegmentInfo], start: int,
                 end: int) -> list[CleanerSegmentInfo]:
    """Kafka's logSegments(from, to): segments holding any offset in [start, end)."""
    if start >= end:
        return []
    first = _floor_index(segments, start)
    return [s for s in segments[first:] if s.base_offset < end]


def evaluate(segments: Sequence[CleanerSegmentInfo], *, log_start_offset: int,
             log_end_offset: int, last_stable_offset: int, checkpoint: int | None, now_ms: int,
             min_compaction_lag_ms: int, max_compaction_lag_ms: int,
             min_cleanable_dirty_ratio: float) -> CleanableRange:
    """The cleanable range, dirty ratio and due reason of one compacted log."""
    dirty, uncleanable, force = cleanable_offsets(
        segments, log_start_offset=log_start_offset, log_end_offset=log_end_offset,
        last_stable_offset=last_stable_offset, checkpoint=checkpoint, now_ms=now_ms,
        min_compaction_lag_ms=min_compaction_lag_ms)
    delay = max_compaction_delay(segments, dirty, now_ms, max_compaction_lag_ms)
    upper, dirty_bytes = cleanable_bytes(segments, dirty, uncleanable)
    clean = sum(s.size for s in segments if s.base_offset < dirty)  # logSegments(-1, dirty)
    total = clean + dirty_bytes
    ratio = dirty_bytes / total if total > 0 else 0.0
    reason = None
    if total > 0:
        if delay > 0 and dirty_bytes > 0:
            reason = DUE_MAX_LAG
        elif ratio > min_cleanable_dirty_ratio:
            reason = DUE_DIRTY_RATIO
    return CleanableRange(first_dirty_offset=dirty, first_uncleanable_offset=upper, clean_bytes=clean,
                          cleanable_bytes=dirty_bytes, dirty_ratio=ratio, compaction_delay_ms=delay,
                          force_update_checkpoint=force, due_reason=reason)


def dirtiest(candidates: Sequence[tuple[object, CleanableRange]]) -> tuple[object, CleanableRange] | None:
    """Among (log, range) pairs, the due one with the highest dirty ratio (first on ties)."""
    best = None
    for item in candidates:
        rng = item[1]
        if not rng.due:
            continue
        if best is None or rng.dirty_ratio > best[1].dirty_ratio:
            best = item
    return best


def group_segments_by_size(sizes: Sequence[tuple[int, int, int, int]], max_size: int,
                           max_index_size: int, first_uncleanable_offset: int) -> list[list[int]]:
    """Kafka's groupSegmentsBySize over (base_offset, log size, index size, time index size).

    Returns groups of positions into `sizes`: adjacent segments whose log bytes stay within
    segment.bytes, whose index bytes stay within segment.index.bytes, and whose offsets fit
    relative 32-bit offsets from the group's base.
    """
    groups: list[list[int]] = []
    i, n = 0, len(sizes)
    while i < n:
        group = [i]
        log_size, idx_size, tidx_size = sizes[i][1], sizes[i][2], sizes[i][3]
        i += 1
        while i < n:
            base, size, isz, tsz = sizes[i]
            last_offset = sizes[i + 1][0] - 1 if i + 1 < n else first_uncleanable_offset - 1
            if not (log_size + size <= max_size and idx_size + isz <= max_index_size
                    and tidx_size + tsz <= max_index_size
                    and (size == 0 or last_offset - sizes[group[0]][0] <= MAX_RELATIVE_OFFSET)):
                break
            group.append(i)
            log_size += size
            idx_size += isz
            tidx_size += tsz
            i += 1
        groups.append(group)
    return groups

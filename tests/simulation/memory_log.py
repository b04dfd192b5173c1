"""MemoryLog: a logstore.log_like.LogLike (the slice of Log's contract that replication uses)
kept in memory, so the simulation can run tens of thousands of schedules. Same rules as Log
for offsets, the high watermark, truncation, the log start offset and the epoch cache.
`log_start_checkpoint` is what `log-start-offset-checkpoint` would hold; `reopen()` applies
LogLoader's rules to it, and a crash keeps only what was flushed (everything below the
recovery point), like reopening a directory after losing the page cache. `close()` leaves a
clean-shutdown marker with a broker epoch, as Log does; `kill()` and `crash()` leave none,
and `reopen()` reads it into `had_clean_shutdown`. The disk runs of the simulation use the
real Log."""

from __future__ import annotations

import bisect
from typing import Any

from logstore.clean_shutdown import NO_BROKER_EPOCH
from logstore.clock import Clock
from logstore.config import LogConfig
from logstore.epoch import LeaderEpochFileCache
from logstore.errors import InvalidRecordError, OffsetOutOfRangeError
from logstore.log_results import AppendInfo, FetchResult
from logstore.records import (
    build_batch_columnar,
    iter_batches,
    read_batch_header,
    set_base_offset_and_epoch,
)


class MemoryLog:
    """Batches as bytes in a list; offsets dense; one epoch cache."""

    def __init__(self, topic: str, partition: int, config: dict[str, Any], clock: Clock):
        self.topic = topic
        self.partition = partition
        self.config = LogConfig.coerce(config)
        self.clock = clock
        self.leader_epoch_cache = LeaderEpochFileCache(None)
        self.high_watermark_follows_log_end = True
        self._batches: list[bytes] = []
        self._bases: list[int] = []
        self._ends: list[int] = []  # next offset after each batch
        self.log_start_offset = 0
        self.log_start_checkpoint = 0
        self.log_end_offset = 0
        self.recovery_point = 0
        self._hw = 0
        self._marker: int | None = None  # the clean-shutdown marker's broker epoch, if one is there
        self.had_clean_shutdown = False  # a brand-new log: nothing to lose, nothing to vouch for
        self.clean_shutdown_broker_epoch = NO_BROKER_EPOCH

    @property
    def high_watermark(self) -> int:
        """Offset below which records are committed."""
        return self._hw

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self._hw = min(max(int(offset), self.log_start_offset), self.log_end_offset)

    def _add(self, data: bytes) -> None:
        header = read_batch_header(data)
        self._batches.append(data)
        self._bases.append(header.base_offset)
        self._ends.append(header.next_offset)
        if header.partition_leader_epoch >= 0:
            self.leader_epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
        self.log_end_offset = header.next_offset
        if self.log_end_offset - self.recovery_point >= self.config.flush_messages:
            self.flush()

    def append(self, records: Any, *, leader_epoch: int = 0) -> AppendInfo:
        """Leader append of raw batch bytes (one batch) or (key, value) tuples."""
        if isinstance(records, bytes | bytearray):
            buf = bytearray(records)
        else:
            items = list(records)
            buf = bytearray(build_batch_columnar([k for k, _ in items], [v for _, v in items],
                                                 timestamps=[self.clock.time_ms()] * len(items)))
        first = self.log_end_offset
        set_base_offset_and_epoch(buf, 0, first, leader_epoch)
        data = bytes(buf)
        header = read_batch_header(data)
        self._add(data)
        if self.high_watermark_follows_log_end:
            self._hw = self.log_end_offset
        return AppendInfo(first, header.last_offset, header.max_timestamp, -1, header.record_count, len(data),
                          header.last_offset)

    def append_as_follower(self, batch_bytes: bytes | bytearray | memoryview) -> AppendInfo:
        """Append fetched batches keeping their offsets and epochs."""
        batches = [bytes(b.buffer[b.position:b.position + b.size_in_bytes]) for b in iter_batches(batch_bytes)]
        if not batches:
            return AppendInfo(self.log_end_offset, self.log_end_offset - 1, -1, -1, 0, 0, -1)
        first = read_batch_header(batches[0]).base_offset
        if first < self.log_end_offset:
            raise InvalidRecordError(f"follower append at {first} below the log end offset {self.log_end_offset}")
        for batch in batches:
            self._add(batch)
        return AppendInfo(first, self.log_end_offset - 1, -1, -1, 0, len(batch_bytes), -1)

    def read(self, offset: int, max_bytes: int = 1_048_576, *, max_offset: int | None = None) -> FetchResult:
        """Whole batches from the one holding `offset`, at least one, at most `max_bytes`."""
        start, end = self.log_start_offset, self.log_end_offset
        if offset < start or offset > end:
            raise OffsetOutOfRangeError(f"offset {offset} is out of range [{start}, {end}]")
        limit = end if max_offset is None else min(max_offset, end)
        i = bisect.bisect_right(self._ends, offset)
        out: list[bytes] = []
        size = 0
        while i < len(self._batches) and self._ends[i] <= limit:
            data = self._batches[i]
            if out and size + len(data) > max_bytes:
                break
            out.append(data)
            size += len(data)
            i += 1
        first = self._bases[bisect.bisect_right(self._ends, offset)] if out else offset
        return FetchResult(b"".join(out), first, self._hw, start, end, self._ends[i - 1] if out else offset)

    def assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None:
        """Record that `leader_epoch` starts at `start_offset`."""
        self.leader_epoch_cache.assign(leader_epoch, start_offset)

    def truncate_to(self, offset: int) -> bool:
        """Drop the batch holding `offset` and every later one; False if nothing was there.
        The start comes down to the new end at most (checkpointed)."""
        if offset >= self.log_end_offset:
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            return False
        if not self._bases or self._bases[0] > offset:
            self.truncate_fully_and_start_at(offset)
            return True
        self._drop_from(offset)
        self.log_start_offset = self.log_start_checkpoint = min(offset, self.log_start_offset,
                                                                self.log_end_offset)
        return True

    def _drop_from(self, offset: int) -> None:
        """Remove the batch holding `offset` and every later one (the bytes only)."""
        keep = bisect.bisect_right(self._ends, offset)
        end = self._bases[keep] if keep < len(self._bases) else self.log_end_offset
        del self._batches[keep:], self._bases[keep:], self._ends[keep:]
        self.log_end_offset = end
        self.recovery_point = min(self.recovery_point, end)
        self._hw = min(self._hw, end)
        self.leader_epoch_cache.truncate_from_end(end)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty log starting at `offset`."""
        self._batches.clear()
        self._bases.clear()
        self._ends.clear()
        self.log_start_offset = self.log_end_offset = self.recovery_point = self._hw = offset
        self.log_start_checkpoint = offset
        self.leader_epoch_cache.clear_and_flush()

    def maybe_increment_log_start_offset(self, offset: int, reason: str = "") -> bool:
        """Move the log start offset up (bounded by the HW); drop batches wholly below it."""
        if offset > self._hw:
            raise OffsetOutOfRangeError(f"log start offset {offset} above the high watermark {self._hw}")
        if offset <= self.log_start_offset:
            return False
        self.log_start_offset = self.log_start_checkpoint = offset
        self.recovery_point = max(self.recovery_point, offset)
        drop = bisect.bisect_right(self._ends, offset)
        del self._batches[:drop], self._bases[:drop], self._ends[:drop]
        self.leader_epoch_cache.truncate_from_start(offset)
        return True

    def flush(self, offset: int | None = None) -> None:
        """Everything written below `offset` (default: the log end) survives a crash."""
        target = self.log_end_offset if offset is None else min(offset, self.log_end_offset)
        self.recovery_point = max(self.recovery_point, target)

    def crash(self) -> None:
        """Lose everything not flushed (the page cache), as a power failure does; `reopen()`
        then loads what is left."""
        self.kill()
        if self.recovery_point < self.log_end_offset:
            self._drop_from(self.recovery_point)

    def kill(self) -> None:
        """The process died (kill -9): the page cache keeps every byte, but no marker is written."""
        self._marker = None

    def reopen(self) -> None:
        """LogLoader's rules: the start is the checkpointed one (or the first batch's base, if
        above it); a log ending below it restarts empty there."""
        self.had_clean_shutdown = self._marker is not None
        self.clean_shutdown_broker_epoch = NO_BROKER_EPOCH if self._marker is None else self._marker
        self._marker = None  # taken at open: it vouches only for the stop before it
        first = self._bases[0] if self._bases else self.log_end_offset
        start = max(self.log_start_checkpoint, first)
        if self.log_end_offset < start:
            self.truncate_fully_and_start_at(start)
            return
        self.log_start_offset = start
        self.recovery_point = max(min(self.recovery_point, self.log_end_offset), start)
        self._hw = min(max(self._hw, start), self.log_end_offset)
        self.leader_epoch_cache.truncate_from_start(start)

    def batch_ids(self) -> list[tuple[int, int, int]]:
        """(base offset, next offset, crc) of every batch, for the invariant checks."""
        return [(b, e, read_batch_header(d).crc) for b, e, d in zip(self._bases, self._ends, self._batches,
                                                                     strict=True)]

    def close(self, *, broker_epoch: int = NO_BROKER_EPOCH) -> None:
        """A clean stop: the marker names `broker_epoch`."""
        self._marker = broker_epoch

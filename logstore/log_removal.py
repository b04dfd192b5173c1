"""Every way records leave a Log other than through retention's choice of segments: truncation
(a follower matching its leader), moves of the log start offset (DeleteRecords, retention) and
the removal or swap of whole segments (retention, the cleaner), with Kafka's UnifiedLog rules.

A mixin of Log (log.py): the same lock, offsets and segment list, kept apart so that the append
and read paths and these rarer, heavier changes each read as one concept.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from logstore.checkpoint import LOG_START_OFFSET_CHECKPOINT
from logstore.clock import Clock
from logstore.errors import OffsetOutOfRangeError
from logstore.local_log import LocalLog
from logstore.partition_state import PartitionState
from logstore.segment import LogSegment


class LogRemoval:
    """Truncation, log start offset and segment deletion/replacement for Log."""

    # Log's state and helpers these rules work on (set and defined in log.py).
    _dir: Path
    _clock: Clock
    _lock: threading.RLock
    _local: LocalLog
    _state: PartitionState
    _log_start_offset: int
    _log_end_offset: int
    _recovery_point: int
    _high_watermark: int
    _standalone: bool
    _on_start_offset_change: Callable[..., None] | None
    topic: str
    partition: int
    _require_writable: Callable[[str], None]
    _roll: Callable[[int], LogSegment]
    _write_parent_checkpoints: Callable[..., None]

    # ------------------------------------------------------------------ truncation

    def truncate_to(self, offset: int) -> bool:
        """Remove every record at or above `offset` (whole batches: the one holding `offset`
        goes too); False if nothing to do. A log start it lowers is checkpointed before return."""
        with self._lock:
            self._require_writable("truncate")
            if offset < 0:
                raise ValueError(f"cannot truncate {self._dir} to a negative offset {offset}")
            if offset >= self._log_end_offset:
                # As Kafka: a leader may have stamped an epoch at the log end without appending.
                self._state.epochs.truncate_from_end(self._log_end_offset)
                return False
            if self._local.segments[0].base_offset > offset:
                self._truncate_fully(offset)
                return True
            self._log_end_offset = self._local.truncate_to(offset, self._schedule_deletes)
            old_start = self._log_start_offset
            # Kafka lowers the start to `offset`; the batch holding the start may be gone too.
            self._log_start_offset = min(offset, old_start, self._log_end_offset)
            self._recovery_point = min(self._recovery_point, self._log_end_offset)
            self._high_watermark = min(self._high_watermark, self._log_end_offset)
            self._state.truncated(self._local.segments, self._log_start_offset, self._log_end_offset)
            if self._log_start_offset != old_start:
                self._start_offset_changed()
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start an empty log at `offset` (a follower far behind)."""
        with self._lock:
            self._require_writable("truncate")
            self._truncate_fully(offset)

    def _truncate_fully(self, offset: int) -> None:
        self._schedule_deletes(self._local.truncate_fully(offset), renamed=True)
        self._log_end_offset = offset
        self._log_start_offset = offset
        self._recovery_point = offset
        self._high_watermark = offset
        self._state.truncated(self._local.segments, offset, offset)
        self._state.start_offset_changed(offset)
        self._start_offset_changed()

    # ------------------------------------------------------------------ log start offset

    def maybe_increment_log_start_offset(self, offset: int, reason: str = "client_record_deletion") -> bool:
        """Move the log start offset up to `offset` (never down); True if it moved.

        Raises OffsetOutOfRangeError above the high watermark. The new value is checkpointed.
        """
        with self._lock:
            self._require_writable(f"increment the log start offset ({reason})")
            if offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot increment the log start offset of {self.topic}-{self.partition} to "
                    f"{offset} ({reason}): it is above the high watermark {self._high_watermark}")
            if offset <= self._log_start_offset:
                return False
            self._set_log_start_offset(offset)
            return True

    def delete_records_before(self, offset: int) -> int:
        """Kafka's DeleteRecords: move the log start offset to `offset`; returns the new start."""
        self.maybe_increment_log_start_offset(offset, "client_record_deletion")
        return self._log_start_offset

    def _set_log_start_offset(self, offset: int) -> None:
        self._log_start_offset = offset
        if self._high_watermark < offset:
            self._high_watermark = offset
        if self._recovery_point < offset:
            self._recovery_point = offset
        self._state.start_offset_changed(offset)
        self._start_offset_changed()

    def _start_offset_changed(self) -> None:
        if self._on_start_offset_change is not None:
            self._on_start_offset_change(self)
        elif self._standalone:
            self._write_parent_checkpoints(LOG_START_OFFSET_CHECKPOINT)

    # ------------------------------------------------------------------ segment deletion

    def delete_segments(self, segments: Iterable[LogSegment], reason: str = "retention") -> int:
        """Remove segments from the log, rename their files `.deleted` and delete them
        `file.delete.delay.ms` later; rolls first if the active segment is among them.
        Returns the number of segments removed."""
        with self._lock:
            self._require_writable(f"delete segments ({reason})")
            segments = list(segments)
            targets = {s.base_offset for s in segments}
            if self._local.segments[-1].base_offset in targets:
                self._roll(self._log_end_offset)
            doomed = self._local.remove_segments(segments)
            if not doomed:
                return 0
            self._schedule_deletes(doomed)
            first = self._local.segments[0].base_offset
            if first > self._log_start_offset:
                self._set_log_start_offset(first)
            return len(doomed)

    def _schedule_deletes(self, segments: list[LogSegment], *, renamed: bool = False) -> None:
        snapshots = self._state.segments_deleted(segments, set(self._local.base_offsets))
        if self._local.schedule_deletes(segments, snapshots, renamed=renamed):
            self.delete_expired_files()

    def delete_expired_files(self, now_ms: int | None = None) -> int:
        """Delete `.deleted` segments (and their `.snapshot.deleted` files) whose delay passed; returns how many."""
        now = self._clock.time_ms() if now_ms is None else now_ms
        with self._lock:
            due = self._local.take_expired(now)
        for item in due:
            if isinstance(item, LogSegment):
                item.delete()
            else:
                item.unlink(missing_ok=True)
        return len(due)

    @property
    def pending_deletes(self) -> list[LogSegment]:
        """Segments renamed `.deleted` and waiting for `file.delete.delay.ms`."""
        return self._local.pending_deletes

    def replace_segments(self, new_segments: Sequence[LogSegment], old_segments: Sequence[LogSegment]) -> None:
        """Swap cleaned segments (files ending `.cleaned`) in for `old_segments`, crash-safely:
        rename new files `.cleaned` -> `.swap`, old files -> `.deleted`, then drop `.swap`.
        A crash at any step reopens to either the old or the new segments."""
        with self._lock:
            self._require_writable("replace segments")
            self._local.swap_in(new_segments, old_segments, self._schedule_deletes)

"""The leader-epoch cache: which leader epoch started at which offset, kept in
`leader-epoch-checkpoint` (docs/FORMAT.md "Checkpoint files", written by logstore.checkpoint), as Kafka's LeaderEpochFileCache.

Entries are strictly increasing in both epoch and start offset. Replication asks
`end_offset_for(epoch, log_end_offset)` the way Kafka answers OffsetsForLeaderEpoch; the Log
calls `assign` on every append that carries a new epoch, `truncate_from_end` on truncation and
`truncate_from_start` when the log start offset moves.
"""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Any, NamedTuple

from logstore.checkpoint import read_checkpoint, write_checkpoint
from logstore.errors import CorruptCheckpointError, FencedLeaderEpochError, UnknownLeaderEpochError
from logstore.records.header import INT32_MAX, NO_PARTITION_LEADER_EPOCH

CHECKPOINT_FILE_NAME = "leader-epoch-checkpoint"
# OffsetsForLeaderEpoch's "unknown" answers.
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
# The epochs a leader may stamp: Kafka's are int32, and -1 is none.
EPOCHS = range(NO_PARTITION_LEADER_EPOCH, INT32_MAX + 1)


def check_current_leader_epoch(requested: int, leader_epoch: int, where: str) -> None:
    """Kafka's checkCurrentLeaderEpoch: a request at an older leader epoch than `where`'s is fenced
    (FencedLeaderEpochError), at a newer one it is early (UnknownLeaderEpochError); -1 skips the check."""
    if requested == UNDEFINED_EPOCH:
        return
    if requested < leader_epoch:
        raise FencedLeaderEpochError(f"{where}: request epoch {requested} is older than the leader epoch {leader_epoch}")
    if requested > leader_epoch:
        raise UnknownLeaderEpochError(f"{where}: request epoch {requested} is newer than the known leader epoch "
                                      f"{leader_epoch}")


def epoch_argument(value: Any) -> int:
    """`value` as a leader epoch in EPOCHS, or ValueError saying what it is instead."""
    try:
        epoch = operator.index(value)
    except TypeError:
        raise ValueError(f"leader_epoch must be an integer, not {value!r}") from None
    if epoch not in EPOCHS:
        raise ValueError(f"leader_epoch must be -1 (none) or 0..{INT32_MAX}, not {epoch}")
    return epoch


class EpochEntry(NamedTuple):
    """One leader epoch and the first offset written in it."""

    epoch: int
    start_offset: int


class LeaderEpochFileCache:
    """In-memory epoch -> start offset map backed by an atomically rewritten checkpoint file.

    `path` is the checkpoint file, or None for a cache that never touches disk. With
    `read_only=True` the file is read but every change stays in memory.
    """

    def __init__(self, path: Path | str | None, *, read_only: bool = False):
        self.path = None if path is None else path if isinstance(path, Path) else Path(path)
        self.read_only = read_only
        self._entries: list[EpochEntry] = []
        if self.path is not None:
            for number, (epoch, start_offset) in enumerate(read_checkpoint(self.path, (int, int)), 3):
                if epoch < 0 or start_offset < 0:  # entries start on line 3, after version and count
                    raise CorruptCheckpointError(
                        f"{self.path} line {number}: negative epoch or start offset {epoch} {start_offset}")
                self._assign(EpochEntry(epoch, start_offset))

    @classmethod
    def in_dir(cls, log_dir: Path | str, *, read_only: bool = False) -> LeaderEpochFileCache:
        """The cache of a partition directory (`<dir>/leader-epoch-checkpoint`)."""
        directory = log_dir if isinstance(log_dir, Path) else Path(log_dir)
        return cls(directory / CHECKPOINT_FILE_NAME, read_only=read_only)

    # ---- updates -------------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; persists and returns True if it changed.

        Entries at or above `epoch` or starting at or after `start_offset` are removed first
        (they conflict). Raises ValueError for a negative epoch or offset.
        """
        if self.covers(epoch, start_offset):
            return False  # every append's case
        if self._assign(EpochEntry(epoch, start_offset)):
            self.flush()
            return True
        return False

    def covers(self, epoch: int, offset: int) -> bool:
        """True when `epoch` is the latest epoch and starts at or before `offset`: assigning
        it there would change nothing."""
        if not self._entries:
            return False
        latest_epoch, start_offset = self._entries[-1]
        return latest_epoch == epoch and offset >= start_offset

    def assign_all(self, entries: list[EpochEntry]) -> None:
        """Assign several entries, writing the checkpoint once."""
        changed = [self._assign(EpochEntry(*e)) for e in entries]
        if any(changed):
            self.flush()

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"invalid partition leader epoch entry {entry}")
        latest = self.latest_entry()
        if (
            latest is not None
            and entry.epoch == latest.epoch
            and entry.start_offset >= latest.start_offset
        ):
            return False
        while self._entries and (
            self._entries[-1].epoch >= entry.epoch
            or self._entries[-1].start_offset >= entry.start_offset
        ):
            self._entries.pop()
        self._entries.append(entry)
        return True

    def truncate_from_end(self, end_offset: int) -> list[EpochEntry]:
        """Remove every entry starting at or after `end_offset` (log truncated to it); returns them."""
        removed: list[EpochEntry] = []
        if end_offset >= 0:
            while self._entries and self._entries[-1].start_offset >= end_offset:
                removed.append(self._entries.pop())
        if removed:
            self.flush()
        return removed

    def truncate_from_start(self, start_offset: int) -> list[EpochEntry]:
        """Drop entries wholly before `start_offset`; the epoch covering it restarts there.

        Exclusive like Kafka's: an entry starting exactly at `start_offset` is kept (rewritten
        to itself). Returns the removed entries; the file is rewritten only when the entries
        changed (every open of a log calls this with its unchanged start).
        """
        keep = 0
        while keep < len(self._entries) and self._entries[keep].start_offset <= start_offset:
            keep += 1
        removed = self._entries[:keep]
        if removed:
            covering = EpochEntry(removed[-1].epoch, start_offset)
            changed = removed != [covering]
            self._entries[:keep] = [covering]
            if changed:
                self.flush()
        return removed

    def clear_and_flush(self) -> None:
        """Delete every entry and persist the empty cache."""
        self._entries.clear()
        self.flush()

    def flush(self) -> None:
        """Rewrite the checkpoint file atomically (no-op without a path or when read-only)."""
        if self.path is None or self.read_only:
            return
        write_checkpoint(self.path, self._entries)

    # ---- queries -------------------------------------------------------------------------

    def entries(self) -> list[EpochEntry]:
        """A copy of the entries, ascending."""
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def latest_entry(self) -> EpochEntry | None:
        """The newest entry, or None when empty."""
        return self._entries[-1] if self._entries else None

    def earliest_entry(self) -> EpochEntry | None:
        """The oldest entry, or None when empty."""
        return self._entries[0] if self._entries else None

    def latest_epoch(self) -> int | None:
        """The newest epoch (the one still being written to), or None when empty."""
        return self._entries[-1].epoch if self._entries else None

    def epoch_entry(self, epoch: int) -> EpochEntry | None:
        """The entry of exactly `epoch`, or None."""
        for entry in self._entries:
            if entry.epoch == epoch:
                return entry
        return None

    def previous_epoch(self, epoch: int | None = None) -> int | None:
        """The largest epoch below `epoch` (default: below the latest epoch), or None."""
        if epoch is None:
            epoch = self.latest_epoch()
            if epoch is None:
                return None
        lower = [e.epoch for e in self._entries if e.epoch < epoch]
        return lower[-1] if lower else None

    def next_epoch(self, epoch: int) -> int | None:
        """The smallest epoch above `epoch`, or None."""
        for entry in self._entries:
            if entry.epoch > epoch:
                return entry.epoch
        return None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch that wrote `offset` (the last entry starting at or before it), or None."""
        found = None
        for entry in self._entries:
            if entry.start_offset > offset:
                break
            found = entry.epoch
        return found

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's OffsetsForLeaderEpoch answer: (largest epoch <= requested, its end offset).

        The end offset is the start of the next larger epoch, or `log_end_offset` for the
        latest epoch. Unknown cases answer (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET); an epoch
        older than every entry answers (requested_epoch, first entry's start offset).
        """
        undefined = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        if requested_epoch == UNDEFINED_EPOCH:
            return undefined
        if self._entries and self._entries[-1].epoch == requested_epoch:
            return requested_epoch, log_end_offset
        higher = next((e for e in self._entries if e.epoch > requested_epoch), None)
        if higher is None:
            return undefined
        floor = [e for e in self._entries if e.epoch <= requested_epoch]
        if not floor:
            return requested_epoch, higher.start_offset
        return floor[-1].epoch, higher.start_offset

    def diverging(self, last_fetched_epoch: int, fetch_offset: int, log_end_offset: int) -> tuple[int, int] | None:
        """A leader's answer to a follower that fetches at `fetch_offset` after `last_fetched_epoch`
        (KIP-320's DivergingEpoch): (epoch, end offset) where their logs part, or None if they agree."""
        if last_fetched_epoch == UNDEFINED_EPOCH:
            return None
        epoch, end = self.end_offset_for(last_fetched_epoch, log_end_offset)
        if end != UNDEFINED_EPOCH_OFFSET and (epoch < last_fetched_epoch or end < fetch_offset):
            return epoch, end
        return None

    def epoch_entries_in_range(self, start_offset: int, end_offset: int) -> list[EpochEntry]:
        """The entries covering [start_offset, end_offset), clipped like the truncations."""
        scratch = LeaderEpochFileCache(None)
        scratch._entries = list(self._entries)
        if start_offset >= 0:
            scratch.truncate_from_start(start_offset)
        scratch.truncate_from_end(end_offset)
        return scratch.entries()

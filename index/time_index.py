"""The time index: sparse map from a timestamp to the offset after which later timestamps lie."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from index._kernels import (
    FULL,
    NEEDS_GROW,
    OFFSET_BACKWARDS,
    READ_ONLY,
    TIMESTAMP_BACKWARDS,
    UNCHANGED,
    time_index_maybe_append,
)
from index.base import AbstractIndex
from index.entries import TIME_INDEX_DTYPE, TIME_INDEX_ENTRY
from index.errors import (
    CorruptIndexError,
    IndexFullError,
    IndexOffsetOverflowError,
    InvalidOffsetError,
    ReadOnlyLogError,
)

# Kafka's RecordBatch.NO_TIMESTAMP.
NO_TIMESTAMP = -1


class TimestampOffset(NamedTuple):
    """A timestamp and an offset: every record with a larger timestamp comes after `offset`."""

    timestamp: int
    offset: int


class TimeIndex(AbstractIndex):
    """12-byte entries (timestamp, relative offset); timestamps strictly ascending.

    One slot is kept free for the final entry written when the segment rolls or closes.
    """

    ENTRY_DTYPE = TIME_INDEX_DTYPE
    ENTRY_SIZE = TIME_INDEX_ENTRY.size
    KIND = "time index"

    @property
    def is_full(self) -> bool:
        """True when only the slot reserved for the roll/close entry is left."""
        if not self._loaded or self._closed:
            self._ensure_loaded()
        return self._entries >= self._max_entries - 1

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or (NO_TIMESTAMP, base offset) when empty."""
        n = self.entry_count
        return self.entry(n - 1) if n else TimestampOffset(NO_TIMESTAMP, self.base_offset)

    def entry(self, n: int) -> TimestampOffset:
        """The n-th entry with an absolute offset; raises IndexError past the valid entries."""
        with self._held():
            if not 0 <= n < self.entry_count:
                raise IndexError(f"entry {n} of {self.path} which has {self.entry_count} entries")
            ts, rel = TIME_INDEX_ENTRY.unpack_from(self._mmap, n * self.ENTRY_SIZE)
        return TimestampOffset(ts, self.base_offset + rel)

    def entries(self) -> np.ndarray:
        """All valid entries as a new array with int64 fields `timestamp` and `offset` (absolute)."""
        raw = self._raw_entries()
        out = np.empty(len(raw), dtype=[("timestamp", np.int64), ("offset", np.int64)])
        out["timestamp"] = raw["timestamp"]
        out["offset"] = raw["relative_offset"].astype(np.int64) + self.base_offset
        return out

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= target, or (NO_TIMESTAMP, base offset)."""
        with self._held():
            slot = self._largest_lower_bound_slot(target_timestamp, "timestamp")
            if slot < 0:
                return TimestampOffset(NO_TIMESTAMP, self.base_offset)
            ts, rel = TIME_INDEX_ENTRY.unpack_from(self._mmap, slot * self.ENTRY_SIZE)
        return TimestampOffset(ts, self.base_offset + rel)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if the timestamp is greater than the last entry's.

        Raises IndexFullError (unless `skip_full_check`, used on roll and close, which grows a
        trimmed file if needed) and InvalidOffsetError when the offset or timestamp goes backwards.
        """
        if not self._loaded or self._closed:
            self._ensure_loaded()
        if not self._writable:
            status = self._read_only_append(timestamp, offset, skip_full_check)
        else:
            status = time_index_maybe_append(self._meta, self._bytes, self._base_offset, timestamp, offset,
                                             skip_full_check)
            if status == NEEDS_GROW:
                self.resize(self.length + self.ENTRY_SIZE)
                status = time_index_maybe_append(self._meta, self._bytes, self._base_offset, timestamp, offset,
                                                 skip_full_check)
        if status > UNCHANGED:
            raise self.append_error(status, timestamp, offset)

    def _read_only_append(self, timestamp: int, offset: int, skip_full_check: bool) -> int:
        # The kernel's checks, in its order, for a mapping it may not write to.
        n = self._entries
        if not skip_full_check and n >= self._max_entries - 1:
            return FULL
        last = self.last_entry
        if n and offset < last.offset:
            return OFFSET_BACKWARDS
        if n and timestamp < last.timestamp:
            return TIMESTAMP_BACKWARDS
        return READ_ONLY if timestamp > last.timestamp else UNCHANGED

    def append_error(self, status: int, timestamp: int, offset: int) -> Exception:
        """The error for an append of (timestamp, offset) that returned `status` (index._kernels)."""
        n = self._entries
        if status == FULL:
            return IndexFullError(f"attempt to append to a full time index {self.path} ({n} entries)")
        if status == READ_ONLY:
            return ReadOnlyLogError(f"cannot append to read-only {self.KIND} {self._path}")
        last = self.last_entry
        if status == OFFSET_BACKWARDS:
            return InvalidOffsetError(
                f"attempt to append offset {offset} to slot {n} below the last offset "
                f"appended ({last.offset}) to {self.path}"
            )
        if status == TIMESTAMP_BACKWARDS:
            return InvalidOffsetError(
                f"attempt to append timestamp {timestamp} to slot {n} below the last timestamp "
                f"appended ({last.timestamp}) to {self.path}"
            )
        return IndexOffsetOverflowError(
            f"offset {offset} does not fit relative to base offset {self._base_offset} ({self._path})"
        )

    def sanity_check(self) -> None:
        """Raise CorruptIndexError if the size is not a whole number of entries, the last
        offset is below the base offset, or timestamps are not strictly ascending."""
        self._ensure_loaded()
        n = self.entry_count
        if n and self.last_entry.offset < self.base_offset:
            raise CorruptIndexError(
                f"corrupt time index {self.path}: last offset {self.last_entry.offset} is below "
                f"the base offset {self.base_offset}"
            )
        self._check_length()
        self._check_ascending("timestamp", "timestamp")
        offsets = self._raw_entries()["relative_offset"].astype(np.int64)
        if len(offsets) > 1 and (np.diff(offsets) < 0).any():
            raise CorruptIndexError(f"corrupt time index {self.path}: offsets go backwards")

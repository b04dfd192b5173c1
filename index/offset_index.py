"""The offset index: sparse map from offset to the byte position of its batch in the `.log` file."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from index._kernels import APPENDED, FULL, NOT_ASCENDING, OVERFLOW, READ_ONLY, offset_index_append
from index.base import AbstractIndex
from index.entries import OFFSET_INDEX_DTYPE, OFFSET_INDEX_ENTRY
from index.errors import (
    CorruptIndexError,
    IndexFullError,
    IndexOffsetOverflowError,
    InvalidOffsetError,
    ReadOnlyLogError,
)


class OffsetPosition(NamedTuple):
    """An offset and the file position of the batch that holds it (or an earlier one)."""

    offset: int
    position: int


class OffsetIndex(AbstractIndex):
    """8-byte entries (relative offset, position), strictly ascending in offset."""

    ENTRY_DTYPE = OFFSET_INDEX_DTYPE
    ENTRY_SIZE = OFFSET_INDEX_ENTRY.size
    KIND = "offset index"

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or the base offset when empty."""
        return self.last_entry.offset

    @property
    def last_entry(self) -> OffsetPosition:
        """The last entry, or (base offset, 0) when empty."""
        n = self.entry_count
        return self.entry(n - 1) if n else OffsetPosition(self.base_offset, 0)

    def entry(self, n: int) -> OffsetPosition:
        """The n-th entry with an absolute offset; raises IndexError past the valid entries."""
        with self._held():
            if not 0 <= n < self.entry_count:
                raise IndexError(f"entry {n} of {self.path} which has {self.entry_count} entries")
            rel, pos = OFFSET_INDEX_ENTRY.unpack_from(self._mmap, n * self.ENTRY_SIZE)
        return OffsetPosition(self.base_offset + rel, pos)

    def entries(self) -> np.ndarray:
        """All valid entries as a new array with int64 fields `offset` (absolute) and `position`."""
        raw = self._raw_entries()
        out = np.empty(len(raw), dtype=[("offset", np.int64), ("position", np.int64)])
        out["offset"] = raw["relative_offset"].astype(np.int64) + self.base_offset
        out["position"] = raw["position"]
        return out

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= target, or (base offset, 0) when there is none."""
        with self._held():
            return self._entry_or_start(self._largest_lower_bound_slot(target_offset - self.base_offset,
                                                                       "relative_offset"))

    def lookup_position(self, position: int) -> OffsetPosition:
        """The entry with the largest file position <= `position`, or (base offset, 0) when there
        is none: the batches before it end at or before `position` (a fetch's upper bound)."""
        with self._held():
            return self._entry_or_start(self._largest_lower_bound_slot(position, "position"))

    def lookup_before_position(self, position: int) -> OffsetPosition:
        """The entry before the one `lookup_position(position)` returns, or (base offset, 0)
        when there is none: the batches from it to that entry end by `position`, so a fetch
        bounded there finds its end by walking headers from here on."""
        with self._held():
            return self._entry_or_start(self._largest_lower_bound_slot(position, "position") - 1)

    def _entry_or_start(self, slot: int) -> OffsetPosition:
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        rel, pos = OFFSET_INDEX_ENTRY.unpack_from(self._mmap, slot * self.ENTRY_SIZE)
        return OffsetPosition(self.base_offset + rel, pos)

    def append(self, offset: int, position: int) -> None:
        """Add an entry; raises IndexFullError, InvalidOffsetError (offset not above the last)
        or IndexOffsetOverflowError (offset not representable relative to the base)."""
        if not self._loaded or self._closed:
            self._ensure_loaded()
        if not self._writable:
            status = FULL if self._entries >= self._max_entries else READ_ONLY
        else:
            status = offset_index_append(self._meta, self._bytes, self._base_offset, offset, position)
        if status != APPENDED:
            raise self.append_error(status, offset, position)

    def append_error(self, status: int, offset: int, position: int) -> Exception:
        """The error for an append of (offset, position) that returned `status` (index._kernels)."""
        n = self._entries
        if status == FULL:
            return IndexFullError(f"attempt to append to a full offset index {self.path} ({n} entries)")
        if status == READ_ONLY:
            return ReadOnlyLogError(f"cannot append to read-only {self.KIND} {self._path}")
        if status == NOT_ASCENDING:
            return InvalidOffsetError(
                f"attempt to append offset {offset} to slot {n} no larger than the last offset "
                f"appended ({self.last_offset}) to {self.path}"
            )
        if status == OVERFLOW:
            return IndexOffsetOverflowError(
                f"offset {offset} does not fit relative to base offset {self._base_offset} ({self._path})"
            )
        return ValueError(f"position {position} does not fit an int32 entry of {self.path}")

    def sanity_check(self) -> None:
        """Raise CorruptIndexError if the file size is not a whole number of entries, the last
        offset is below the base offset, or offsets or positions are not strictly ascending."""
        self._ensure_loaded()
        if self.entry_count and self.last_offset < self.base_offset:
            raise CorruptIndexError(
                f"corrupt offset index {self.path}: last offset {self.last_offset} is below "
                f"the base offset {self.base_offset}"
            )
        self._check_length()
        self._check_ascending("relative_offset", "relative offset")
        self._check_ascending("position", "position")

"""Numba kernels for index searches over the raw big-endian bytes of a mapped index file.

numpy's searchsorted copies a byte-swapped, strided field view on every call (O(n)), so the
binary search reads the big-endian fields straight from the mapped bytes instead.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from index.entries import (
    OFFSET_ENTRY_SIZE,
    RELATIVE_OFFSET_WIDTH,
    TIME_ENTRY_SIZE,
    TIMESTAMP_WIDTH,
    VALUE_WIDTH,
)


@njit(cache=True, inline="always")
def read_be(buf: np.ndarray, pos: int, width: int) -> int:
    """Signed big-endian integer of `width` (4 or 8) bytes at `pos` of a uint8 array."""
    value = np.uint64(0)
    for i in range(width):
        value = (value << np.uint64(8)) | np.uint64(buf[pos + i])
    if width == 4:
        signed = np.int64(value)
        if signed >= 2147483648:
            signed -= 4294967296
        return signed
    return np.int64(value)


@njit(cache=True)
def largest_lower_bound(
    buf: np.ndarray, entry_size: int, field_pos: int, field_width: int, n: int, target: int
) -> int:
    """Slot of the last of `n` entries whose field is <= target, or -1 when none is."""
    if n == 0 or read_be(buf, field_pos, field_width) > target:
        return -1
    lo = 0
    hi = n - 1
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if read_be(buf, mid * entry_size + field_pos, field_width) > target:
            hi = mid - 1
        else:
            lo = mid
    return lo


# An index's counters, an int64 array the compiled appends read and update (a view into its
# segment's state, so the segment's compiled append reaches both indexes without more arguments).
ENTRIES = 0  # valid entries
MAX_ENTRIES = 1  # slots the mapped file has
WRITABLE = 2  # 1 unless opened read-only
LOADED = 3  # 1 while the file is mapped (loaded and not closed)
META_SIZE = 4

# What an index append did, or why it did nothing.
APPENDED = 0
UNCHANGED = 1  # a time-index timestamp no larger than the last entry's: nothing to add
FULL = 2
NOT_ASCENDING = 3  # an offset not above the last entry's (offset index)
OFFSET_BACKWARDS = 4  # an offset below the last entry's (time index)
TIMESTAMP_BACKWARDS = 5  # a timestamp below the last entry's (time index)
OVERFLOW = 6  # the offset does not fit relative to the base offset
READ_ONLY = 7
NEEDS_GROW = 8  # the time index's reserved slot is needed but the file was trimmed
POSITION_RANGE = 9  # a file position that does not fit an int32

MAX_RELATIVE_OFFSET = 2**31 - 1  # entries store offset - base offset as an int32


@njit(cache=True, inline="always")
def write_be(buf: np.ndarray, pos: int, width: int, value: int) -> None:
    """Store `value` as a big-endian integer of `width` bytes at `pos` of a uint8 array."""
    for i in range(width):
        buf[pos + width - 1 - i] = (value >> (8 * i)) & 0xFF


@njit(cache=True, inline="always")
def _fits_int32(value: int) -> bool:
    """True for a non-negative value an entry's int32 field holds."""
    return 0 <= value <= MAX_RELATIVE_OFFSET


@njit(cache=True, inline="always")
def _add_entry(meta: np.ndarray, buf: np.ndarray, n: int, key_width: int, key: int, entry_size: int,
               value: int) -> int:
    """Write entry `n` (a big-endian key of `key_width` bytes, then an int32 value) and count it."""
    write_be(buf, n * entry_size, key_width, key)
    write_be(buf, n * entry_size + key_width, VALUE_WIDTH, value)
    meta[ENTRIES] = n + 1
    return APPENDED


@njit(cache=True)
def offset_index_append(meta: np.ndarray, buf: np.ndarray, base_offset: int, offset: int, position: int) -> int:
    """Add an offset-index entry (offset, position) after the last of meta[ENTRIES], in the
    order of Kafka's OffsetIndex.append checks; APPENDED or why not."""
    n = meta[ENTRIES]
    if n >= min(meta[MAX_ENTRIES], buf.size // OFFSET_ENTRY_SIZE):
        return FULL
    if not meta[WRITABLE]:
        return READ_ONLY
    if n and offset <= base_offset + read_be(buf, (n - 1) * OFFSET_ENTRY_SIZE, RELATIVE_OFFSET_WIDTH):
        return NOT_ASCENDING
    if not _fits_int32(offset - base_offset):
        return OVERFLOW
    if not _fits_int32(position):
        return POSITION_RANGE
    return _add_entry(meta, buf, n, RELATIVE_OFFSET_WIDTH, offset - base_offset, OFFSET_ENTRY_SIZE, position)


@njit(cache=True)
def time_index_maybe_append(meta: np.ndarray, buf: np.ndarray, base_offset: int, timestamp: int, offset: int,
                            skip_full_check: bool) -> int:
    """Add a time-index entry when `timestamp` is above the last entry's (Kafka's
    TimeIndex.maybeAppend): APPENDED, UNCHANGED, or why not. One slot stays reserved for the
    roll/close entry unless `skip_full_check`; NEEDS_GROW when that entry finds no slot."""
    n = meta[ENTRIES]
    capacity = min(meta[MAX_ENTRIES], buf.size // TIME_ENTRY_SIZE)
    if n > capacity or (not skip_full_check and n >= capacity - 1):
        return FULL
    last_timestamp = -1
    if n:
        last_timestamp = read_be(buf, (n - 1) * TIME_ENTRY_SIZE, TIMESTAMP_WIDTH)
        if offset < base_offset + read_be(buf, (n - 1) * TIME_ENTRY_SIZE + TIMESTAMP_WIDTH, RELATIVE_OFFSET_WIDTH):
            return OFFSET_BACKWARDS
        if timestamp < last_timestamp:
            return TIMESTAMP_BACKWARDS
    if timestamp <= last_timestamp:
        return UNCHANGED
    if not meta[WRITABLE]:
        return READ_ONLY
    if n >= capacity:
        return NEEDS_GROW
    if not _fits_int32(offset - base_offset):
        return OVERFLOW
    return _add_entry(meta, buf, n, TIMESTAMP_WIDTH, timestamp, TIME_ENTRY_SIZE, offset - base_offset)

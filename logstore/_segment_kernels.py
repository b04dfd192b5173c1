"""The active segment's append state as one int64 array, and the numba kernels that apply
Kafka's roll rule and append to it: write the bytes, move the size, track the largest timestamp
and add the sparse index entries, in one compiled call per append.

LogSegment keeps its counters in this array (`LogSegment._state`) and its indexes keep theirs
in two slices of it, so the kernels need no other segment argument than the indexes' mappings.
"""

from __future__ import annotations

import sys

from numba import njit, types

from index._kernels import (
    APPENDED,
    ENTRIES,
    LOADED,
    MAX_ENTRIES,
    MAX_RELATIVE_OFFSET,
    META_SIZE,
    UNCHANGED,
    offset_index_append,
    time_index_maybe_append,
)

# The state's slots.
BASE_OFFSET = 0
SIZE = 1  # bytes in the .log file
BYTES_SINCE_INDEX = 2  # bytes appended since the last index entry
INDEX_INTERVAL = 3  # index.interval.bytes
MAX_TIMESTAMP = 4  # largest batch max timestamp so far, with
OFFSET_OF_MAX = 5  # the last offset of its batch;
MAX_KNOWN = 6  # 0 until read from the time index
ROLLING_TIMESTAMP = 7  # the first batch's max timestamp (the roll age's start);
ROLLING_KNOWN = 8  # 0 until read from the first batch
CREATED_MS = 9
ROLL_JITTER = 10
NEXT_OFFSET = 11  # last appended offset + 1;
NEXT_KNOWN = 12  # 0 until read from the file
FD = 13  # the .log's descriptor, -1 while not open
WRITABLE = 14  # 1 while open and not read-only
OFFSET_INDEX = 15  # the offset index's counters (index._kernels' META_SIZE slots)
TIME_INDEX = OFFSET_INDEX + META_SIZE  # the time index's counters
STATE_SIZE = TIME_INDEX + META_SIZE

# append() modes: the kernel writes the bytes; only checks; or commits bytes the caller wrote at SIZE.
WRITE = 0
PREPARE = 1
COMMIT = 2

# append() and should_roll() statuses, with the value each returns beside it.
OK = 0
NOT_READY = 1  # something is not loaded or open yet (or the segment is closed or read-only)
OFFSET_OVERFLOW = 2
WRITE_ERROR = 3  # value: errno
OFFSET_INDEX_ERROR = 4  # value: index._kernels' status
TIME_INDEX_ERROR = 5  # value: index._kernels' status
ROLL = 6  # should_roll(): the append needs a new segment

_EINTR = 4
_ENOSPC = 28

# libc's pwrite and errno, called from compiled code (by symbol name, so the kernels can be cached).
_pwrite = types.ExternalFunction("pwrite", types.intp(types.int32, types.uintp, types.uintp, types.int64))
_errno = types.ExternalFunction("__error" if sys.platform == "darwin" else "__errno_location",
                                types.CPointer(types.int32)())


@njit(cache=True, nogil=True)
def _write_all(state, data, nbytes, position):
    """pwrite `nbytes` of `data` at `position`, resuming after short writes and EINTR; SIZE
    follows what was written."""
    fd = state[FD]
    done = 0
    while done < nbytes:
        written = _pwrite(fd, data.ctypes.data + done, nbytes - done, position + done)
        if written < 0:
            error = _errno()[0]
            if error == _EINTR:
                continue
            state[SIZE] = position + done
            return WRITE_ERROR, error
        if written == 0:  # a regular file writes something or fails; never spin
            state[SIZE] = position + done
            return WRITE_ERROR, _ENOSPC
        done += written
    state[SIZE] = position + nbytes
    return OK, 0


@njit(cache=True, nogil=True)
def append(state, offset_index, time_index, data, nbytes, largest_offset, largest_timestamp, offset_of_max,
           mode):
    """Append `nbytes` of batches whose largest offset is `largest_offset` (LogSegment.append's
    rules, Kafka's LogSegment.append): written from `data` (WRITE), only checked (PREPARE), or
    committed after the caller wrote them at SIZE (COMMIT). `offset_index` and `time_index` are
    the indexes' mapped bytes. Returns (status, value)."""
    if (not state[WRITABLE] or not state[MAX_KNOWN] or not state[OFFSET_INDEX + LOADED]
            or not state[TIME_INDEX + LOADED] or (mode == WRITE and state[FD] < 0)):
        return NOT_READY, 0
    if nbytes == 0:
        return OK, 0
    position = state[SIZE]
    if mode != COMMIT:
        if position == 0:
            state[ROLLING_TIMESTAMP] = largest_timestamp
            state[ROLLING_KNOWN] = 1
        relative = largest_offset - state[BASE_OFFSET]
        if relative < 0 or relative > MAX_RELATIVE_OFFSET:
            return OFFSET_OVERFLOW, 0
        if mode == PREPARE:
            return OK, 0
    if mode == WRITE:
        status, value = _write_all(state, data, nbytes, position)
        if status != OK:
            return status, value
    else:
        state[SIZE] = position + nbytes
    if largest_timestamp > state[MAX_TIMESTAMP]:
        state[MAX_TIMESTAMP] = largest_timestamp
        state[OFFSET_OF_MAX] = offset_of_max
    if state[BYTES_SINCE_INDEX] > state[INDEX_INTERVAL]:
        base = state[BASE_OFFSET]
        status = offset_index_append(state[OFFSET_INDEX:TIME_INDEX], offset_index, base, largest_offset, position)
        if status != APPENDED:
            return OFFSET_INDEX_ERROR, status
        status = time_index_maybe_append(state[TIME_INDEX:STATE_SIZE], time_index, base, state[MAX_TIMESTAMP],
                                         state[OFFSET_OF_MAX], False)
        if status > UNCHANGED:
            return TIME_INDEX_ERROR, status
        state[BYTES_SINCE_INDEX] = 0
    state[BYTES_SINCE_INDEX] += nbytes
    state[NEXT_OFFSET] = largest_offset + 1
    state[NEXT_KNOWN] = 1
    return OK, 0


@njit(cache=True, nogil=True)
def should_roll(state, max_segment_bytes, max_segment_ms, messages_size, max_timestamp_in_messages,
                max_offset_in_messages, now_ms):
    """Kafka's roll rule (LogSegment.should_roll): ROLL, OK, or NOT_READY when the first
    batch's timestamp or an index is not loaded yet."""
    size = state[SIZE]
    if size > max_segment_bytes - messages_size:
        return ROLL
    if size > 0:
        if not state[ROLLING_KNOWN]:
            return NOT_READY
        start = state[ROLLING_TIMESTAMP]
        waited = max_timestamp_in_messages - start if start >= 0 else now_ms - state[CREATED_MS]
        if waited > max_segment_ms - state[ROLL_JITTER]:
            return ROLL
    if not state[OFFSET_INDEX + LOADED] or not state[TIME_INDEX + LOADED]:
        return NOT_READY
    if state[OFFSET_INDEX + ENTRIES] >= state[OFFSET_INDEX + MAX_ENTRIES]:
        return ROLL
    if state[TIME_INDEX + ENTRIES] >= state[TIME_INDEX + MAX_ENTRIES] - 1:
        return ROLL
    relative = max_offset_in_messages - state[BASE_OFFSET]
    return ROLL if relative < 0 or relative > MAX_RELATIVE_OFFSET else OK


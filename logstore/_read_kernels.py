"""numba kernels of the read path: walks over batch headers by their size fields, compiled so
that finding where a fetch starts and ends costs no Python per batch.

`find_batch` is LogSegment.translate_offset's walk (Kafka's FileRecords.searchForOffsetWithSize)
over a chunk of the `.log` file; `whole_batches` finds the end of the whole batches a fetch
returns (Log.read's bytes and zero-copy slices alike), the offset after them and the batch
that follows. Entries of any magic are walked:
magic 2 batches end at base offset + last offset delta, legacy entries at their offset field.
What they cannot decide (an impossible header, bytes they were not given) they report, so the
caller reads more or lets the Python scan raise the error with the file's name and position.
"""

from __future__ import annotations

from numba import njit

from logstore.records.header import (
    HEADER_SIZE_UP_TO_MAGIC,
    LAST_OFFSET_DELTA_OFFSET,
    LEGACY_MIN_MESSAGE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MIN_V2_BATCH_LENGTH,
    RECORD_OVERHEAD_V0,
    SIZE_OFFSET,
)

# find_batch() statuses.
FOUND = 0  # (position, last offset, size) of the batch holding the target
MORE = 1  # the buffer ends before the header at `position`: read on from there
PAST_END = 2  # no complete batch from there on holds the target (the file's end or a torn tail)
CORRUPT = 3  # an impossible size or magic at `position`

NO_MAX_OFFSET = (1 << 63) - 1  # whole_batches() max_offset of a read bounded by bytes only

_V2_LAST_OFFSET_END = LAST_OFFSET_DELTA_OFFSET + 4  # bytes of a v2 header up to its last offset delta
_LEGACY_V0_MIN = LEGACY_MIN_MESSAGE[0]
_LEGACY_V1_MIN = LEGACY_MIN_MESSAGE[1]


@njit(cache=True, nogil=True, inline="always")
def _int(buf, pos, size):
    """Big-endian signed integer of `size` bytes at `pos`."""
    value = 0
    for i in range(size):
        value = (value << 8) | buf[pos + i]
    sign = 1 << (8 * size - 1)
    return (value ^ sign) - sign


@njit(cache=True, nogil=True, inline="always")
def _entry_size(buf, pos):
    """The entry's size with its offset and size fields, or -1 when its size field or magic
    (if in `buf`) is impossible for its format."""
    size_field = _int(buf, pos + SIZE_OFFSET, 4)
    if size_field < RECORD_OVERHEAD_V0:
        return -1
    if pos + MAGIC_OFFSET < len(buf):
        magic = buf[pos + MAGIC_OFFSET]
        if magic > 2 or (magic == 2 and size_field < MIN_V2_BATCH_LENGTH) or \
                (magic == 1 and size_field < _LEGACY_V1_MIN) or (magic == 0 and size_field < _LEGACY_V0_MIN):
            return -1
    return size_field + LOG_OVERHEAD


@njit(cache=True, nogil=True, inline="always")
def _last_offset(buf, pos):
    """Last offset of the entry at `pos` (its header in `buf`)."""
    base = _int(buf, pos, 8)
    if buf[pos + MAGIC_OFFSET] == 2:
        return base + _int(buf, pos + LAST_OFFSET_DELTA_OFFSET, 4)
    return base


@njit(cache=True, nogil=True)
def find_batch(buf, end, target):
    """The first entry of `buf` (a chunk of a file holding `end` bytes from the chunk's start)
    whose last offset is >= `target`: (status, position, last offset, size)."""
    position = 0
    while position + HEADER_SIZE_UP_TO_MAGIC < end:
        if position + HEADER_SIZE_UP_TO_MAGIC > len(buf):
            return MORE, position, 0, 0
        size = _entry_size(buf, position)
        if size < 0:
            return CORRUPT, position, 0, 0
        if position > end - size:
            return PAST_END, position, 0, 0
        if buf[position + MAGIC_OFFSET] == 2 and position + _V2_LAST_OFFSET_END > len(buf):
            return MORE, position, 0, 0
        last = _last_offset(buf, position)
        if last >= target:
            return FOUND, position, last, size
        position += size
    return PAST_END, position, 0, 0


@njit(cache=True, nogil=True, inline="always")
def _header_in(buf, pos):
    """Whether `buf` holds the entry header at `pos` as far as a walk reads it: up to the magic,
    and for a v2 batch up to its last offset delta."""
    if pos + MAGIC_OFFSET >= len(buf):
        return False
    return buf[pos + MAGIC_OFFSET] != 2 or pos + _V2_LAST_OFFSET_END <= len(buf)


@njit(cache=True, nogil=True)
def whole_batches(buf, start, limit, max_offset):
    """The entries from byte `start` of `buf` that end by byte `limit` and whose last offsets are
    below `max_offset`, and the entry after them: (end, next offset, following last offset,
    following size). `end` is the position after the last such entry, `next offset` its last
    offset + 1 (-1 when there is none); the following entry's last offset and size come from
    its header, else -1. Only headers are read: `buf` holds the entries' bytes (a read) or just
    a chunk from the start of the file range (a zero-copy slice), and the walk stops where the
    next header is not in `buf` (the caller reads on from `end`) or is impossible (-1 for the
    following entry): a read from there raises, as a consumer finds it."""
    position, next_offset = start, -1
    while position + LOG_OVERHEAD <= limit and _header_in(buf, position):
        size = _entry_size(buf, position)
        if size < 0:
            return position, next_offset, -1, -1
        last = _last_offset(buf, position)
        if position + size > limit or last >= max_offset:
            return position, next_offset, last, size
        next_offset = last + 1
        position += size
    if _header_in(buf, position):
        size = _entry_size(buf, position)
        if size > 0:
            return position, next_offset, _last_offset(buf, position), size
    return position, next_offset, -1, -1

"""SegmentState: a segment's append state (size, index spacing, largest timestamp, roll age,
descriptor, index counters) kept in one int64 array, so the compiled append and roll rule
(logstore._segment_kernels) read and move it in place; these properties are its Python face."""

from __future__ import annotations

import numpy as np

from index import NO_TIMESTAMP, TimestampOffset
from logstore import _segment_kernels as slots


class SegmentState:
    """The append state of one segment; `array` is what the kernels take."""

    __slots__ = ("array",)

    def __init__(self, base_offset: int, *, writable: bool) -> None:
        """A state with nothing loaded: size 0, no descriptor, largest timestamp and first
        batch timestamp unknown."""
        self.array = np.zeros(slots.STATE_SIZE, np.int64)
        self.array[slots.FD] = -1
        self.array[slots.BASE_OFFSET] = base_offset
        self.array[slots.WRITABLE] = writable

    @property
    def offset_index_counters(self) -> np.ndarray:
        """The slice the offset index keeps its counters in."""
        return self.array[slots.OFFSET_INDEX : slots.TIME_INDEX]

    @property
    def time_index_counters(self) -> np.ndarray:
        """The slice the time index keeps its counters in."""
        return self.array[slots.TIME_INDEX : slots.STATE_SIZE]

    @property
    def writable(self) -> bool:
        """False once closed, or when opened read-only: the kernels then append nothing."""
        return bool(self.array[slots.WRITABLE])

    @writable.setter
    def writable(self, writable: bool) -> None:
        self.array[slots.WRITABLE] = writable

    @property
    def size(self) -> int:
        """Bytes in the `.log` file."""
        return int(self.array[slots.SIZE])

    @size.setter
    def size(self, size: int) -> None:
        self.array[slots.SIZE] = size

    @property
    def created_ms(self) -> int:
        """Clock time the segment was created or last truncated to empty."""
        return int(self.array[slots.CREATED_MS])

    @created_ms.setter
    def created_ms(self, ms: int) -> None:
        self.array[slots.CREATED_MS] = ms

    @property
    def index_interval_bytes(self) -> int:
        """Bytes appended between two index entries."""
        return int(self.array[slots.INDEX_INTERVAL])

    @index_interval_bytes.setter
    def index_interval_bytes(self, interval: int) -> None:
        self.array[slots.INDEX_INTERVAL] = interval

    @property
    def roll_jitter_ms(self) -> int:
        """What the roll age is shortened by."""
        return int(self.array[slots.ROLL_JITTER])

    @roll_jitter_ms.setter
    def roll_jitter_ms(self, jitter: int) -> None:
        self.array[slots.ROLL_JITTER] = jitter

    @property
    def bytes_since_index(self) -> int:
        """Bytes appended since the last index entry."""
        return int(self.array[slots.BYTES_SINCE_INDEX])

    @bytes_since_index.setter
    def bytes_since_index(self, size: int) -> None:
        self.array[slots.BYTES_SINCE_INDEX] = size

    @property
    def fd(self) -> int | None:
        """The `.log` file's descriptor, None while not open."""
        fd = int(self.array[slots.FD])
        return None if fd < 0 else fd

    @fd.setter
    def fd(self, fd: int | None) -> None:
        self.array[slots.FD] = -1 if fd is None else fd

    @property
    def rolling_timestamp(self) -> int | None:
        """The first batch's max timestamp (the roll age starts there), None until known."""
        array = self.array
        return int(array[slots.ROLLING_TIMESTAMP]) if array[slots.ROLLING_KNOWN] else None

    @rolling_timestamp.setter
    def rolling_timestamp(self, timestamp: int | None) -> None:
        self.array[slots.ROLLING_KNOWN] = timestamp is not None
        self.array[slots.ROLLING_TIMESTAMP] = NO_TIMESTAMP if timestamp is None else timestamp

    @property
    def largest(self) -> TimestampOffset | None:
        """The largest batch max timestamp and its batch's last offset, None until known."""
        array = self.array
        if not array[slots.MAX_KNOWN]:
            return None
        return TimestampOffset(int(array[slots.MAX_TIMESTAMP]), int(array[slots.OFFSET_OF_MAX]))

    @largest.setter
    def largest(self, largest: TimestampOffset | None) -> None:
        self.array[slots.MAX_KNOWN] = largest is not None
        if largest is not None:
            self.array[slots.MAX_TIMESTAMP], self.array[slots.OFFSET_OF_MAX] = largest

    @property
    def next_offset(self) -> int | None:
        """The last appended offset + 1, None until known."""
        array = self.array
        return int(array[slots.NEXT_OFFSET]) if array[slots.NEXT_KNOWN] else None

    @next_offset.setter
    def next_offset(self, offset: int | None) -> None:
        self.array[slots.NEXT_KNOWN] = offset is not None
        if offset is not None:
            self.array[slots.NEXT_OFFSET] = offset

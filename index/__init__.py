"""Sparse on-disk indexes of a segment: the offset index (8-byte entries) and the time index (12-byte entries)."""

from index.base import AbstractIndex
from index.offset_index import OffsetIndex, OffsetPosition
from index.time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset

__all__ = [
    "NO_TIMESTAMP",
    "AbstractIndex",
    "OffsetIndex",
    "OffsetPosition",
    "TimeIndex",
    "TimestampOffset",
]

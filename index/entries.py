"""The entry layouts of the offset and time indexes (docs/FORMAT.md ".index" and ".timeindex"),
declared once as (field, struct code) and offered as a struct, a packed numpy dtype and the
sizes the compiled appends use. The first field is the one an index is searched by."""

from __future__ import annotations

import struct

import numpy as np


def _layout(fields: tuple[tuple[str, str], ...]) -> tuple[struct.Struct, np.dtype]:
    """A big-endian struct and the matching packed numpy dtype of `fields`."""
    return (struct.Struct(">" + "".join(code for _, code in fields)),
            np.dtype([(name, ">" + code) for name, code in fields]))


# int32 offset relative to the segment's base offset, int32 byte position in the .log.
OFFSET_INDEX_ENTRY, OFFSET_INDEX_DTYPE = _layout((("relative_offset", "i"), ("position", "i")))
# int64 timestamp, int32 offset relative to the segment's base offset.
TIME_INDEX_ENTRY, TIME_INDEX_DTYPE = _layout((("timestamp", "q"), ("relative_offset", "i")))

OFFSET_ENTRY_SIZE = OFFSET_INDEX_ENTRY.size  # 8
TIME_ENTRY_SIZE = TIME_INDEX_ENTRY.size  # 12
RELATIVE_OFFSET_WIDTH = OFFSET_INDEX_DTYPE["relative_offset"].itemsize  # 4
# Both layouts end in an int32 (a position, a relative offset).
VALUE_WIDTH = OFFSET_INDEX_DTYPE["position"].itemsize  # 4
TIMESTAMP_WIDTH = TIME_INDEX_DTYPE["timestamp"].itemsize  # 8

"""RecordColumns: one batch's decoded records as numpy arrays, the shape the kernels fill and
Arrow reads without copying."""

from __future__ import annotations

import numpy as np

from logstore.records.record import Record


class RecordColumns:
    """Decoded records of one batch as numpy arrays: Arrow-style (data, int32 offsets, null
    flags) for keys, values and the flattened headers; ``headers_offsets`` gives each
    record's range of headers."""

    __slots__ = ("offset", "timestamp", "key_data", "key_offsets", "key_null", "value_data",
                 "value_offsets", "value_null", "headers_offsets", "header_key_data",
                 "header_key_offsets", "header_value_data", "header_value_offsets",
                 "header_value_null")

    def __init__(self, offset: np.ndarray, timestamp: np.ndarray, keys: tuple, values: tuple,
                 headers: tuple):
        self.offset = offset
        self.timestamp = timestamp
        self.key_data, self.key_offsets, self.key_null = keys
        self.value_data, self.value_offsets, self.value_null = values
        (self.headers_offsets, self.header_key_offsets, self.header_key_data,
         self.header_value_offsets, self.header_value_data, self.header_value_null) = headers

    @classmethod
    def from_records(cls, records: list[Record]) -> RecordColumns:
        """Columns for records decoded in Python (legacy messages)."""
        n = len(records)
        keys = _pack([r.key for r in records])
        values = _pack([r.value for r in records])
        pairs = [pair for r in records for pair in r.headers]
        list_offsets = np.zeros(n + 1, np.int32)
        np.cumsum([len(r.headers) for r in records], out=list_offsets[1:])
        header_keys = _pack([k.encode() for k, _ in pairs])
        header_values = _pack([v for _, v in pairs])
        return cls(np.array([r.offset for r in records], np.int64),
                   np.array([r.timestamp for r in records], np.int64), keys, values,
                   (list_offsets, header_keys[1], header_keys[0], header_values[1],
                    header_values[0], header_values[2]))


def _pack(items: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data, int32 offsets, null flags) for a list of bytes or None."""
    lengths = np.array([-1 if x is None else len(x) for x in items], np.int64)
    offsets = np.zeros(len(items) + 1, np.int32)
    np.cumsum(np.maximum(lengths, 0), out=offsets[1:])
    data = np.frombuffer(b"".join(x for x in items if x), np.uint8)
    return data, offsets, lengths < 0



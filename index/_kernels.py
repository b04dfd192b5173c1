"""Numba kernels for index searches over the raw big-endian bytes of a mapped index file.

numpy's searchsorted copies a byte-swapped, strided field view on every call (O(n)), so the
binary search reads the big-endian fields straight from the mapped bytes instead.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
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

"""numba kernel for the segment reader: hashing every key slice (compaction's MurmurHash3)."""

from __future__ import annotations

import numpy as np
from numba import njit

from compaction._kernels import murmur3_128


@njit(cache=True)
def murmur3_x64_128(data, offsets, valid):
    """MurmurHash3 x64_128 (seed 0) words of each slice data[offsets[i]:offsets[i+1]].

    Returns (h1, h2) uint64 arrays equal to ``mmh3.hash64(key, signed=False)``; rows where
    ``valid`` is false get (0, 0).
    """
    n = offsets.shape[0] - 1
    out1 = np.zeros(n, dtype=np.uint64)
    out2 = np.zeros(n, dtype=np.uint64)
    for row in range(n):
        if valid[row]:
            out1[row], out2[row] = murmur3_128(data, offsets[row], offsets[row + 1] - offsets[row])
    return out1, out2

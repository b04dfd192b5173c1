"""numba kernels for the segment reader: loops numpy cannot vectorise (key hashing)."""

from __future__ import annotations

import numpy as np
from numba import njit

_C1 = np.uint64(0x87C37B91114253D5)
_C2 = np.uint64(0x4CF5AD432745937F)
_FMIX1 = np.uint64(0xFF51AFD7ED558CCD)
_FMIX2 = np.uint64(0xC4CEB9FE1A85EC53)
_M1 = np.uint64(0x52DCE729)
_M2 = np.uint64(0x38495AB5)
_FIVE = np.uint64(5)


@njit(cache=True, inline="always")
def _rotl(x, r):
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@njit(cache=True, inline="always")
def _fmix(k):
    k ^= k >> np.uint64(33)
    k *= _FMIX1
    k ^= k >> np.uint64(33)
    k *= _FMIX2
    k ^= k >> np.uint64(33)
    return k


@njit(cache=True, inline="always")
def _load_le64(data, at):
    v = np.uint64(0)
    for i in range(8):
        v |= np.uint64(data[at + i]) << np.uint64(8 * i)
    return v


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
        if not valid[row]:
            continue
        start = offsets[row]
        length = offsets[row + 1] - start
        h1 = np.uint64(0)
        h2 = np.uint64(0)
        nblocks = length // 16
        for b in range(nblocks):
            at = start + b * 16
            k1 = _load_le64(data, at)
            k2 = _load_le64(data, at + 8)
            k1 *= _C1
            k1 = _rotl(k1, 31)
            k1 *= _C2
            h1 ^= k1
            h1 = _rotl(h1, 27)
            h1 += h2
            h1 = h1 * _FIVE + _M1
            k2 *= _C2
            k2 = _rotl(k2, 33)
            k2 *= _C1
            h2 ^= k2
            h2 = _rotl(h2, 31)
            h2 += h1
            h2 = h2 * _FIVE + _M2
        tail = start + nblocks * 16
        rest = length & 15
        k1 = np.uint64(0)
        k2 = np.uint64(0)
        if rest > 8:
            for i in range(rest - 1, 7, -1):
                k2 ^= np.uint64(data[tail + i]) << np.uint64(8 * (i - 8))
            k2 *= _C2
            k2 = _rotl(k2, 33)
            k2 *= _C1
            h2 ^= k2
        if rest > 0:
            for i in range(min(rest, 8) - 1, -1, -1):
                k1 ^= np.uint64(data[tail + i]) << np.uint64(8 * i)
            k1 *= _C1
            k1 = _rotl(k1, 31)
            k1 *= _C2
            h1 ^= k1
        h1 ^= np.uint64(length)
        h2 ^= np.uint64(length)
        h1 += h2
        h2 += h1
        h1 = _fmix(h1)
        h2 = _fmix(h2)
        h1 += h2
        h2 += h1
        out1[row] = h1
        out2[row] = h2
    return out1, out2

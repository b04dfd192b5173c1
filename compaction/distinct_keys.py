"""DistinctKeys: an exact count of distinct 128-bit key hashes in bounded memory.

In memory while the keys fit a table of `memory_keys` (an OffsetMap that doubles); past that,
every hash goes to one of 64 bucket files on scratch disk by 6 bits of its second word (the
table places keys by the first, so a bucket's keys still spread over a table), and the buckets
are counted one at a time, each the same way on the next 6 bits. Buckets hold disjoint
keys, so their counts add up to the exact total.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from types import TracebackType

import numpy as np

from compaction import _kernels
from compaction.offset_map import BYTES_PER_SLOT, MIN_WORKING_SLOTS, OffsetMap

FANOUT_BITS = 6
_FANOUT = 1 << FANOUT_BITS
_MAX_LEVEL = 64 // FANOUT_BITS - 1  # deeper levels would run out of h2 bits: they never spill
_BLOCK = 1 << 16  # slots moved, or spilled records read back, at a time
MEMORY_KEYS = 1 << 20  # keys held in memory before spilling (a table of about 28 MiB)


class DistinctKeys:
    """Counts distinct (h1, h2) key hashes exactly; memory stays within about 80 bytes times
    `memory_keys` whatever the count, beyond which the hashes spill to `spill_dir` (default:
    the temp dir). Use as a context manager, or `close()` it, to remove spilled files; read
    `size` before."""

    LOAD_FACTOR = 0.75

    def __init__(self, *, memory_keys: int = MEMORY_KEYS, spill_dir: str | None = None,
                 initial_keys: int = 1 << 14, _level: int = 0) -> None:
        self._memory_keys = max(int(memory_keys), MIN_WORKING_SLOTS)
        self._spill_dir = spill_dir
        self._level = _level
        self._map: OffsetMap | None = self._new_map(min(max(int(initial_keys), MIN_WORKING_SLOTS),
                                                        self._memory_keys))
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._buckets: list[Path] = []
        self._counted: int | None = None

    def _new_map(self, keys: int) -> OffsetMap:
        return OffsetMap(memory=BYTES_PER_SLOT * int(keys / self.LOAD_FACTOR) + BYTES_PER_SLOT,
                         load_factor=self.LOAD_FACTOR)

    @property
    def spilled(self) -> bool:
        """True once the hashes went to disk."""
        return self._tmp is not None

    @property
    def size(self) -> int:
        """The distinct keys added so far."""
        if self._map is not None:
            return self._map.size
        if self._counted is None:
            self._counted = self._count_buckets()
        return self._counted

    def add(self, h1: np.ndarray, h2: np.ndarray, valid: np.ndarray | None = None) -> None:
        """Count the keys (h1, h2) where `valid` (default: every row)."""
        if valid is not None:
            h1, h2 = h1[valid], h2[valid]
        if self._map is None:
            self._spill(h1, h2)
            return
        n = len(h1)
        zeros = np.zeros(n, np.int64)
        done = 0
        while done < n:
            done += self._map.put_hashes(h1[done:], h2[done:], zeros[done:])
            if done == n:
                break
            if 2 * self._map.max_keys > self._memory_keys and self._level < _MAX_LEVEL:
                self._start_spilling()
                self._spill(h1[done:], h2[done:])
                return
            self._grow()

    def _held_blocks(self, old: OffsetMap):
        for lo in range(0, len(old._rel), _BLOCK):
            block = slice(lo, lo + _BLOCK)
            held = old._rel[block] != _kernels.EMPTY_SLOT
            yield old._h1[block][held], old._h2[block][held]

    def _grow(self) -> None:
        """Double the table, moving the keys over a block of slots at a time (no full copy)."""
        old = self._map
        self._map = self._new_map(2 * old.max_keys)
        for h1, h2 in self._held_blocks(old):
            self._map.put_hashes(h1, h2, np.zeros(len(h1), np.int64))

    def _start_spilling(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="logstore-keys-", dir=self._spill_dir)
        self._buckets = [Path(self._tmp.name) / f"{b:02d}" for b in range(_FANOUT)]
        old, self._map = self._map, None
        for h1, h2 in self._held_blocks(old):
            self._spill(h1, h2)

    def _spill(self, h1: np.ndarray, h2: np.ndarray) -> None:
        """Append the hashes to their bucket files (by 6 bits of h2 for this level)."""
        self._counted = None
        if not len(h1):
            return
        shift = np.uint64(64 - FANOUT_BITS * (self._level + 1))
        bucket = ((h2 >> shift) & np.uint64(_FANOUT - 1)).astype(np.int64)
        order = np.argsort(bucket, kind="stable")
        pairs = np.empty((len(h1), 2), np.uint64)
        pairs[:, 0] = h1[order]
        pairs[:, 1] = h2[order]
        bounds = np.searchsorted(bucket[order], np.arange(_FANOUT + 1))
        for b in np.flatnonzero(np.diff(bounds)).tolist():
            with open(self._buckets[b], "ab") as f:
                f.write(pairs[bounds[b]:bounds[b + 1]].tobytes())

    def _count_buckets(self) -> int:
        total = 0
        for path in self._buckets:
            if not path.exists():
                continue
            with DistinctKeys(memory_keys=self._memory_keys, spill_dir=self._tmp.name,
                              _level=self._level + 1) as sub, open(path, "rb") as src:
                while True:
                    block = np.fromfile(src, np.uint64, count=2 * _BLOCK).reshape(-1, 2)
                    if not len(block):
                        break
                    sub.add(np.ascontiguousarray(block[:, 0]), np.ascontiguousarray(block[:, 1]))
                total += sub.size
        return total

    def close(self) -> None:
        """Remove the spilled files (read `size` first)."""
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> DistinctKeys:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

"""OffsetMap: key hash -> latest offset, the cleaner's bounded dedupe buffer (Kafka's SkimpyOffsetMap).

Each slot holds the key's 128-bit MurmurHash3 (two uint64) and the offset as a uint32 relative
to the map's base offset (plus one, so zeroed memory is an empty map): 20 bytes a slot, so at the default load factor of 0.9 a key costs
22.2 bytes. Open addressing with linear probing, in numba kernels (compaction/_kernels.py).
"""

from __future__ import annotations

import mmh3
import numpy as np

from compaction import _kernels
from logstore.errors import InvalidConfigError

BYTES_PER_SLOT = 8 + 8 + 4  # hash high/low words + relative offset
MAX_SLOT_RELATIVE_OFFSET = 0xFFFFFFFE  # slots store relative offset + 1; 0 marks an empty slot
MIN_WORKING_SLOTS = 1024
_NO_SLOTS = np.empty(0, np.int64)  # the kernels' "no slots given"


def hash_key(key: bytes) -> tuple[int, int]:
    """The (h1, h2) 128-bit MurmurHash3 of a key, as the map stores it (mmh3.hash64, unsigned)."""
    return mmh3.hash64(key, 0, True, signed=False)


class OffsetMap:
    """A fixed-memory map from key hash to the latest offset seen for it.

    `memory` bytes (log.cleaner.dedupe.buffer.size / log.cleaner.threads) are split into
    20-byte slots; at most `slots * load_factor` keys are taken before the map reports full.
    """

    def __init__(self, memory: int = 128 * 1024 * 1024, load_factor: float = 0.9) -> None:
        slots = int(memory) // BYTES_PER_SLOT
        if not 0.0 < load_factor <= 1.0:
            raise InvalidConfigError(f"log.cleaner.io.buffer.load.factor: {load_factor} is not in (0, 1]")
        max_keys = int(slots * load_factor)
        if max_keys < 1:
            raise InvalidConfigError(
                f"log.cleaner.dedupe.buffer.size: {memory} bytes cannot hold a single key "
                f"({BYTES_PER_SLOT} bytes a slot at load factor {load_factor})"
            )
        self.slots = slots
        self.load_factor = load_factor
        self.max_keys = max_keys
        self._h1_all = np.zeros(slots, dtype=np.uint64)
        self._h2_all = np.zeros(slots, dtype=np.uint64)
        self._rel_all = np.zeros(slots, dtype=np.uint32)  # untouched pages until used
        self._h1, self._h2, self._rel = self._h1_all, self._h2_all, self._rel_all
        self.size = 0
        self.base_offset = 0
        self.latest_offset = -1

    @property
    def memory_bytes(self) -> int:
        """Bytes held by the slot arrays."""
        return self.slots * BYTES_PER_SLOT

    @property
    def bytes_per_key(self) -> float:
        """Memory per key when the map is as full as the load factor allows."""
        return self.memory_bytes / self.max_keys

    @property
    def full(self) -> bool:
        """True once the map holds max_keys keys (the next put would be refused)."""
        return self.size >= self.max_keys

    def utilization(self) -> float:
        """Fraction of the slots in use (Kafka's buffer utilization metric)."""
        return self.size / self.slots

    def clear(self, base_offset: int = 0, *, expected_keys: int | None = None) -> None:
        """Empty the map; offsets put next must lie in [base_offset, base_offset + 2**32 - 2].

        `expected_keys` (an upper bound on the distinct keys the next puts hold) lets the map
        probe a smaller table, kept at most half full, for cache locality; the key limit
        (`max_keys`) and what the map answers do not change.
        """
        used = self.slots
        if expected_keys is not None:
            used = min(self.slots, max(2 * int(expected_keys), MIN_WORKING_SLOTS))
        self._h1 = self._h1_all[:used]
        self._h2 = self._h2_all[:used]
        self._rel = self._rel_all[:used]
        self._rel.fill(_kernels.EMPTY_SLOT)
        self.size = 0
        self.base_offset = int(base_offset)
        self.latest_offset = -1

    def put(self, key: bytes, offset: int) -> bool:
        """Map `key` to `offset`; False (nothing stored) when the map is full."""
        h1, h2 = hash_key(key)
        return self.put_hashes(
            np.array([h1], dtype=np.uint64), np.array([h2], dtype=np.uint64),
            np.array([offset], dtype=np.int64),
        ) == 1

    def put_hashes(self, h1: np.ndarray, h2: np.ndarray, offsets: np.ndarray,
                   valid: np.ndarray | None = None, slots: np.ndarray | None = None) -> int:
        """Insert rows in order until the map is full; returns the rows consumed.

        Rows with valid == False are skipped (still consumed). Like Kafka, a put is refused
        once size >= max_keys even for a key already present. `slots` (int64, one per row),
        when given, receives the slot each row was put in (rows not put are left alone):
        `get_hashes` then reads those rows' offsets without probing.
        """
        if valid is None:
            valid = np.ones(len(offsets), dtype=np.bool_)
        consumed, size, last = _kernels.map_put(
            self._h1, self._h2, self._rel, self.size, self.max_keys,
            h1, h2, offsets, np.int64(self.base_offset), valid, _NO_SLOTS if slots is None else slots,
        )
        self.size = int(size)
        if last >= 0:
            self.latest_offset = int(last)
        return int(consumed)

    def get(self, key: bytes) -> int:
        """The offset mapped for `key`, or -1."""
        h1, h2 = hash_key(key)
        return int(self.get_hashes(np.array([h1], dtype=np.uint64), np.array([h2], dtype=np.uint64))[0])

    def get_hashes(self, h1: np.ndarray, h2: np.ndarray, slots: np.ndarray | None = None) -> np.ndarray:
        """Vector lookup: int64 array of mapped offsets, -1 where absent. `slots` are the rows'
        slots from `put_hashes` since the last `clear` (-1: look the row up)."""
        out = np.empty(len(h1), dtype=np.int64)
        _kernels.map_get(self._h1, self._h2, self._rel, h1, h2, np.int64(self.base_offset), out,
                         _NO_SLOTS if slots is None else slots)
        return out

    def update_latest_offset(self, offset: int) -> None:
        """Record the last offset the map covers (Kafka's updateLatestOffset)."""
        self.latest_offset = int(offset)

    def fits(self, offset: int) -> bool:
        """True when `offset` lies in the map's 32-bit relative-offset window."""
        return 0 <= offset - self.base_offset <= MAX_SLOT_RELATIVE_OFFSET


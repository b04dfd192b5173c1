"""CRC-32C (Castagnoli) for v2 batches and CRC-32 for legacy messages.

The ``crc32c`` package was picked over ``google-crc32c`` by measurement on this machine
(hardware SSE4.2 both): 1,000-byte buffers 9.4 GB/s vs 6.6 GB/s, 120 kB buffers 28 vs
29.5 GB/s, 64 bytes 83 vs 81 ns per call; ``crc32c`` also takes any buffer (memoryview,
numpy) without a copy.
"""

from __future__ import annotations

import zlib

# crc32c(data, value=0): the CRC-32C of a bytes-like `data` (continuing from `value`) as an
# unsigned int. The package's C function itself: no Python frame on the append path.
from crc32c import crc32c as crc32c


def crc32(data, value: int = 0) -> int:
    """Return the CRC-32 (zlib polynomial) of ``data``, as legacy magic 0/1 messages use."""
    return zlib.crc32(data, value)

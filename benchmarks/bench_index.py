"""Offset-index lookups on a mapped 100,000-entry index, next to `bisect` over a Python list.

The baseline keeps the same keys in a list in memory (no file, no decoding), the floor for a
binary search from Python; ours searches the big-endian bytes of the mapped index file.
"""

from __future__ import annotations

import bisect
import random

from index import OffsetIndex, TimeIndex

N_ENTRIES = 100_000
N_LOOKUPS = 1_000
BASE = 1_000_000
GROUP = "index lookup, 100k entries"


def extra(benchmark, role: str) -> None:
    benchmark.group = GROUP
    benchmark.extra_info.update(items=N_LOOKUPS, unit="lookups", role=role)


def targets() -> list[int]:
    rng = random.Random(7)
    return [BASE + rng.randrange(N_ENTRIES * 10) for _ in range(N_LOOKUPS)]


def test_offset_index_lookup(benchmark, tmp_path):
    idx = OffsetIndex(tmp_path / "x.index", BASE, N_ENTRIES * 8)
    for i in range(N_ENTRIES):
        idx.append(BASE + i * 10 + 3, i * 4096)
    wanted = targets()
    extra(benchmark, "ours")

    def run():
        lookup = idx.lookup
        return [lookup(t).position for t in wanted]

    assert len(benchmark(run)) == N_LOOKUPS
    idx.close()


def test_time_index_lookup(benchmark, tmp_path):
    idx = TimeIndex(tmp_path / "x.timeindex", BASE, (N_ENTRIES + 1) * 12)
    for i in range(N_ENTRIES):
        idx.maybe_append(BASE + i * 10 + 3, BASE + i)
    wanted = targets()
    extra(benchmark, "ours")

    def run():
        lookup = idx.lookup
        return [lookup(t).offset for t in wanted]

    assert len(benchmark(run)) == N_LOOKUPS
    idx.close()


def test_bisect_over_a_list(benchmark):
    keys = [BASE + i * 10 + 3 for i in range(N_ENTRIES)]
    positions = [i * 4096 for i in range(N_ENTRIES)]
    wanted = targets()
    extra(benchmark, "baseline")

    def run():
        out = []
        for t in wanted:
            slot = bisect.bisect_right(keys, t) - 1
            out.append(positions[slot] if slot >= 0 else 0)
        return out

    assert len(benchmark(run)) == N_LOOKUPS

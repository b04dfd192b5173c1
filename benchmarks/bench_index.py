"""Offset-index lookups on a mapped 100,000-entry index, next to `bisect` over a Python list;
and the first appends into a new (preallocated, sparse) index, next to writing the same bytes.

The lookup baseline keeps the same keys in a list in memory (no file, no decoding), the floor
for a binary search from Python; ours searches the big-endian bytes of the mapped index file.
The append baseline writes the entries' bytes to a new file and fsyncs it; ours creates the
10 MiB preallocated index, appends, trims and msyncs it, as a cleaned segment's index does.
"""

from __future__ import annotations

import bisect
import itertools
import os
import random
import struct

from index import OffsetIndex, TimeIndex

N_ENTRIES = 100_000
N_LOOKUPS = 1_000
BASE = 1_000_000
GROUP = "index lookup, 100k entries"
# One offset-index entry per 256 KiB chunk of a ~32 MiB cleaned segment (bench_compaction).
NEW_INDEX_ENTRIES = 133
NEW_INDEX_GROUP = f"new index, {NEW_INDEX_ENTRIES} appends then flush"
MAX_INDEX_SIZE = 10 * 1024 * 1024


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


def _fresh_dirs(tmp_path):
    counter = itertools.count()

    def setup():
        directory = tmp_path / str(next(counter))
        directory.mkdir()
        return (directory,), {}

    return setup


def test_new_offset_index_appends(benchmark, tmp_path):
    benchmark.group = NEW_INDEX_GROUP
    benchmark.extra_info.update(items=NEW_INDEX_ENTRIES, unit="records", role="ours")

    def run(directory):
        index = OffsetIndex(directory / "00000000000000000000.index", 0, MAX_INDEX_SIZE)
        for i in range(NEW_INDEX_ENTRIES):
            index.append(i + 1, i * 262_144)
        index.trim_to_valid_size()
        index.flush()
        index.close()

    benchmark.pedantic(run, setup=_fresh_dirs(tmp_path), rounds=30)


def test_new_file_write_and_fsync(benchmark, tmp_path):
    benchmark.group = NEW_INDEX_GROUP
    benchmark.extra_info.update(items=NEW_INDEX_ENTRIES, unit="records", role="baseline")
    data = b"".join(struct.pack(">ii", i + 1, i * 262_144) for i in range(NEW_INDEX_ENTRIES))

    def run(directory):
        fd = os.open(directory / "plain", os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)

    benchmark.pedantic(run, setup=_fresh_dirs(tmp_path), rounds=30)

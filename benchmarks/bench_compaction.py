"""Cleaner throughput next to the kernel's copy of the same bytes, plus offset-map bytes per key.

Four logs (100-byte and 10 KiB values; 10% and 90% of records superseded by a later record
with the same key), ~32 MiB each in one rolled segment (Kafka's default segment.bytes), all
cleanable (the active segment is empty). Each round cleans a fresh copy of the log with one
Cleaner (default 128 MiB offset map, allocated once as Kafka does); the baselines copy one file
of the same size in the kernel with copy_file_range (no byte through user space), alone and
followed by fsync (the cleaner fsyncs what it writes before the swap, as Kafka does). The
cleaner's CPU time per round is reported too (`make bench` prints the least).
Run: .venv/bin/python -m benchmarks.report -k compaction
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from compaction import OffsetMap
from compaction.cleaner import Cleaner
from logstore import Log
from logstore.clock import ManualClock
from logstore.records import build_batch_columnar

TOTAL_BYTES = 32 << 20
CONFIG = {"cleanup.policy": "compact", "file.delete.delay.ms": 0}  # Kafka's segment.bytes (1 GiB)
CASES = [(100, 0.1), (100, 0.9), (10240, 0.1), (10240, 0.9)]
NOW = 1_700_000_000_000


def _keys(n: int, dup: float, rng: np.random.Generator) -> np.ndarray:
    distinct = max(int(n * (1 - dup)), 1)
    keys = np.concatenate([np.arange(distinct), rng.integers(0, distinct, n - distinct)])
    rng.shuffle(keys)
    return keys


@pytest.fixture(scope="module")
def templates(tmp_path_factory):
    root = tmp_path_factory.mktemp("compaction-bench")
    out = {}
    for value_size, dup in CASES:
        per_batch = max(16384 // (value_size + 30), 1)
        n = TOTAL_BYTES // (value_size + 30)
        rng = np.random.default_rng(value_size + int(dup * 100))
        keys = _keys(n, dup, rng)
        value = bytes(rng.integers(0, 256, value_size, dtype=np.uint8))
        path = root / f"v{value_size}-d{int(dup * 100)}" / "bench-0"
        log = Log.open(path, CONFIG, clock=ManualClock(NOW))
        for i in range(0, n, per_batch):
            ks = [b"key-%012d" % k for k in keys[i:i + per_batch]]
            log.append(build_batch_columnar(ks, [value] * len(ks), timestamps=[NOW] * len(ks)))
        log.roll()
        size = sum(s.size for s in log.segments)
        log.close()
        blob = root / f"blob-{value_size}-{dup}"
        with open(blob, "wb") as f:
            f.write(np.random.default_rng(0).integers(0, 256, size, dtype=np.uint8).tobytes())
        out[(value_size, dup)] = (path, n, size, blob)
    return out


def _group(benchmark, value_size, dup, size, n, role):
    benchmark.group = f"compaction {value_size} B values, {int(dup * 100)}% duplicates"
    benchmark.extra_info.update(items=size, unit="bytes", role=role, records=n)


@pytest.mark.parametrize(("value_size", "dup"), CASES)
def test_cleaner_throughput(benchmark, templates, tmp_path, value_size, dup):
    src, n, size, _ = templates[(value_size, dup)]
    cleaner = Cleaner(CONFIG)
    state = {}

    def setup():
        if "log" in state:
            state["log"].close()
        dst = tmp_path / f"run{len(state)}" / "bench-0"
        shutil.rmtree(dst.parent, ignore_errors=True)
        shutil.copytree(src, dst)
        state["log"] = Log.open(dst, CONFIG, clock=ManualClock(NOW + 1000))
        return (state["log"],), {}

    cpu_ms: list[float] = []

    def clean(log):
        started = time.process_time()
        result = cleaner.clean(log)
        cpu_ms.append(round((time.process_time() - started) * 1e3, 1))
        return result

    _group(benchmark, value_size, dup, size, n, "ours")
    result = benchmark.pedantic(clean, setup=setup, rounds=5, iterations=1)
    # CPU time moves less than wall time when other jobs share the cores.
    benchmark.extra_info.update(records_removed=result.records_removed,
                                records_per_s=n / benchmark.stats.stats.mean,
                                cpu_ms_per_round=min(cpu_ms), cpu_ms_rounds=cpu_ms)
    assert result.records_removed > 0
    state["log"].close()


def copy_file_range(src: Path, dst: Path, fsync: bool = False) -> None:
    """Copy `src` to `dst` with os.copy_file_range (the kernel moves the bytes), then fsync the
    copy when asked: the durability the cleaner gives its output."""
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        left = os.fstat(fin.fileno()).st_size
        while left > 0:
            copied = os.copy_file_range(fin.fileno(), fout.fileno(), left)
            if copied == 0:
                break
            left -= copied
        if fsync:
            os.fsync(fout.fileno())


@pytest.mark.parametrize(("value_size", "dup"), CASES)
def test_copy_file_range(benchmark, templates, tmp_path, value_size, dup):
    _, n, size, blob = templates[(value_size, dup)]
    _group(benchmark, value_size, dup, size, n, "baseline")
    benchmark.pedantic(copy_file_range, args=(blob, tmp_path / "copy"), rounds=5, iterations=1)


@pytest.mark.parametrize(("value_size", "dup"), CASES)
def test_copy_file_range_with_fsync(benchmark, templates, tmp_path, value_size, dup):
    _, n, size, blob = templates[(value_size, dup)]
    _group(benchmark, value_size, dup, size, n, "baseline")
    benchmark.pedantic(copy_file_range, args=(blob, tmp_path / "copy", True), rounds=5, iterations=1)


def test_offset_map_bytes_per_key(benchmark):
    omap = OffsetMap()  # log.cleaner.dedupe.buffer.size default: 128 MiB, load factor 0.9
    n = 1_000_000
    rng = np.random.default_rng(1)
    h1 = rng.integers(0, 2**63, n, dtype=np.uint64)
    h2 = rng.integers(0, 2**63, n, dtype=np.uint64)
    offsets = np.arange(n, dtype=np.int64)

    def fill():
        omap.clear()
        return omap.put_hashes(h1, h2, offsets)

    benchmark.group = "offset map put, 1M keys"
    benchmark.extra_info.update(items=n, unit="records", role="ours", bytes_per_key=omap.bytes_per_key,
                                max_keys=omap.max_keys)
    assert benchmark(fill) == n
    assert omap.bytes_per_key <= 24

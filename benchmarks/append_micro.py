"""Per-append cost of `Log.append` beside `os.write` of the same bytes, min of N runs.

The pytest-benchmark group "append 16KiB batches" times 64 MiB rounds whose plain-write
baseline runs after gigabytes of earlier appends and shares the disk with their writeback,
so its ratio moves with the machine's load. This takes the minimum over alternating runs of
wall time and of process CPU time (which a busy shared machine disturbs least):

    python -m benchmarks.append_micro [--appends 5000] [--runs 9]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.bench_log import BATCHES, NOW
from logstore import Log
from logstore.clock import ManualClock


def _timed(loop: Callable[[], None]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    loop()
    return time.perf_counter() - wall, time.process_time() - cpu


def _ours(root: Path, data: bytes | bytearray, count: int) -> tuple[float, float]:
    shutil.rmtree(root, ignore_errors=True)
    log = Log.open(root / "bench-0", clock=ManualClock(NOW))
    log.append(data)  # an existing log, as in bench_log

    def loop() -> None:
        for _ in range(count):
            log.append(data)

    try:
        return _timed(loop)
    finally:
        log.close()


def _plain(root: Path, data: bytes, count: int) -> tuple[float, float]:
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    fd = os.open(root / "plain.log", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, data)

    def loop() -> None:
        for _ in range(count):
            os.write(fd, data)

    try:
        return _timed(loop)
    finally:
        os.close(fd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=5000, help="16 KiB appends per run (1 MiB: /64)")
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "data"
        for size, count in (("16KiB", args.appends), ("1MiB", max(args.appends // 64, 40))):
            raw = BATCHES[size]
            runs: dict[str, list[tuple[float, float]]] = {"write": [], "bytes": [], "bytearray": []}
            for _ in range(args.runs):
                runs["write"].append(_plain(root, raw, count))
                runs["bytes"].append(_ours(root, raw, count))
                runs["bytearray"].append(_ours(root, bytearray(raw), count))
            for kind, index in (("wall", 0), ("cpu", 1)):
                best = {name: min(r[index] for r in times) / count for name, times in runs.items()}
                write = best["write"]
                print(f"{size} {kind:4s}: write {write * 1e6:.1f} us"
                      f" | bytes {best['bytes'] * 1e6:.1f} us ({write / best['bytes']:.2f}x)"
                      f" | bytearray {best['bytearray'] * 1e6:.1f} us ({write / best['bytearray']:.2f}x)")


if __name__ == "__main__":
    main()

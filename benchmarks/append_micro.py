"""Per-append cost of `Log.append` beside `os.write` of the same bytes, interleaved in blocks.

The pytest-benchmark group "append 16KiB batches" times 64 MiB rounds, ours and the plain-write
baseline minutes apart, so on a shared machine its ratio moves with whatever else runs. Here
each run opens a plain file and two logs (appended as `bytes` and as a `bytearray`) and
alternates blocks of a few hundred operations between them, so all three see the same
moments of the machine; it reports the minimum and the median per-operation time over the
blocks, by wall time and by process CPU time:

    python -m benchmarks.append_micro [--appends 5000] [--runs 9] [--block 250]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.bench_log import BATCHES, NOW
from logstore import Log
from logstore.clock import ManualClock


class _Target:
    """One thing being timed: a write of `data` per call, and its blocks' (wall, cpu) times."""

    def __init__(self, write: Callable[[], object], close: Callable[[], object]) -> None:
        self.write, self.close = write, close
        self.blocks: list[tuple[float, float]] = []

    def block(self, count: int) -> None:
        write = self.write
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(count):
            write()
        self.blocks.append(((time.perf_counter() - wall) / count, (time.process_time() - cpu) / count))


def _log(root: Path, data: bytes | bytearray) -> _Target:
    log = Log.open(root / "bench-0", clock=ManualClock(NOW))
    log.append(data)  # an existing log, as in bench_log
    return _Target(lambda: log.append(data), log.close)


def _plain(root: Path, data: bytes) -> _Target:
    root.mkdir(parents=True)
    fd = os.open(root / "plain.log", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, data)  # the same first write as the log's
    return _Target(lambda: os.write(fd, data), lambda: os.close(fd))


def measure(raw: bytes, count: int, runs: int, block: int) -> dict[str, list[tuple[float, float]]]:
    """Per-operation (wall, cpu) seconds of every block of every run, by target."""
    blocks: dict[str, list[tuple[float, float]]] = {"write": [], "bytes": [], "bytearray": []}
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(runs):
            root = Path(tmp) / str(run)
            targets = {"write": _plain(root / "plain", raw), "bytes": _log(root / "b", raw),
                       "bytearray": _log(root / "ba", bytearray(raw))}
            try:
                for _ in range(max(count // block, 1)):
                    for target in targets.values():
                        target.block(block)
            finally:
                for name, target in targets.items():
                    target.close()
                    blocks[name].extend(target.blocks)
            shutil.rmtree(root)
    return blocks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=5000, help="16 KiB appends per run (1 MiB: /64)")
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--block", type=int, default=250, help="16 KiB appends per block (1 MiB: /64)")
    args = parser.parse_args()
    for size, scale in (("16KiB", 1), ("1MiB", 64)):
        blocks = measure(BATCHES[size], max(args.appends // scale, 40), args.runs, max(args.block // scale, 4))
        for kind, index in (("wall", 0), ("cpu", 1)):
            for stat, pick in (("min", min), ("median", statistics.median)):
                best = {name: pick(b[index] for b in times) for name, times in blocks.items()}
                write = best["write"]
                print(f"{size} {kind:4s} {stat:6s}: write {write * 1e6:.1f} us"
                      f" | bytes {best['bytes'] * 1e6:.1f} us ({write / best['bytes']:.2f}x)"
                      f" | bytearray {best['bytearray'] * 1e6:.1f} us ({write / best['bytearray']:.2f}x)")


if __name__ == "__main__":
    main()

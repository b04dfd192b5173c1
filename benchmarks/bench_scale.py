"""Thousands of partitions in one process (issue 32), one small segment (10 records) each:

- reopen of a data directory after a clean shutdown (LogManager, which opens each Log on first
  use) at 100, 1,000 and 10,000 partitions, and the same reopen followed by opening every Log
  (`reopen_open_every_log`), beside listing the same partition directories (the floor of a
  reopen that reads only listings); extra_info holds the time per partition and, from a fresh
  process, the descriptors held after the reopen and after one read of every partition, and the
  resident memory opening every log added per partition;
- how long `logstore serve` takes on a 10,000-partition directory to answer its first Metadata
  request, from the process start, and the CPU time it used by then: on a directory no server
  has held, then on a restart.

The 10,000-partition entries are named `..._10k_...`: `-k "not 10k"` skips them in a quick run.
``python -m benchmarks.bench_scale DIR`` prints the footprint of reopening DIR (what the
benchmark runs in its fresh process).
"""

from __future__ import annotations

import gc
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from logstore import LogManager
from logstore.clock import ManualClock
from logstore.log_files import CLEAN_SHUTDOWN_FILE, partition_dir_name

ROOT = Path(__file__).resolve().parent.parent
NOW = 1_700_000_000_000
TOPIC = "scale"
RECORDS = 10
ROUNDS = 3


def build_data_dir(path: Path, partitions: int) -> Path:
    """A cleanly closed data directory of `partitions` one-segment partitions of RECORDS records:
    one written by a LogManager, the others copies of it, then reopened and closed once so the
    checkpoints name every partition."""
    # Records stamped now (the system clock): `logstore serve` runs retention, which would delete
    # older segments of every partition while the benchmark waits for its first answer.
    with LogManager(path) as manager:
        manager.get_or_create(TOPIC, 0).append([(b"key", b"v" * 100)] * RECORDS)
    first = path / partition_dir_name(TOPIC, 0)
    for partition in range(1, partitions):
        shutil.copytree(first, path / partition_dir_name(TOPIC, partition))
    LogManager(path).close()
    assert (path / CLEAN_SHUTDOWN_FILE).exists()
    return path


@pytest.fixture(scope="module")
def data_dirs(tmp_path_factory):
    """Data directories by partition count, built on first use."""
    built: dict[int, Path] = {}

    def get(partitions: int) -> Path:
        if partitions not in built:
            built[partitions] = build_data_dir(tmp_path_factory.mktemp(f"scale{partitions}"), partitions)
        return built[partitions]

    return get


def footprint(path: Path) -> dict[str, float]:
    """Reopen `path` in a fresh process: descriptors and resident memory it adds (see `main`)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "benchmarks.bench_scale", str(path)], cwd=ROOT, env=env,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def tag(benchmark, role: str, partitions: int) -> None:
    benchmark.group = f"reopen {partitions:,} partitions"
    benchmark.extra_info.update(items=partitions, unit="partitions", role=role)


def reopen_benchmark(benchmark, path: Path, partitions: int, *, every_log: bool) -> None:
    """LogManager's reopen of `path`; with `every_log`, then the open of every partition's Log."""
    tag(benchmark, "ours", partitions)
    opened: list[LogManager] = []

    def setup():
        for manager in opened:
            manager.close()  # outside the timing: the close writes checkpoints and the marker
        opened.clear()
        return (), {}

    cpu: list[float] = []

    def run():
        start = time.process_time()
        manager = LogManager(path, clock=ManualClock(NOW))
        if every_log:
            manager.logs()
        opened.append(manager)
        cpu.append(time.process_time() - start)

    benchmark.pedantic(run, setup=setup, rounds=ROUNDS)
    opened[0].close()
    benchmark.extra_info["ms_per_partition"] = round(benchmark.stats.stats.median / partitions * 1e3, 4)
    # This process's CPU: on a shared machine the wall time also counts waiting for a core.
    benchmark.extra_info["cpu_ms_per_partition"] = round(sorted(cpu)[len(cpu) // 2] / partitions * 1e3, 4)
    if every_log:
        benchmark.extra_info.update(footprint(path))


def listing_benchmark(benchmark, path: Path, partitions: int) -> None:
    tag(benchmark, "baseline", partitions)

    def run():
        for entry in os.scandir(path):
            if entry.is_dir():
                for file in os.scandir(entry.path):
                    file.stat()

    benchmark.pedantic(run, rounds=ROUNDS)


@pytest.mark.parametrize("partitions", [100, 1000])
def test_reopen_partitions(benchmark, data_dirs, partitions):
    reopen_benchmark(benchmark, data_dirs(partitions), partitions, every_log=False)


@pytest.mark.parametrize("partitions", [100, 1000])
def test_reopen_open_every_log(benchmark, data_dirs, partitions):
    reopen_benchmark(benchmark, data_dirs(partitions), partitions, every_log=True)


@pytest.mark.parametrize("partitions", [100, 1000])
def test_list_partitions(benchmark, data_dirs, partitions):
    listing_benchmark(benchmark, data_dirs(partitions), partitions)


def test_reopen_10k_partitions(benchmark, data_dirs):
    reopen_benchmark(benchmark, data_dirs(10_000), 10_000, every_log=False)


def test_reopen_10k_open_every_log(benchmark, data_dirs):
    reopen_benchmark(benchmark, data_dirs(10_000), 10_000, every_log=True)


def test_list_10k_partitions(benchmark, data_dirs):
    listing_benchmark(benchmark, data_dirs(10_000), 10_000)


def process_cpu_seconds(pid: int) -> float:
    """User plus system CPU time of the process `pid` so far (from /proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def first_metadata_seconds(path: Path, log: Path) -> tuple[float, float]:
    """Seconds from starting `logstore serve` on `path` to its answer to a first Metadata request,
    and the CPU seconds the server had used by then (on a loaded machine the wall time mostly
    waits for a core). Its stderr goes to the file `log`: a pipe nobody reads could fill and
    stall the server."""
    from kafka.protocol.metadata import MetadataRequest, MetadataResponse

    from tests.support.wire import WireClient

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    with open(log, "w") as stderr:
        process = subprocess.Popen([sys.executable, "-m", "logstore", "serve", str(path), "--listen",
                                    "127.0.0.1:0"], cwd=ROOT, env=env, stderr=stderr)
    try:
        while not (match := re.search(r" on \S+:(\d+) ", log.read_text())):
            assert process.poll() is None, f"logstore serve stopped: {log.read_text()}"
            time.sleep(0.001)
        with WireClient(int(match.group(1)), timeout=60) as client:
            response = client.call(MetadataRequest[4](topics=None, allow_auto_topic_creation=False),
                                   MetadataResponse[4])
        elapsed = time.perf_counter() - start
        cpu = process_cpu_seconds(process.pid)
        assert sum(len(t.partitions) for t in response.topics) >= 10_000
        return elapsed, cpu
    finally:
        process.terminate()
        try:
            process.wait(600)  # a clean stop of 10,000 partitions, so the next round reopens clean
        except subprocess.TimeoutExpired:
            process.kill()
            raise


def test_serve_first_metadata_10k_partitions(benchmark, data_dirs, tmp_path):
    """From process start to the first Metadata answer (interpreter start and imports included)."""
    path = data_dirs(10_000)
    benchmark.group = "serve 10,000 partitions: first Metadata"
    benchmark.extra_info.update(items=1, unit="starts", role="ours")
    seconds: list[tuple[float, float]] = []
    # The first round serves a directory no server has held (LogManager wrote it, without
    # partition.metadata files), the second restarts on it.
    benchmark.pedantic(lambda: seconds.append(first_metadata_seconds(path, tmp_path / "serve.log")), rounds=2)
    benchmark.extra_info["first_metadata_s"] = [round(wall, 3) for wall, _cpu in seconds]
    benchmark.extra_info["first_metadata_cpu_s"] = [round(cpu, 3) for _wall, cpu in seconds]


def main(argv: list[str]) -> int:
    """Reopen the data directory argv[0] and print JSON: descriptors held after the reopen and
    after reading one batch of every partition (the peak), and resident KiB added per partition."""
    path = Path(argv[0])

    def descriptors() -> int:
        return len(os.listdir("/proc/self/fd"))

    def resident_kib() -> int:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024

    gc.collect()
    fds, rss = descriptors(), resident_kib()
    manager = LogManager(path, clock=ManualClock(NOW))
    logs = manager.logs()
    after_open, rss_open = descriptors(), resident_kib()
    for log in logs:
        log.read(0, 1)
    after_read = descriptors()
    manager.close()
    print(json.dumps({"partitions": len(logs), "fds_after_reopen": after_open - fds,
                      "fds_peak_after_reads": max(after_open, after_read) - fds,
                      "rss_kib_per_partition": round((rss_open - rss) / len(logs), 2)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""Spark audit vs the single-process reader, and the Arrow reader on one core vs raw file reads.

Sizes come from the environment so CI and laptops can shrink the run:
``LOGSTORE_BENCH_SPARK_MB`` (default 1024) and ``LOGSTORE_BENCH_SPARK_PARTITIONS`` (default
100). The data is one compacted topic (16-byte keys, 100-byte values, ~20% distinct keys per
partition) written as 1 MiB segments straight from ``build_batch_columnar``.

Groups (one run, one machine):
- "arrow reader, one core": ``read_segments`` over one partition's files vs reading the same
  bytes from disk and beside aiokafka's compiled decoder (MiB/s; records/s in extra_info).
- "spark audit local[2]": compaction + retention reports on Spark ``local[2]`` (one pass,
  ``audit_tables``) vs the single-process reader over the same files and vs the same two
  reports in one process (``local_reports``).
- "spark audit job, standalone vs local[2]": the same job on a Spark standalone cluster
  (master and one 2-core worker on 127.0.0.1, started from pyspark's distribution) vs on
  ``local[2]``, timed on a running session.
- "spark audit end-to-end, standalone vs local[2]": ``logstore audit`` as a fresh process
  (JVM, session, executors, job, printed reports) on the cluster vs on ``local[2]``;
  ``LOGSTORE_BENCH_SPARK_E2E_ROUNDS`` rounds (default 3) after one warm-up.
- "spark audit CLI, N one-segment partitions": ``logstore audit DIR --report all --out OUT`` on
  ``local[2]`` as a fresh process over N partitions of one 10-record segment each (with the data
  directory's checkpoint files, an entry per partition, as a broker leaves them) vs the
  single-process reader and the single-process audit of the same files: the cost per partition
  is flat when the time grows like N. N from ``LOGSTORE_BENCH_SPARK_FLEET`` (default
  10,1000,10000), ``LOGSTORE_BENCH_SPARK_FLEET_ROUNDS`` rounds each (default 1). The CPU seconds
  of the CLI's processes (JVM and Python workers included) are printed beside the time.
These two groups run last: they stop the module's ``local[2]`` session to start the cluster's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from logstore.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    OFFSET_CHECKPOINTS,
    write_offsets_checkpoint,
)
from logstore.log_files import LOG_SUFFIX, segment_file_name
from logstore.records import build_batch_columnar

TOTAL_MB = float(os.environ.get("LOGSTORE_BENCH_SPARK_MB", "1024"))
PARTITIONS = int(os.environ.get("LOGSTORE_BENCH_SPARK_PARTITIONS", "100"))
SEGMENT_BYTES = 1 << 20
RECORDS_PER_BATCH = 1000
VALUE_BYTES = 100
TOPIC = "bench"
CONFIGS = {"cleanup.policy": "compact,delete", "segment.bytes": SEGMENT_BYTES,
           "retention.bytes": 8 * SEGMENT_BYTES}
NOW_MS = 1_800_000_000_000
SPARK_MASTER = "local[2]"
# The whole group (Spark and the single-process baselines alike) runs the same rounds; two
# warm-up rounds let the JVM finish compiling its side of the job before timing starts.
SPARK_ROUNDS = 5
SPARK_WARMUP_ROUNDS = 2
E2E_ROUNDS = int(os.environ.get("LOGSTORE_BENCH_SPARK_E2E_ROUNDS", "3"))
FLEET = [int(n) for n in os.environ.get("LOGSTORE_BENCH_SPARK_FLEET", "10,1000,10000").split(",")]
FLEET_ROUNDS = int(os.environ.get("LOGSTORE_BENCH_SPARK_FLEET_ROUNDS", "1"))
FLEET_RECORDS = 10
JOB_GROUP = "spark audit job, standalone vs local[2]"
E2E_GROUP = "spark audit end-to-end, standalone vs local[2]"
ROOT = Path(__file__).resolve().parent.parent


def write_partition(directory: Path, target_bytes: float, seed: int) -> None:
    """Segments of 1,000-record batches, rolled like a log with segment.bytes = 1 MiB."""
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    values = pa.array([b"v" * VALUE_BYTES] * RECORDS_PER_BATCH, pa.binary())
    distinct = max(int(target_bytes / 130 / 5), 1)
    offset = written = segment_size = 0
    out = open(directory / segment_file_name(0, LOG_SUFFIX), "wb")  # noqa: SIM115 - rolled below
    try:
        while written < target_bytes:
            ids = rng.integers(0, distinct, RECORDS_PER_BATCH)
            keys = pa.array([b"key-%012d" % k for k in ids.tolist()], pa.binary())
            batch = build_batch_columnar(
                keys, values, timestamps=np.arange(offset, offset + RECORDS_PER_BATCH),
                base_offset=offset)
            if segment_size and segment_size + len(batch) > SEGMENT_BYTES:
                out.close()
                out = open(directory / segment_file_name(offset, LOG_SUFFIX), "wb")  # noqa: SIM115
                segment_size = 0
            out.write(batch)
            offset += RECORDS_PER_BATCH
            segment_size += len(batch)
            written += len(batch)
    finally:
        out.close()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("bench-spark") / "data"
    for p in range(PARTITIONS):
        write_partition(root / f"{TOPIC}-{p}", TOTAL_MB * 2**20 / PARTITIONS, seed=p)
    os.sync()  # the kernel's writeback of this (and earlier suites') data is not what we time
    return root


def _files(root: Path) -> list[Path]:
    return sorted(root.glob("*/*.log"))


def _total_bytes(files: list[Path]) -> int:
    return sum(f.stat().st_size for f in files)


@pytest.fixture(scope="module")
def spark():
    from spark_tools.session import spark_session

    session = spark_session(SPARK_MASTER, app_name="logstore-bench")
    yield session
    session.stop()


def read_all(files: list[Path]) -> int:
    """The single-process reader: every record of every file as Arrow rows."""
    from spark_tools.reader import read_segments

    rows = 0
    for path in files:
        for batch in read_segments(path):
            rows += batch.num_rows
    return rows


def raw_read(files: list[Path]) -> int:
    """Raw file I/O: the bytes of every file, read once."""
    total = 0
    for path in files:
        with open(path, "rb") as f:
            total += len(f.read())
    return total


def aiokafka_decode(files: list[Path]) -> int:
    """Peer: aiokafka's compiled record reader, one record object per record."""
    from aiokafka.record.memory_records import MemoryRecords

    rows = 0
    for path in files:
        records = MemoryRecords(path.read_bytes())
        while (batch := records.next_batch()) is not None:
            for _ in batch:
                rows += 1
    return rows


def tag(benchmark, group: str, role: str, items: int, unit: str = "bytes", **info) -> None:
    benchmark.group = group
    benchmark.extra_info.update(items=items, unit=unit, role=role, **info)


def test_reader_one_core(benchmark, data_dir):
    files = [f for f in _files(data_dir) if f.parent.name == f"{TOPIC}-0"]
    nbytes = _total_bytes(files)
    rows = read_all(files)
    tag(benchmark, "arrow reader, one core", "ours", nbytes, records=rows)
    assert benchmark.pedantic(read_all, args=(files,), rounds=5, warmup_rounds=1) == rows
    benchmark.extra_info["records_per_s"] = rows / benchmark.stats.stats.mean


def test_raw_file_read_one_core(benchmark, data_dir):
    files = [f for f in _files(data_dir) if f.parent.name == f"{TOPIC}-0"]
    nbytes = _total_bytes(files)
    tag(benchmark, "arrow reader, one core", "baseline", nbytes)
    assert benchmark.pedantic(raw_read, args=(files,), rounds=5, warmup_rounds=1) == nbytes


def test_aiokafka_decode_one_core(benchmark, data_dir):
    files = [f for f in _files(data_dir) if f.parent.name == f"{TOPIC}-0"]
    rows = read_all(files)
    tag(benchmark, "arrow reader, one core", "peer", _total_bytes(files), records=rows)
    assert benchmark.pedantic(aiokafka_decode, args=(files,), rounds=5, warmup_rounds=1) == rows


def spark_audit(spark, root: Path) -> int:
    """Both reports on Spark, collected on the driver."""
    from spark_tools.reports import audit_tables

    reports = audit_tables(spark, root, CONFIGS, NOW_MS)
    assert reports["compaction"].num_rows == reports["retention"].num_rows == PARTITIONS
    return int(pc.sum(reports["compaction"].column("records")).as_py())


def local_audit(root: Path) -> int:
    """Both reports in this process (the same per-partition functions, no Spark)."""
    return local_audit_records(root, CONFIGS)


def local_audit_records(root: Path, configs: dict | None = None) -> int:
    """Both reports in this process on ``configs`` (default: Kafka's); the records counted."""
    from spark_tools.reports import local_reports

    compaction = local_reports(root, configs, NOW_MS)["compaction"]
    return int(pc.sum(compaction.column("records")).as_py())


def spark_rounds(benchmark, fn, *args):
    """fn(*args) timed over the group's rounds (SPARK_ROUNDS after SPARK_WARMUP_ROUNDS)."""
    return benchmark.pedantic(fn, args=args, rounds=SPARK_ROUNDS, warmup_rounds=SPARK_WARMUP_ROUNDS)


def test_spark_audit_local2(benchmark, spark, data_dir):
    nbytes = _total_bytes(_files(data_dir))
    tag(benchmark, "spark audit local[2]", "ours", nbytes, partitions=PARTITIONS)
    rows = spark_rounds(benchmark, spark_audit, spark, data_dir)
    assert rows > 0


def test_single_process_reader_same_files(benchmark, data_dir):
    files = _files(data_dir)
    tag(benchmark, "spark audit local[2]", "baseline", _total_bytes(files), partitions=PARTITIONS)
    assert spark_rounds(benchmark, read_all, files) > 0


def test_single_process_audit_same_files(benchmark, data_dir):
    files = _files(data_dir)
    tag(benchmark, "spark audit local[2]", "baseline", _total_bytes(files), partitions=PARTITIONS,
        what="same reports without Spark")
    assert spark_rounds(benchmark, local_audit, data_dir) > 0


def spark_read(spark, root: Path) -> int:
    """The distributed reader on Spark: every record read on the executors, aggregated per
    partition (the shape of an audit's scan), only the per-partition totals reach the driver."""
    from pyspark.sql import functions as F

    from spark_tools import segments_dataframe

    columns = ["topic", "partition", "offset", "key_hash", "key_size", "value_size", "is_tombstone"]
    df = segments_dataframe(spark, root, columns=columns)
    totals = df.groupBy("topic", "partition").agg(
        F.count("*").alias("records"), F.sum("value_size").alias("value_bytes"),
        F.approx_count_distinct("key_hash").alias("keys")).collect()
    assert len(totals) == PARTITIONS
    return sum(t.records for t in totals)


def test_spark_read_local2(benchmark, spark, data_dir):
    nbytes = _total_bytes(_files(data_dir))
    tag(benchmark, "spark audit local[2]", "ours", nbytes, partitions=PARTITIONS,
        what="distributed reader, per-partition aggregates")
    assert spark_rounds(benchmark, spark_read, spark, data_dir) > 0


# --- many small partitions: the cost per partition (fresh processes, before the cluster) ---


def write_fleet(root: Path, partitions: int) -> None:
    """``partitions`` partitions of one segment holding one 10-record batch, and the data
    directory's checkpoint files with an entry for each."""
    keys = pa.array([b"key-%d" % (i % 5) for i in range(FLEET_RECORDS)], pa.binary())
    values = pa.array([b"v" * VALUE_BYTES] * FLEET_RECORDS, pa.binary())
    batch = build_batch_columnar(keys, values, timestamps=np.arange(NOW_MS, NOW_MS + FLEET_RECORDS))
    for p in range(partitions):
        directory = root / f"{TOPIC}-{p}"
        directory.mkdir(parents=True)
        (directory / segment_file_name(0, LOG_SUFFIX)).write_bytes(batch)
    for name in OFFSET_CHECKPOINTS:
        offset = 0 if name == LOG_START_OFFSET_CHECKPOINT else FLEET_RECORDS
        write_offsets_checkpoint(root / name, {(TOPIC, p): offset for p in range(partitions)})


@pytest.fixture(scope="module", params=FLEET, ids=lambda n: f"{n}-partitions")
def fleet(request, tmp_path_factory):
    """(data directory, partitions); removed after its tests (10,000 directories)."""
    base = tmp_path_factory.mktemp(f"bench-fleet-{request.param}")
    write_fleet(base / "data", request.param)
    os.sync()
    yield base / "data", request.param
    shutil.rmtree(base)


def _fleet_group(partitions: int) -> str:
    return f"spark audit CLI, {partitions} one-segment partitions"


def session_cpu_seconds(command: list[str], **popen) -> tuple[int, float]:
    """Run ``command`` in a new session: its exit code and the CPU seconds of every process of
    that session (the CLI, its JVM, the Python workers), sampled from /proc until it exits.
    On a shared machine the wall time moves with the load; the CPU spent does not."""
    ticks = os.sysconf("SC_CLK_TCK")
    proc = subprocess.Popen(command, start_new_session=True, **popen)
    cpu: dict[str, float] = {}
    while proc.poll() is None:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == proc.pid:  # the session id
                cpu[pid] = (int(fields[11]) + int(fields[12])) / ticks  # utime + stime
        time.sleep(0.2)
    return proc.returncode, sum(cpu.values())


def audit_cli_report_all(root: Path, out: Path, cpu: list[float]) -> None:
    """``logstore audit ROOT --report all --out OUT`` on local[2] in a fresh process; appends
    the CPU seconds of all its processes to ``cpu``."""
    code, seconds = session_cpu_seconds(
        [sys.executable, "-m", "logstore", "audit", str(root), "--report", "all", "--out",
         str(out), "--master", SPARK_MASTER, "--now", str(NOW_MS)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"})
    assert code == 0
    cpu.append(round(seconds, 1))


def test_audit_cli_many_partitions(benchmark, fleet, tmp_path):
    root, partitions = fleet
    tag(benchmark, _fleet_group(partitions), "ours", partitions, unit="partitions")
    cpu: list[float] = []
    benchmark.pedantic(audit_cli_report_all, args=(root, tmp_path / "out", cpu),
                       rounds=FLEET_ROUNDS)
    benchmark.extra_info["cpu_s"] = cpu
    assert len((tmp_path / "out" / "retention.json").read_text().splitlines()) == partitions


def test_single_process_reader_many_partitions(benchmark, fleet):
    root, partitions = fleet
    tag(benchmark, _fleet_group(partitions), "baseline", partitions, unit="partitions")
    rows = benchmark.pedantic(read_all, args=(_files(root),), rounds=FLEET_ROUNDS,
                              warmup_rounds=1)
    assert rows == partitions * FLEET_RECORDS


def test_single_process_audit_many_partitions(benchmark, fleet):
    root, partitions = fleet
    tag(benchmark, _fleet_group(partitions), "baseline", partitions, unit="partitions",
        what="same reports without Spark")
    assert benchmark.pedantic(local_audit_records, args=(root,), rounds=FLEET_ROUNDS,
                              warmup_rounds=1) == \
        partitions * FLEET_RECORDS


# --- the standalone cluster beside local[2] (last: they stop the module's local session) ---


def test_audit_job_local2_beside_the_cluster(benchmark, spark, data_dir):
    tag(benchmark, JOB_GROUP, "baseline", _total_bytes(_files(data_dir)), partitions=PARTITIONS)
    assert spark_rounds(benchmark, spark_audit, spark, data_dir) > 0


@pytest.fixture(scope="module")
def cluster(spark, tmp_path_factory):
    from spark_tools.standalone import StandaloneCluster

    spark.stop()  # one SparkContext per process: the cluster's session replaces local[2]
    with StandaloneCluster(tmp_path_factory.mktemp("bench-standalone"), cores=2) as c:
        yield c


CLUSTER_CONF = {"spark.pyspark.python": sys.executable, "spark.driver.host": "127.0.0.1"}


@pytest.fixture
def cluster_spark(cluster):
    """A session on the cluster for one test (it holds every core of the worker while it runs,
    so it must end before the CLI runs its own application there)."""
    from spark_tools.session import spark_session

    session = spark_session(cluster.master, app_name="logstore-bench", conf=CLUSTER_CONF)
    yield session
    session.stop()


def test_audit_job_standalone(benchmark, cluster_spark, data_dir):
    tag(benchmark, JOB_GROUP, "ours", _total_bytes(_files(data_dir)), partitions=PARTITIONS)
    assert spark_rounds(benchmark, spark_audit, cluster_spark, data_dir) > 0


def audit_cli(master: str, root: Path, *conf: str) -> int:
    """``logstore audit`` in a fresh process; its exit code."""
    sets = [a for key, value in CONFIGS.items() for a in ("--set", f"{key}={value}")]
    done = subprocess.run([sys.executable, "-m", "logstore", "audit", str(root), "--master",
                           master, "--now", str(NOW_MS), *sets, *conf], cwd=ROOT,
                          capture_output=True, text=True, timeout=600,
                          env={k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"})
    assert done.returncode == 0, done.stderr
    return done.returncode


def test_audit_cli_local2(benchmark, data_dir):
    tag(benchmark, E2E_GROUP, "baseline", _total_bytes(_files(data_dir)), partitions=PARTITIONS)
    benchmark.pedantic(audit_cli, args=(SPARK_MASTER, data_dir), rounds=E2E_ROUNDS,
                       warmup_rounds=1)


def test_audit_cli_standalone(benchmark, cluster, data_dir):
    conf = [a for key, value in CLUSTER_CONF.items() for a in ("--conf", f"{key}={value}")]
    tag(benchmark, E2E_GROUP, "ours", _total_bytes(_files(data_dir)), partitions=PARTITIONS)
    benchmark.pedantic(audit_cli, args=(cluster.master, data_dir, *conf), rounds=E2E_ROUNDS,
                       warmup_rounds=1)

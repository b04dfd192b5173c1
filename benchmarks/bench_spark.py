"""Spark audit vs the single-process reader, and the Arrow reader on one core vs raw file reads.

Sizes come from the environment so CI and laptops can shrink the run:
``LOGSTORE_BENCH_SPARK_MB`` (default 1024) and ``LOGSTORE_BENCH_SPARK_PARTITIONS`` (default
100). The data is one compacted topic (16-byte keys, 100-byte values, ~20% distinct keys per
partition) written as 1 MiB segments straight from ``build_batch_columnar``.

Groups (one run, one machine):
- "arrow reader, one core": ``read_segments`` over one partition's files vs reading the same
  bytes from disk and beside aiokafka's compiled decoder (MiB/s; records/s in extra_info).
- "spark audit local[2]": compaction + retention reports on Spark ``local[2]`` (one pass,
  ``audit_reports``) vs the single-process reader over the same files and vs the same two
  reports in one process (``local_reports``).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

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


def tag(benchmark, group: str, role: str, nbytes: int, **info) -> None:
    benchmark.group = group
    benchmark.extra_info.update(items=nbytes, unit="bytes", role=role, **info)


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
    from spark_tools.reports import audit_reports

    reports = audit_reports(spark, root, CONFIGS, NOW_MS)
    compaction = reports["compaction"].collect()
    retention = reports["retention"].collect()
    assert len(compaction) == len(retention) == PARTITIONS
    return sum(r.records for r in compaction)


def local_audit(root: Path) -> int:
    """Both reports in this process (the same per-partition functions, no Spark)."""
    from spark_tools.reports import local_reports

    compaction = local_reports(root, CONFIGS, NOW_MS)["compaction"]
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

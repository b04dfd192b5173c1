from __future__ import annotations

import contextlib
import io
import shutil
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from logstore.clock import ManualClock
from logstore.manager import LogManager
from logstore.records import COMPRESSION_NAMES, RecordBatch, batches_to_arrow, build_batch_columnar

RECORDS_PER_BATCH = 1000
DATA_DIR = Path("demo-data")
AUDIT_DIR = Path("audit-out")
HOUR_MS = 3_600_000
START_MS = 1_700_000_000_000
HOURS = 24
# Per-topic configs, Kafka names; the audit reads the same file the engine was configured from.
TOPICS = {
    "clicks": {"partitions": 3, "keys": 50_000, "tombstones": 0.0, "config": {
        "cleanup.policy": "delete", "retention.ms": 6 * HOUR_MS, "segment.bytes": 512 * 1024}},
    "profiles": {"partitions": 2, "keys": 2_000, "tombstones": 0.05, "config": {
        "cleanup.policy": "compact", "segment.bytes": 512 * 1024, "delete.retention.ms": HOUR_MS,
        "min.cleanable.dirty.ratio": 0.3}},
    "orders": {"partitions": 2, "keys": 10_000, "tombstones": 0.01, "config": {
        "cleanup.policy": "compact,delete", "retention.bytes": 2 * 1024 * 1024,
        "retention.ms": -1, "segment.bytes": 512 * 1024}},
}


def generated_columns(n: int, seed: int = 7) -> tuple[pa.Array, pa.Array, np.ndarray]:
    """Keys `user-<zipf id>`, JSON-ish values of varying size, and increasing timestamps."""
    rng = np.random.default_rng(seed)
    ids = rng.zipf(1.3, n) % 5000
    keys = pa.array([f"user-{i:05d}".encode() for i in ids], pa.binary())
    sizes = rng.integers(40, 400, n)
    values = pa.array(
        [b'{"event":"click","pad":"' + b"x" * int(s) + b'"}' for s in sizes], pa.binary()
    )
    timestamps = 1_700_000_000_000 + np.cumsum(rng.integers(0, 50, n))
    return keys, values, timestamps


def codec_table() -> list[tuple[str, int, int, float, float, bool]]:
    """Build one 1,000-record batch per codec, decode it into Arrow, and check the round trip."""
    keys, values, timestamps = generated_columns(RECORDS_PER_BATCH)
    batches_to_arrow([build_batch_columnar(keys[:1], values[:1])])  # load the compiled kernels first
    rows = []
    for codec in COMPRESSION_NAMES:
        started = time.perf_counter()
        data = build_batch_columnar(keys, values, timestamps=timestamps, compression=codec)
        built = time.perf_counter()
        batch = RecordBatch(data)
        batch.validate()
        table = batches_to_arrow([data])
        decoded = time.perf_counter()
        same = table.column("key").equals(pa.chunked_array([keys])) and table.column(
            "value"
        ).equals(pa.chunked_array([values]))
        rows.append((codec, batch.record_count, len(data), (built - started) * 1e3,
                     (decoded - built) * 1e3, same))
    return rows


def print_codec_table() -> None:
    """Stage 1: the record format in every codec."""
    print("== 1. Kafka v2 record batches, every codec (1,000 records each) ==")
    print(f"{'codec':<8} {'records':>7} {'bytes':>8} {'build ms':>9} {'decode ms':>10}  round trip")
    for codec, count, size, build_ms, decode_ms, same in codec_table():
        print(f"{codec:<8} {count:>7} {size:>8} {build_ms:>9.2f} {decode_ms:>10.2f}  "
              f"{'ok' if same else 'MISMATCH'}")


def properties_text() -> str:
    """The topics' configs as one `.properties` file (`<topic>.<config>=<value>`)."""
    return "".join(f"{topic}.{key}={value}\n" for topic, spec in TOPICS.items()
                   for key, value in spec["config"].items())


def generate(clock: ManualClock) -> LogManager:
    """Stage 2: a day of traffic into three topics, an hour of appends per clock step."""
    shutil.rmtree(DATA_DIR, ignore_errors=True)
    DATA_DIR.mkdir()
    (DATA_DIR / "topics.properties").write_text(properties_text())
    manager = LogManager(DATA_DIR, clock=clock)
    rng = np.random.default_rng(42)
    for topic, spec in TOPICS.items():
        for partition in range(spec["partitions"]):
            manager.get_or_create(topic, partition, spec["config"])
    for _hour in range(HOURS):
        for topic, spec in TOPICS.items():
            for partition in range(spec["partitions"]):
                log = manager.get(topic, partition)
                for _ in range(2):
                    log.append(hourly_table(rng, spec, clock.time_ms()))
        clock.advance(HOUR_MS)
    print(f"\n== 2. Generated {HOURS} hours of traffic into {DATA_DIR}/ ==")
    print(f"{'partition':<12} {'segments':>8} {'records':>8} {'MiB':>7}  policy")
    for log in sorted(manager.logs(), key=lambda lg: (lg.topic, lg.partition)):
        print(f"{fmt_partition(log.topic, log.partition)} {len(log.segments):>8} "
              f"{log.log_end_offset:>8} {log.size / 2**20:>7.2f}  {','.join(log.config.cleanup_policy)}")
    return manager


def hourly_table(rng: np.random.Generator, spec: dict, now_ms: int) -> pa.Table:
    """One producer batch: zipf-distributed keys, some tombstones, timestamps within the hour."""
    n = 500
    ids = rng.zipf(1.2, n) % spec["keys"]
    keys = pa.array([f"key-{i:06d}".encode() for i in ids], pa.binary())
    sizes = rng.integers(60, 600, n)
    tombstone = rng.random(n) < spec["tombstones"]
    values = pa.array([None if dead else b"v" * int(size) for dead, size in zip(tombstone, sizes, strict=True)],
                      pa.binary())
    timestamps = np.sort(now_ms + rng.integers(0, HOUR_MS, n))
    return pa.table({"key": keys, "value": values, "timestamp": pa.array(timestamps, pa.int64())})


def dump_one_segment() -> None:
    """Stage 3: `logstore dump` of one segment, as kafka-dump-log.sh would print it."""
    from logstore.cli import main as cli_main

    segment = sorted((DATA_DIR / "profiles-0").glob("*.log"))[0]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cli_main(["dump", "--deep-iteration", "--print-data-log", "--files", str(segment)])
    lines = out.getvalue().splitlines()
    print(f"\n== 3. logstore dump --deep-iteration --print-data-log --files {segment} "
          f"(first 8 of {len(lines)} lines) ==")
    for line in lines[:8]:
        print(line[:160] + (" ..." if len(line) > 160 else ""))


def fmt_partition(topic: str, partition: int) -> str:
    """`topic-partition`, padded for the tables."""
    return f"{topic}-{partition}".ljust(12)


def audit_then_retention(spark, manager: LogManager, now_ms: int) -> bool:
    """Stage 4: the Spark retention report, then retention for real; both must agree."""
    from retention import apply_retention
    from spark_tools import retention_report, write_report

    props = str(DATA_DIR / "topics.properties")
    report = retention_report(spark, str(DATA_DIR), props, now_ms).cache()
    write_report(report, AUDIT_DIR / "retention", "json")
    predicted = {(r.topic, r.partition): r for r in report.collect()}
    print(f"\n== 4. Spark retention audit ({spark.sparkContext.master}), then retention for real ==")
    print(f"{'partition':<12} {'audit: segs':>11} {'MiB':>6} {'new start':>9} | "
          f"{'engine: segs':>12} {'MiB':>6} {'new start':>9}")
    agree = True
    for log in sorted(manager.logs(), key=lambda lg: (lg.topic, lg.partition)):
        row = predicted[(log.topic, log.partition)]
        plan = apply_retention(log, now_ms=now_ms)
        done = (len(plan.deletions), plan.bytes_reclaimed, log.log_start_offset)
        want = (row.segments_deleted, row.bytes_reclaimed, row.new_log_start_offset or row.log_start_offset)
        agree &= done == want
        print(f"{fmt_partition(log.topic, log.partition)} {want[0]:>11} {want[1] / 2**20:>6.2f} "
              f"{want[2]:>9} | {done[0]:>12} {done[1] / 2**20:>6.2f} {done[2]:>9}")
    print("engine and audit agree" if agree else "MISMATCH between engine and audit")
    return agree


def audit_then_clean(spark, manager: LogManager, now_ms: int) -> bool:
    """Stage 5: the Spark compaction report, then the cleaner for real; both must agree."""
    from compaction import Cleaner
    from spark_tools import compaction_report, write_report

    props = str(DATA_DIR / "topics.properties")
    report = compaction_report(spark, str(DATA_DIR), props, now_ms).cache()
    write_report(report, AUDIT_DIR / "compaction", "json")
    predicted = {(r.topic, r.partition): r for r in report.collect()}
    print("\n== 5. Spark compaction audit, then the cleaner for real ==")
    print(f"{'partition':<12} {'dirty':>5} {'keys':>6} {'dups':>6} {'tombs':>5} {'audit MiB':>9} | "
          f"{'engine MiB':>10} {'removed':>7}  cleaner due?")
    agree = True
    for log in sorted(manager.logs(), key=lambda lg: (lg.topic, lg.partition)):
        row = predicted[(log.topic, log.partition)]
        removed_bytes = removed_records = 0
        if log.config.compact:
            result = Cleaner(log.config).clean(log, now_ms=now_ms)
            removed_bytes = result.bytes_read - result.bytes_written
            removed_records = result.records_removed
        want = row.bytes_removable if row.would_clean_now else 0
        agree &= removed_bytes == want
        dirty = "-" if row.dirty_ratio is None else f"{row.dirty_ratio:.2f}"
        print(f"{fmt_partition(log.topic, log.partition)} {dirty:>5} {row.distinct_keys:>6} "
              f"{row.duplicate_records:>6} {row.tombstones:>5} {want / 2**20:>9.2f} | "
              f"{removed_bytes / 2**20:>10.2f} {removed_records:>7}  "
              f"{'yes' if row.would_clean_now else 'no'} ({row.reason})")
    print("engine and audit agree" if agree else "MISMATCH between engine and audit")
    return agree


def replicate() -> bool:
    """Stage 6: a leader and two followers, a failover, and no acknowledged record lost."""
    from logstore.replication.demo import run_demo

    print("\n== 6. Replication: leader, two followers, a failover ==")
    summary = run_demo(DATA_DIR)
    return summary["identical"] and summary["present_on_every_replica"] == summary["acknowledged"]


def main() -> int:
    """Run every demo stage in order; non-zero exit if the engine and the audit disagree."""
    from spark_tools import spark_session

    started = time.perf_counter()
    print_codec_table()
    clock = ManualClock(START_MS)
    with generate(clock) as manager:
        for log in manager.logs():
            log.flush()
        dump_one_segment()
        shutil.rmtree(AUDIT_DIR, ignore_errors=True)
        spark = spark_session()
        try:
            agree = audit_then_retention(spark, manager, clock.time_ms())
            agree &= audit_then_clean(spark, manager, clock.time_ms())
        finally:
            spark.stop()
        # As a running broker would: the deleted segments go once file.delete.delay.ms passed,
        # so the directory left behind is what Kafka would leave (no `.deleted` files).
        clock.advance(manager.default_config.file_delete_delay_ms)
        manager.delete_expired_files()
    agree &= replicate()
    print(f"\ndemo finished in {time.perf_counter() - started:.1f} s")
    return 0 if agree else 1


if __name__ == "__main__":
    raise SystemExit(main())

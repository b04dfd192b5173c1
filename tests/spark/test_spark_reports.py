"""spark_tools reports: predictions equal what the engine's cleaner and retention then do."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from compaction.cleaner import Cleaner
from logstore.clock import ManualClock
from logstore.errors import LogstoreError
from logstore.log import Log
from logstore.records import Record, build_batch, build_control_batch
from retention import apply_retention
from spark_tools import compaction_report, retention_report, write_report
from spark_tools.reports import local_report
from spark_tools.topic_configs import TopicConfigs
from tests.support.clock import NOW as T0
from tests.support.paths import KAFKA_LOGDIR

CONFIGS = {
    "orders": {"cleanup.policy": "compact", "segment.bytes": 1200,
               "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": 10_000},
    "clicks": {"retention.ms": 30_000, "segment.bytes": 900},
    "audit": {"retention.bytes": 2500, "segment.bytes": 700},
    "mixed": {"cleanup.policy": "compact,delete", "retention.ms": 45_000, "segment.bytes": 1000},
    "txns": {"cleanup.policy": "compact", "delete.retention.ms": 1_000},
}
PARTITIONS = 2
NOW = T0 + 200_000
SAMPLES = KAFKA_LOGDIR


def _append(log: Log, clock: ManualClock, topic: str, partition: int, start: int, count: int):
    for i in range(start, start + count):
        key = b"%s-%d" % (topic.encode(), (i * (partition + 3)) % 11)
        value = None if i % 7 == 3 else b"value-%d-" % i + b"x" * (i % 40)
        log.append([Record(-1, clock.time_ms(), key, value)])
        clock.advance(1_000)


def _append_transactions(log: Log, clock: ManualClock, partition: int) -> None:
    """An aborted and a committed transaction between plain batches, as a follower gets them
    (the Log indexes the aborted one in its `.txnindex`)."""
    ts = clock.time_ms()
    pid = 7 + partition
    batches = [
        build_batch([Record(0, ts, b"a", b"1"), Record(1, ts, b"b", b"1")], producer_id=pid,
                    producer_epoch=0, base_sequence=0, is_transactional=True),
        build_control_batch("abort", producer_id=pid, producer_epoch=0, coordinator_epoch=0,
                            base_offset=2, timestamp=ts),
        build_batch([Record(3, ts, b"a", b"2"), Record(4, ts, b"c", None)], base_offset=3),
        build_batch([Record(5, ts, b"b", b"3")], base_offset=5, producer_id=pid,
                    producer_epoch=0, base_sequence=2, is_transactional=True),
        build_control_batch("commit", producer_id=pid, producer_epoch=0, coordinator_epoch=0,
                            base_offset=6, timestamp=ts),
    ]
    for raw in batches:
        log.append_as_follower(raw)
    log.high_watermark = log.log_end_offset
    log.roll()
    log.append([(b"a", b"4"), (b"d", b"4")])


def build_data_dir(root: Path) -> Path:
    """Topics with compaction, time and size retention, and transactions; one compacted topic
    cleaned once already (so delete horizons are set), then appended to again."""
    for topic, config in CONFIGS.items():
        for partition in range(PARTITIONS):
            clock = ManualClock(T0)
            log = Log.open(root / f"{topic}-{partition}", config, clock=clock)
            try:
                if topic == "txns":
                    _append_transactions(log, clock, partition)
                    continue
                _append(log, clock, topic, partition, 0, 60)
                if topic == "orders":
                    Cleaner(config).clean(log, now_ms=clock.time_ms())
                    _append(log, clock, topic, partition, 60, 40)
            finally:
                log.close()
    return root


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return build_data_dir(tmp_path_factory.mktemp("audit") / "data")


def _copy(src: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(src, target)
    return target


def _by_partition(rows) -> dict:
    return {(r["topic"], r["partition"]): r for r in rows}


def _engine_clean(directory: Path, now: int):
    """Run the engine's cleaner on every compacted partition; results and log sizes."""
    out = {}
    for part in sorted(p for p in directory.iterdir() if p.is_dir()):
        topic, partition = part.name.rsplit("-", 1)
        config = TopicConfigs.load(CONFIGS).for_topic(topic)
        if not config.compact:
            continue
        log = Log.open(part, config, clock=ManualClock(now))
        try:
            before = log.size
            records_before = sum(1 for _ in log.records())
            result = Cleaner(config).clean(log, now_ms=now)
            out[(topic, int(partition))] = {
                "result": result,
                "bytes_removed": before - log.size,
                "records_removed": records_before - sum(1 for _ in log.records()),
            }
        finally:
            log.close()
    return out


def _engine_retention(directory: Path, now: int):
    out = {}
    for part in sorted(p for p in directory.iterdir() if p.is_dir()):
        topic, partition = part.name.rsplit("-", 1)
        config = TopicConfigs.load(CONFIGS).for_topic(topic)
        log = Log.open(part, config, clock=ManualClock(now))
        try:
            before_bases = [s.base_offset for s in log.segments]
            before_size = log.size
            apply_retention(log, now_ms=now)
            after_bases = {s.base_offset for s in log.segments}
            out[(topic, int(partition))] = {
                "deleted": [b for b in before_bases if b not in after_bases],
                "log_start_offset": log.log_start_offset,
                "bytes_reclaimed": before_size - log.size,
            }
        finally:
            log.close()
    return out


def test_local_compaction_report_matches_the_engines_cleaner(data_dir, tmp_path):
    directory = _copy(data_dir, tmp_path)
    report = _by_partition(local_report("compaction", directory, CONFIGS, NOW).to_pylist())
    engine = _engine_clean(directory, NOW)
    assert set(engine) == {(t, p) for t in ("orders", "mixed", "txns") for p in range(PARTITIONS)}
    for key, done in engine.items():
        row = report[key]
        result = done["result"]
        assert row["records_removable"] == result.records_removed == done["records_removed"] > 0
        assert row["bytes_removable"] == done["bytes_removed"] > 0
        assert row["tombstones_removable"] == result.tombstones_removed
        assert row["next_cleaner_checkpoint"] == result.end_offset
        assert row["dirty_ratio"] == pytest.approx(result.dirty_ratio)
        assert row["would_clean_now"] == (result.due_reason is not None)
    assert any(report[("orders", p)]["tombstones_removable"] > 0 for p in range(PARTITIONS))
    aborted = engine[("txns", 0)]["result"].removed_by_reason["aborted"]
    assert aborted == 2 and report[("txns", 0)]["records_removable"] >= aborted
    for key, row in report.items():
        if key not in engine:
            assert row["records_removable"] == 0 and not row["would_clean_now"]


def test_compaction_report_is_the_same_in_small_chunks(data_dir, monkeypatch):
    """The report reads segments a chunk at a time: chunks smaller than one batch (each batch
    then read alone) give the same rows."""
    import compaction.decode

    full = local_report("compaction", data_dir, CONFIGS, NOW).to_pylist()
    monkeypatch.setattr(compaction.decode, "CHUNK_BYTES", 100)
    assert local_report("compaction", data_dir, CONFIGS, NOW).to_pylist() == full


def test_local_retention_report_matches_the_engines_retention(data_dir, tmp_path):
    directory = _copy(data_dir, tmp_path)
    report = _by_partition(local_report("retention", directory, CONFIGS, NOW).to_pylist())
    engine = _engine_retention(directory, NOW)
    assert set(report) == set(engine)
    for key, done in engine.items():
        row = report[key]
        assert [d["base_offset"] for d in row["deletions"]] == done["deleted"]
        assert row["segments_deleted"] == len(done["deleted"])
        assert row["new_log_start_offset"] == done["log_start_offset"]
        assert row["bytes_reclaimed"] == done["bytes_reclaimed"]
    deleting = {k[0] for k, row in report.items() if row["segments_deleted"]}
    assert {"clicks", "audit", "mixed"} <= deleting
    assert report[("audit", 0)]["deleted_by_retention_bytes"] > 0
    assert report[("clicks", 0)]["deleted_by_retention_ms"] > 0
    assert report[("orders", 0)]["segments_deleted"] == 0


def test_properties_file_configs_apply_per_topic(data_dir, tmp_path):
    props = tmp_path / "audit.properties"
    props.write_text("retention.ms=1000\norders.cleanup.policy=compact\n")
    rows = _by_partition(local_report("retention", data_dir, props, NOW).to_pylist())
    assert rows[("orders", 0)]["segments_deleted"] == 0  # compact only: no time rule
    assert rows[("audit", 0)]["retention_ms"] == 1000
    assert rows[("audit", 0)]["deleted_by_retention_ms"] > 0


@pytest.mark.spark
def test_spark_reports_equal_the_local_reports(spark, data_dir):
    for kind, build in (("compaction", compaction_report), ("retention", retention_report)):
        expected = sorted(local_report(kind, data_dir, CONFIGS, NOW).to_pylist(),
                          key=lambda r: (r["topic"], r["partition"]))
        got = sorted((r.asDict(recursive=True) for r in build(spark, data_dir, CONFIGS, NOW).collect()),
                     key=lambda r: (r["topic"], r["partition"]))
        assert got == expected


@pytest.mark.spark
def test_spark_reports_on_a_kafka_written_directory(spark, tmp_path):
    directory = tmp_path / "logdir"
    shutil.copytree(SAMPLES, directory)
    compaction = compaction_report(spark, directory, None, NOW).collect()
    assert [(r.topic, r.partition, r.records, r.segments) for r in compaction] == [
        ("plain", 0, 720, 7)]
    later = 1_800_000_000_000  # every sample timestamp is older than a day by then
    retention = retention_report(spark, str(directory), {"retention.ms": 86_400_000}, later)
    row = retention.collect()[0]
    assert row.log_end_offset == 720
    assert row.segments_deleted == row.deleted_by_retention_ms == 7
    assert row.roll_active_first is True and row.new_log_start_offset == 720


@pytest.mark.spark
@pytest.mark.parametrize("fmt", ["json", "csv", "parquet"])
def test_write_report_formats(spark, data_dir, tmp_path, fmt):
    df = retention_report(spark, data_dir, CONFIGS, NOW)
    out = Path(write_report(df, tmp_path / fmt, fmt))
    assert out == tmp_path / fmt / f"report.{fmt}"
    files = [out]
    if fmt == "parquet":
        assert pq.read_table(files[0]).num_rows == len(CONFIGS) * PARTITIONS
    elif fmt == "json":
        rows = [json.loads(line) for line in files[0].read_text().splitlines()]
        assert {r["topic"] for r in rows} == set(CONFIGS)
    else:
        lines = files[0].read_text().splitlines()
        assert lines[0].startswith("topic,partition,") and len(lines) == 1 + len(CONFIGS) * PARTITIONS


def test_write_report_rejects_unknown_format():
    with pytest.raises(LogstoreError, match="unknown report format"):
        write_report(None, "/nonexistent", "xml")


def test_reports_through_a_non_local_filesystem_equal_local_paths(data_dir):
    import pyarrow.fs as pafs

    remote = pafs.SubTreeFileSystem(str(data_dir.parent), pafs.LocalFileSystem())
    for kind in ("compaction", "retention"):
        via_fs = local_report(kind, data_dir.name, CONFIGS, NOW, filesystem=remote).to_pylist()
        direct = local_report(kind, data_dir, CONFIGS, NOW).to_pylist()
        assert via_fs == direct


def test_compaction_report_on_kafka_files_matches_the_cleaner(tmp_path):
    directory = tmp_path / "logdir"
    shutil.copytree(SAMPLES, directory)
    for path in [directory, *directory.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    config = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"}
    now = 1_800_000_000_000
    (row,) = local_report("compaction", directory, config, now).to_pylist()
    log = Log.open(directory / "plain-0", config, clock=ManualClock(now))
    try:
        before = log.size
        result = Cleaner(config).clean(log, now_ms=now)
        assert row["records_removable"] == result.records_removed > 0
        assert row["bytes_removable"] == before - log.size
        assert row["next_cleaner_checkpoint"] == result.end_offset
        assert row["would_clean_now"] and row["records"] == 720
    finally:
        log.close()


@pytest.mark.spark
def test_audit_reports_share_one_pass_and_equal_the_local_reports(spark, data_dir):
    from spark_tools import audit_reports, local_reports

    reports = audit_reports(spark, data_dir, CONFIGS, NOW)
    expected = local_reports(data_dir, CONFIGS, NOW)
    for kind in ("compaction", "retention"):
        got = sorted((r.asDict(recursive=True) for r in reports[kind].collect()),
                     key=lambda r: (r["topic"], r["partition"]))
        assert got == sorted(expected[kind].to_pylist(), key=lambda r: (r["topic"], r["partition"]))
    with pytest.raises(LogstoreError, match="unknown report kinds"):
        audit_reports(spark, data_dir, kinds=("speed",))


def test_compaction_report_says_why_a_log_is_or_is_not_due(data_dir):
    base = {"cleanup.policy": "compact", "segment.bytes": 1200}
    lazy = {**base, "min.cleanable.dirty.ratio": "1.0"}
    by_lag = {**lazy, "max.compaction.lag.ms": 1}
    (row,) = local_report("compaction", data_dir / "clicks-0", {"clicks": lazy}, NOW).to_pylist()
    assert not row["would_clean_now"] and row["reason"].startswith("not due: dirty ratio")
    (row,) = local_report("compaction", data_dir / "clicks-0", {"clicks": by_lag}, NOW).to_pylist()
    assert row["would_clean_now"] and "past max.compaction.lag.ms" in row["reason"]


def test_compaction_report_refuses_a_batch_with_a_bad_crc(tmp_path):
    from logstore.errors import CorruptRecordError

    part = tmp_path / "data" / "t-0"
    part.mkdir(parents=True)
    bad = bytearray(build_batch([Record(0, 0, b"k", b"value")]))
    bad[-1] ^= 0xFF
    (part / "00000000000000000000.log").write_bytes(bytes(bad))
    with pytest.raises(CorruptRecordError, match="CRC") as info:
        local_report("compaction", tmp_path / "data", None, NOW)
    assert info.value.position == 0 and info.value.path.endswith("00000000000000000000.log")


def test_an_audit_reads_each_checkpoint_file_once_whatever_the_partitions(data_dir, monkeypatch):
    """A data directory's checkpoint files hold an entry per partition: read once in the listing,
    not again by every partition's task (which made an audit quadratic in the partitions)."""
    import logstore.checkpoint as checkpoint

    expected = {kind: local_report(kind, data_dir, CONFIGS, NOW).to_pylist()
                for kind in ("compaction", "retention")}
    reads = []
    real = checkpoint.read_checkpoint

    def counted(path, *args, **kwargs):
        reads.append(Path(path).name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(checkpoint, "read_checkpoint", counted)
    for kind, rows in expected.items():
        reads.clear()
        assert local_report(kind, data_dir, CONFIGS, NOW).to_pylist() == rows
        data_dir_files = [name for name in reads if name.endswith("-checkpoint")
                          and name != "leader-epoch-checkpoint"]
        assert sorted(data_dir_files) == sorted(set(data_dir_files))
        assert "cleaner-offset-checkpoint" in data_dir_files

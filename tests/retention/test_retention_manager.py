"""LogManager's background retention: every log.retention.check.interval.ms on the injected
clock, `.deleted` files removed by the delayed-delete task, start offsets checkpointed."""

from __future__ import annotations

import os

from compaction import LogCleaner
from logstore.checkpoint import read_offsets_checkpoint
from logstore.clock import ManualClock
from logstore.manager import LogManager
from retention import apply_retention
from tests.support.clock import NOW as T0

CHECK_MS = 300_000


def deleted_files(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.endswith(".deleted"))


def test_retention_runs_every_check_interval_and_files_go_after_the_delay(tmp_path):
    clock = ManualClock(T0)
    config = {"segment.bytes": 400, "retention.ms": 60_000, "file.delete.delay.ms": 60_000,
              "log.retention.check.interval.ms": CHECK_MS, "log.initial.task.delay.ms": CHECK_MS}
    manager = LogManager(tmp_path, config, clock=clock, retention=apply_retention)
    log = manager.get_or_create("orders", 0)
    for i in range(30):
        log.append([(b"k%d" % i, b"v" * 40)])
        clock.advance(1000)
    segments = log.segments
    clock.set(T0 + CHECK_MS - 1)
    manager.run_pending()
    assert log.segments == segments  # the retention task is not due yet

    clock.set(T0 + CHECK_MS)
    assert "kafka-log-retention" in manager.run_pending()
    assert len(log.segments) == 1 and log.active_segment.size == 0  # everything had expired
    assert log.log_start_offset == log.log_end_offset == 30
    # .log, .index and .timeindex of every segment, and the snapshot taken at each roll
    assert len(deleted_files(log.dir)) == 3 * len(segments) + len(segments) - 1
    assert read_offsets_checkpoint(tmp_path / "log-start-offset-checkpoint")[("orders", 0)] == 30

    clock.advance(59_999)
    manager.run_pending()
    assert deleted_files(log.dir)
    clock.advance(1_000)
    manager.run_pending()
    assert deleted_files(log.dir) == []
    manager.close()


def test_compact_only_logs_still_drop_segments_below_the_log_start_offset(tmp_path):
    clock = ManualClock(T0)
    config = {"segment.bytes": 400, "log.retention.check.interval.ms": CHECK_MS, "file.delete.delay.ms": 0,
              "log.cleaner.enable": False}  # only retention may touch the compacted log here
    manager = LogManager(tmp_path, config, clock=clock, cleaner=LogCleaner, retention=apply_retention)
    compacted = manager.get_or_create("users", 0, {"cleanup.policy": "compact", "retention.ms": 0})
    kept = manager.get_or_create("events", 0, {"retention.ms": -1})
    for log in (compacted, kept):
        for i in range(20):
            log.append([(b"k%d" % i, b"v" * 40)])
    third = compacted.segments[2].base_offset
    compacted.delete_records_before(third)
    kept.delete_records_before(third)
    clock.advance(CHECK_MS)
    manager.run_pending()
    for log in (compacted, kept):
        assert log.segments[0].base_offset == third == log.log_start_offset
    assert len(compacted.segments) > 1  # retention.ms=0 does not apply without `delete`
    manager.close()

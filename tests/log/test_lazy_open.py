"""LogManager opens each partition's Log on its first use (issue 32): a reopened manager lists
its partitions without opening them, opens each once however many threads ask, recovers an
unclean partition before its first read, and retention, close and delete still cover every one."""

from __future__ import annotations

import os
import threading

import pytest

from logstore import Log, LogManager, Record
from logstore.errors import LogClosedError, LogLockedError
from logstore.records import build_batch
from retention import apply_retention
from tests.support.clock import NOW

PARTITIONS = 4


def batch(n: int = 2):
    return build_batch([Record(i, NOW, b"k", b"v" * 20) for i in range(n)])


@pytest.fixture
def opens(monkeypatch) -> list[str]:
    """The names of the partitions Log.open opened, in order."""
    opened: list[str] = []
    real_open = Log.open.__func__

    def counting_open(cls, path, *args, **kwargs):
        log = real_open(cls, path, *args, **kwargs)
        opened.append(log.name)
        return log

    monkeypatch.setattr(Log, "open", classmethod(counting_open))
    return opened


def write_partitions(path, clock, config=None) -> None:
    with LogManager(path, config, clock=clock) as manager:
        for partition in range(PARTITIONS):
            manager.get_or_create("t", partition).append(batch())


def test_a_reopened_manager_lists_its_partitions_and_opens_each_on_first_use(tmp_path, clock, opens):
    write_partitions(tmp_path, clock)
    opens.clear()
    with LogManager(tmp_path, clock=clock) as manager:
        assert manager.partitions() == [("t", p) for p in range(PARTITIONS)]
        assert opens == []
        assert manager.get("t", 2).log_end_offset == 2
        assert manager.get("t", 2) is manager.get("t", 2)
        assert opens == ["t-2"]
        assert [log.name for log in manager.logs()] == [f"t-{p}" for p in range(PARTITIONS)]
        assert sorted(opens) == sorted(f"t-{p}" for p in range(PARTITIONS))


def test_concurrent_first_uses_open_a_partition_once(tmp_path, clock, opens):
    write_partitions(tmp_path, clock)
    opens.clear()
    threads_count = 8
    start = threading.Barrier(threads_count)
    got: list[Log] = []

    def use() -> None:
        start.wait()
        got.append(manager.get("t", 1))

    with LogManager(tmp_path, clock=clock) as manager:
        threads = [threading.Thread(target=use) for _ in range(threads_count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert opens == ["t-1"]
        assert len(got) == threads_count and all(log is got[0] for log in got)


def tear_last_batch(log: Log) -> tuple[str, int]:
    """Append a batch past the flushed ones and cut its last bytes, as a crash mid-write would."""
    log.append(batch())
    path = str(log.active_segment.log_path)
    os.truncate(path, os.path.getsize(path) - 3)
    return path, os.path.getsize(path)


def test_a_partition_first_used_after_an_unclean_shutdown_is_recovered_before_its_first_read(tmp_path, clock):
    manager = LogManager(tmp_path, clock=clock)
    for partition in range(PARTITIONS):
        manager.get_or_create("t", partition).append(batch())
        manager.get("t", partition).flush()
    manager.checkpoint_recovery_points()
    path, torn_size = tear_last_batch(manager.get("t", 3))
    manager.abandon()  # as a killed process leaves it: no close, no checkpoints, no marker
    with LogManager(tmp_path, clock=clock) as again:
        assert os.path.getsize(path) == torn_size  # nothing recovered before the first use
        log = again.get("t", 3)
        assert log.recovered_bytes > 0 and log.log_end_offset == 2
        assert [r.offset for r in log.records()] == [0, 1]
        assert os.path.getsize(path) < torn_size


def test_close_recovers_partitions_never_used_since_an_unclean_shutdown(tmp_path, clock, opens):
    manager = LogManager(tmp_path, clock=clock)
    log = manager.get_or_create("t", 0)
    log.append(batch())
    log.flush()
    manager.checkpoint_recovery_points()
    path, torn_size = tear_last_batch(log)
    manager.abandon()  # as a killed process leaves it: no close, no checkpoints, no marker
    LogManager(tmp_path, clock=clock).close()  # the partition is never used
    assert os.path.getsize(path) < torn_size  # the torn batch is gone before the marker vouches
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    opens.clear()
    with LogManager(tmp_path, clock=clock) as again:
        assert again.get("t", 0).log_end_offset == 2 and again.get("t", 0).recovered_bytes == 0


def test_retention_covers_partitions_never_used_since_the_reopen(tmp_path, clock):
    config = {"retention.ms": 60_000, "segment.bytes": 200, "log.retention.check.interval.ms": 1000,
              "log.initial.task.delay.ms": 1000, "file.delete.delay.ms": 0}
    with LogManager(tmp_path, config, clock=clock) as manager:
        log = manager.get_or_create("t", 0)
        for _ in range(5):
            log.append(batch())  # 3 segments of two batches each, the last active
    clock.advance(120_000)
    with LogManager(tmp_path, config, clock=clock, retention=apply_retention) as manager:
        clock.advance(1000)
        assert "kafka-log-retention" in manager.run_pending()
        log = manager.get("t", 0)
        assert log.log_start_offset == 10 == log.log_end_offset


def test_checkpoints_keep_the_offsets_of_partitions_never_used(tmp_path, clock):
    write_partitions(tmp_path, clock)
    with LogManager(tmp_path, clock=clock) as manager:
        manager.get("t", 0).delete_records_before(1)  # rewrites the start-offset checkpoint
    with LogManager(tmp_path, clock=clock) as manager:
        assert [(log.log_start_offset, log.recovery_point) for log in manager.logs()] == \
            [(1, 2)] + [(0, 2)] * (PARTITIONS - 1)


def test_deleting_a_partition_never_used_renames_it_unopened(tmp_path, clock, opens):
    write_partitions(tmp_path, clock)
    opens.clear()
    with LogManager(tmp_path, clock=clock) as manager:
        manager.delete("t", 1)
        manager.delete_topic("t")
        assert opens == [] and manager.partitions() == [] and manager.get("t", 0) is None
    assert not any(name.startswith("t-") and not name.endswith("-delete") for name in os.listdir(tmp_path))


def test_a_standalone_open_of_a_partition_not_yet_used_is_refused(tmp_path, clock):
    write_partitions(tmp_path, clock)
    with LogManager(tmp_path, clock=clock) as manager:
        manager.get("t", 0)
        with pytest.raises(LogLockedError, match="held by the LogManager"):
            Log.open(tmp_path / "t-3", clock=clock)


def test_a_closed_manager_opens_no_more_partitions(tmp_path, clock):
    write_partitions(tmp_path, clock)
    manager = LogManager(tmp_path, clock=clock)
    opened = manager.get("t", 0)
    manager.close()
    assert manager.get("t", 0) is opened and opened.closed
    with pytest.raises(LogClosedError):
        manager.get("t", 1)

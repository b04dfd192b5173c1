"""LogManager: partition directories, topic validation, checkpoints, clean shutdown, background tasks."""

import os

import pytest

from logstore import Log, LogManager, Record
from logstore.checkpoint import read_offsets_checkpoint
from logstore.clock import ManualClock
from logstore.errors import InvalidTopicError, LogLockedError, ReservedTopicError
from logstore.manager import Scheduler
from logstore.records import build_batch
from retention import apply_retention
from tests.support.clock import NOW


def batch(n=2):
    return build_batch([Record(i, NOW, b"k", b"v" * 20) for i in range(n)])


def test_get_or_create_makes_partition_directories(tmp_path, clock):
    with LogManager(tmp_path, {"segment.bytes": 1000}, clock=clock) as manager:
        log = manager.get_or_create("orders", 3)
        assert log.dir == tmp_path / "orders-3" and log.config.segment_bytes == 1000
        assert manager.get_or_create("orders", 3) is log
        assert manager.get("orders", 4) is None
        other = manager.get_or_create("audit.v1", 0, {"retention.ms": 5})
        assert other.config.retention_ms == 5 and other.config.segment_bytes == 1000
        assert [(x.topic, x.partition) for x in manager.logs()] == [("audit.v1", 0), ("orders", 3)]


@pytest.mark.parametrize("topic", ["", ".", "..", "a/b", "../x", "a b", "x" * 250, "ü"])
def test_topic_names_are_validated_as_kafka_does(tmp_path, clock, topic):
    with LogManager(tmp_path, clock=clock) as manager, pytest.raises(InvalidTopicError):
        manager.get_or_create(topic, 0)
    assert sorted(os.listdir(tmp_path)) == [".kafka_cleanshutdown", ".lock", "log-start-offset-checkpoint",
                                             "recovery-point-offset-checkpoint", "replication-offset-checkpoint"]


def test_a_kraft_metadata_log_is_left_to_kafkas_raft_layer(tmp_path, clock):
    """As Kafka's LogManager: `__cluster_metadata-0` is neither loaded (so no retention,
    cleaning, flush or checkpoint reaches it) nor created."""
    with Log.open(tmp_path / "__cluster_metadata-0", clock=clock) as log:
        log.append(batch(), leader_epoch=1)
    files = sorted(os.listdir(tmp_path / "__cluster_metadata-0"))
    with LogManager(tmp_path, clock=clock, retention=apply_retention) as manager:
        manager.get_or_create("orders", 0)
        assert [log.topic for log in manager.logs()] == ["orders"]
        with pytest.raises(ReservedTopicError, match="__cluster_metadata"):
            manager.get_or_create("__cluster_metadata", 0)
        manager.scheduler.run_pending(NOW + 10**12)
    assert sorted(os.listdir(tmp_path / "__cluster_metadata-0")) == files
    assert ("__cluster_metadata", 0) not in read_offsets_checkpoint(tmp_path / "recovery-point-offset-checkpoint")


def test_bad_partitions_are_rejected(tmp_path, clock):
    with LogManager(tmp_path, clock=clock) as manager:
        for partition in (-1, "0", True):
            with pytest.raises(InvalidTopicError):
                manager.get_or_create("t", partition)


def test_a_second_manager_on_the_same_directory_is_refused(tmp_path, clock):
    with LogManager(tmp_path, clock=clock), pytest.raises(LogLockedError):
        LogManager(tmp_path, clock=clock)


def test_clean_close_writes_checkpoints_and_marker_and_reopen_skips_recovery(tmp_path, clock):
    with LogManager(tmp_path, clock=clock) as manager:
        log = manager.get_or_create("t", 0)
        log.append(batch(3))
        log.append(batch(2))
        log.delete_records_before(1)
    assert read_offsets_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {("t", 0): 5}
    assert read_offsets_checkpoint(tmp_path / "log-start-offset-checkpoint") == {("t", 0): 1}
    assert read_offsets_checkpoint(tmp_path / "replication-offset-checkpoint") == {("t", 0): 5}
    assert (tmp_path / ".kafka_cleanshutdown").read_text() == '{"broker_epoch":"-1","version":"0"}'
    with LogManager(tmp_path, clock=clock) as manager:
        assert not (tmp_path / ".kafka_cleanshutdown").exists()
        log = manager.get("t", 0)
        assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (1, 5, 5)
        assert [r.offset for r in log.records()] == [1, 2, 3, 4]


def test_unclean_shutdown_recovers_from_the_recovery_point(tmp_path, clock):
    manager = LogManager(tmp_path, clock=clock)
    log = manager.get_or_create("t", 0)
    log.append(batch(2))
    log.flush()
    manager.checkpoint_recovery_points()
    log.append(batch(2))
    path = log.active_segment.log_path
    # Simulate a crash: no close; the last append is torn on disk.
    for lg in manager.logs():
        lg._release()
    manager._dir_lock.release()
    os.truncate(path, os.path.getsize(path) - 3)
    with LogManager(tmp_path, clock=clock) as again:
        log = again.get("t", 0)
        assert log.log_end_offset == 2 and log.recovered_bytes > 0


def test_log_start_offset_changes_are_checkpointed_at_once(tmp_path, clock):
    with LogManager(tmp_path, clock=clock) as manager:
        log = manager.get_or_create("t", 0)
        log.append(batch(4))
        log.delete_records_before(3)
        assert read_offsets_checkpoint(tmp_path / "log-start-offset-checkpoint") == {("t", 0): 3}


def test_delete_renames_then_removes_the_directory_later(tmp_path, clock):
    with LogManager(tmp_path, {"file.delete.delay.ms": 1000}, clock=clock) as manager:
        manager.get_or_create("t", 0).append(batch())
        renamed = manager.delete("t", 0)
        assert renamed.name.startswith("t-0.") and renamed.name.endswith("-delete") and renamed.is_dir()
        assert manager.get("t", 0) is None
        assert read_offsets_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {}
        assert manager.delete_expired_files(NOW + 999) == 0
        assert manager.delete_expired_files(NOW + 1000) == 1
        assert not renamed.exists()
        with pytest.raises(KeyError):
            manager.delete("t", 0)


def test_deleting_a_topic_of_the_longest_name_renames_within_the_file_name_limit(tmp_path, clock):
    topic = "t" * 249
    with LogManager(tmp_path, clock=clock) as manager:
        manager.get_or_create(topic, 12).append(batch())
        renamed = manager.delete(topic, 12)
        assert len(renamed.name) == 255 and renamed.name.endswith("-delete") and renamed.is_dir()
        assert renamed.name.startswith("t" * 200) and "-12." in renamed.name
    with LogManager(tmp_path, clock=clock) as manager:  # found again as a directory to remove
        assert manager.logs() == []
        manager.delete_expired_files(NOW + 60_000)
        assert not renamed.exists()


def test_deleting_a_topic_renames_every_partition_and_keeps_the_others(tmp_path, clock):
    with LogManager(tmp_path, clock=clock) as manager:
        for partition in range(3):
            manager.get_or_create("gone", partition).append(batch())
        manager.get_or_create("kept", 0).append(batch())
        renamed = manager.delete_topic("gone")
        assert [p.name.split(".")[0] for p in renamed] == ["gone-0", "gone-1", "gone-2"]
        assert all(p.name.endswith("-delete") for p in renamed)
        assert [(log.topic, log.partition) for log in manager.logs()] == [("kept", 0)]
        assert set(read_offsets_checkpoint(tmp_path / "recovery-point-offset-checkpoint")) <= {("kept", 0)}


def test_leftover_delete_directories_are_removed_in_the_background(tmp_path, clock):
    (tmp_path / "t-0.abc-delete").mkdir()
    (tmp_path / "not a partition").mkdir()
    with LogManager(tmp_path, clock=clock) as manager:
        assert manager.logs() == []
        assert "kafka-delete-logs" in manager.run_pending(NOW + 30_000)
        assert not (tmp_path / "t-0.abc-delete").exists()
        assert (tmp_path / "not a partition").exists()


def test_background_tasks_run_on_the_clock_without_sleeping(tmp_path, clock):
    config = {"log.retention.check.interval.ms": 10_000, "retention.ms": 1000, "segment.bytes": 200,
              "file.delete.delay.ms": 0, "log.flush.scheduler.interval.ms": 100, "flush.ms": 500,
              "log.initial.task.delay.ms": 0}
    with LogManager(tmp_path, config, clock=clock, retention=apply_retention) as manager:
        log = manager.get_or_create("t", 0)
        for _ in range(4):
            log.append(batch(1))
        assert log.recovery_point < log.log_end_offset
        clock.advance(500)
        assert "kafka-log-flusher" in manager.tick()
        assert log.recovery_point == log.log_end_offset
        segments = len(log.segments)
        assert segments > 1
        clock.advance(10_000)
        assert "kafka-log-retention" in manager.run_pending()
        assert log.log_start_offset > 0 and len(log.segments) < segments


def test_log_tasks_first_run_after_the_initial_task_delay(tmp_path, clock):
    """Kafka's log.initial.task.delay.ms (30 s): retention, flush, checkpoints and file
    deletion wait that long after start, then run every period."""
    log_tasks = {"kafka-log-retention", "kafka-log-flusher", "kafka-recovery-point-checkpoint",
                 "kafka-log-start-offset-checkpoint", "kafka-delete-logs"}
    with LogManager(tmp_path, clock=clock, retention=apply_retention) as manager:
        assert not log_tasks & set(manager.run_pending(NOW + 29_999))
        assert log_tasks <= set(manager.run_pending(NOW + 30_000))
        assert "kafka-log-retention" not in manager.run_pending(NOW + 30_000 + 299_999)
        assert "kafka-log-retention" in manager.run_pending(NOW + 30_000 + 300_000)


def test_a_manager_without_policies_neither_cleans_nor_deletes_old_segments(tmp_path, clock):
    config = {"retention.ms": 1000, "segment.bytes": 200, "log.initial.task.delay.ms": 0}
    with LogManager(tmp_path, config, clock=clock) as manager:
        assert manager.log_cleaner is None
        assert not {"kafka-log-retention", "kafka-log-cleaner"} & set(manager.scheduler.tasks)
        log = manager.get_or_create("t", 0)
        for _ in range(4):
            log.append(batch(1))
        clock.advance(600_000)
        manager.run_pending()
        assert log.log_start_offset == 0 and log.segments[0].base_offset == 0


def test_scheduler_runs_due_tasks_once_per_call():
    clock = ManualClock(0)
    scheduler = Scheduler(clock)
    runs = []
    scheduler.schedule("a", runs.append, 100, initial_delay_ms=50)
    assert scheduler.run_pending(49) == []
    assert scheduler.run_pending(50) == ["a"]
    assert scheduler.run_pending(149) == []
    assert scheduler.run_pending(1000) == ["a"]
    assert runs == [50, 1000]
    scheduler.cancel("a")
    assert scheduler.tasks == [] and scheduler.next_due_ms() is None
    with pytest.raises(ValueError):
        scheduler.schedule("b", runs.append, 0)


def test_start_and_close_stop_the_background_thread(tmp_path, clock):
    manager = LogManager(tmp_path, clock=clock)
    manager.start()
    manager.start()
    thread = manager._thread
    assert thread.is_alive()
    manager.close()
    assert not thread.is_alive()
    manager.close()


def test_partition_numbers_beyond_int32_are_refused(tmp_path):
    from logstore.log_files import parse_partition_dir

    assert parse_partition_dir("orders-2147483647") == ("orders", 2147483647)
    with pytest.raises(InvalidTopicError):
        parse_partition_dir("orders-99999999999999999999")

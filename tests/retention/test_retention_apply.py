"""Retention on a live Log: retention.apply_retention end to end with
a fake clock, `.deleted` files during file.delete.delay.ms, the high watermark bound, racing
readers and appenders, a crash between renaming and deleting, and a follower that follows."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logstore import Log
from logstore.checkpoint import read_offsets_checkpoint
from logstore.clock import ManualClock
from logstore.errors import OffsetOutOfRangeError, ReadOnlyLogError
from logstore.log_files import DELETED_SUFFIX, LOG_SUFFIX, SNAPSHOT_SUFFIX, segment_file_name
from logstore.replication import LEADER_OFFSET_INCREMENTED
from retention import (
    REASON_LOG_START_OFFSET,
    REASON_RETENTION_BYTES,
    REASON_RETENTION_MS,
    SegmentInfo,
    apply_retention,
    plan_for_log,
    plan_retention,
)
from tests.support.clock import NOW as T0
from tests.support.paths import KAFKA_LOGDIR, REPO_ROOT

SAMPLE = KAFKA_LOGDIR
VALUE = b"v" * 40


def open_log(path: Path, clock: ManualClock, **config) -> Log:
    settings = {"segment.bytes": 400, "retention.ms": -1, "file.delete.delay.ms": 60_000}
    settings.update({k.replace("_", "."): v for k, v in config.items()})
    return Log.open(path, settings, clock=clock)


def fill(log: Log, clock: ManualClock, n: int, step_ms: int = 1000) -> None:
    """n one-record batches, one per `step_ms` of clock time."""
    for i in range(n):
        log.append([(b"k%d" % i, VALUE)])
        clock.advance(step_ms)


def files(directory: Path) -> list[str]:
    return sorted(n for n in os.listdir(directory) if not n.startswith("."))


def deleted_files(directory: Path) -> list[str]:
    return [n for n in files(directory) if n.endswith(".deleted")]


def test_time_retention_renames_then_deletes_after_file_delete_delay(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock, retention_ms=10_000)
    fill(log, clock, 30)
    segments = log.segments
    assert len(segments) > 3
    clock.set(segments[2].largest_timestamp + 10_001)  # segments 0..2 expired, 3 is not
    snapshots = {segment_file_name(s.base_offset, SNAPSHOT_SUFFIX, DELETED_SUFFIX) for s in segments[:3]
                 if (log.dir / segment_file_name(s.base_offset, SNAPSHOT_SUFFIX)).exists()}
    assert snapshots  # taken at the rolls: they go with their segments, after the same delay
    plan = apply_retention(log)
    assert [d.segment for d in plan.deletions] == segments[:3]
    assert {d.reason for d in plan.deletions} == {REASON_RETENTION_MS}
    assert log.log_start_offset == segments[3].base_offset == plan.new_log_start_offset
    assert log.segments == segments[3:]
    base_names = {segment_file_name(s.base_offset, "") for s in segments[:3]}
    assert {n.split(".")[0] for n in deleted_files(log.dir)} == base_names
    assert {n.rsplit(".", 1)[0].split(".", 1)[1] for n in deleted_files(log.dir)} == \
        {"log", "index", "timeindex", "snapshot"}
    assert {n for n in deleted_files(log.dir) if ".snapshot." in n} == snapshots
    with pytest.raises(OffsetOutOfRangeError, match=rf"\[{log.log_start_offset}, {log.log_end_offset}\]"):
        log.read(0)

    clock.advance(59_999)
    assert log.delete_expired_files() == 0
    assert len(deleted_files(log.dir)) == 9 + len(snapshots)
    clock.advance(1)
    assert log.delete_expired_files() == 3 + len(snapshots)
    assert deleted_files(log.dir) == []
    assert read_offsets_checkpoint(tmp_path / "log-start-offset-checkpoint")[("t", 0)] == log.log_start_offset
    log.close()


def test_size_retention_keeps_at_least_retention_bytes(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    fill(log, clock, 40)
    sizes = [s.size for s in log.segments]
    limit = sum(sizes) - sizes[0] - sizes[1] - 1  # two segments must go, a third would undershoot
    log.config = log.config.with_overrides({"retention.bytes": limit})
    plan = apply_retention(log)
    assert [d.reason for d in plan.deletions] == [REASON_RETENTION_BYTES] * 2
    assert plan.bytes_reclaimed == sizes[0] + sizes[1]
    assert log.size == limit + 1
    limit = log.size - sizes[2]  # exactly one more segment's worth over: it goes, nothing else
    log.config = log.config.with_overrides({"retention.bytes": limit})
    assert len(apply_retention(log).deletions) == 1
    assert log.size == limit
    assert not apply_retention(log)
    log.close()


def test_expired_active_segment_rolls_and_log_keeps_appending(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock, retention_ms=1000)
    fill(log, clock, 10)
    end = log.log_end_offset
    clock.advance(10_000)
    plan = apply_retention(log)
    assert plan.roll_active_first
    assert len(log.segments) == 1
    assert log.active_segment.base_offset == end == log.log_start_offset
    assert log.active_segment.size == 0
    assert log.append([(b"k", b"v")]).first_offset == end
    assert [r.offset for r in log.records()] == [end]
    log.close()


def test_nothing_at_or_above_the_high_watermark_is_deleted(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock, retention_ms=0)
    log.high_watermark_follows_log_end = False
    fill(log, clock, 20)
    bases = [s.base_offset for s in log.segments]
    log.high_watermark = bases[2] + 1
    clock.advance(1000)
    plan = apply_retention(log)
    assert [d.segment.base_offset for d in plan.deletions] == bases[:2]
    assert log.log_start_offset == bases[2] <= log.high_watermark
    log.high_watermark = log.log_end_offset - 1
    apply_retention(log)
    assert len(log.segments) == 1  # the active segment holds offsets at the high watermark
    log.close()


def test_compact_policy_only_deletes_below_the_log_start_offset(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock, retention_ms=0, cleanup_policy="compact")
    fill(log, clock, 20)
    clock.advance(1000)
    assert not apply_retention(log)
    third = log.segments[2].base_offset
    log.delete_records_before(third + 1)
    plan = apply_retention(log)
    assert [d.reason for d in plan.deletions] == [REASON_LOG_START_OFFSET] * 2
    assert log.log_start_offset == third + 1
    assert log.segments[0].base_offset == third
    log.close()


def test_plan_for_log_is_what_apply_then_does(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock, retention_ms=5000)
    fill(log, clock, 20)
    preview = plan_for_log(log)
    assert preview == plan_retention(log.segments, log.config, now_ms=clock.time_ms(),
                                     log_start_offset=log.log_start_offset, high_watermark=log.high_watermark)
    assert apply_retention(log) == preview
    log.close()


def test_read_only_log_refuses_to_delete(tmp_path, clock):
    directory = tmp_path / "t-0"
    log = open_log(directory, clock)
    fill(log, clock, 20)
    log.close()
    ro = Log.open(directory, {"retention.ms": 1}, clock=clock, read_only=True)
    assert plan_for_log(ro)
    with pytest.raises(ReadOnlyLogError):
        apply_retention(ro)
    ro.close()


def test_kafka_sample_retention_by_time_and_size(tmp_path):
    shutil.copytree(SAMPLE, tmp_path / "logdir")
    directory = tmp_path / "logdir" / "plain-0"
    log = Log.open(directory, {"segment.bytes": 16384, "index.interval.bytes": 4096}, clock=ManualClock(0))
    segments = log.segments
    assert [s.base_offset for s in segments] == [0, 105, 211, 318, 426, 531, 633]
    stamps = [s.largest_timestamp for s in segments]
    retention_ms = 1000
    now = stamps[1] + retention_ms + 1
    plan = plan_retention(segments, {"retention.ms": retention_ms}, now_ms=now,
                          log_start_offset=0, high_watermark=log.high_watermark)
    expected = []
    for s in segments:
        if now - s.largest_timestamp <= retention_ms:
            break
        expected.append(s.base_offset)
    assert [d.segment.base_offset for d in plan.deletions] == expected
    assert expected == [0, 105]  # 105's newest record is retention.ms + 1 old; 211's is younger

    total = sum(s.size for s in segments)
    log.config = log.config.with_overrides({"retention.ms": -1, "retention.bytes": total - segments[0].size})
    done = apply_retention(log)
    assert [d.segment.base_offset for d in done.deletions] == [0]
    assert log.log_start_offset == 105
    assert sorted(n for n in files(directory) if n.startswith("00000000000000000000.")) == [
        "00000000000000000000.index.deleted", "00000000000000000000.log.deleted",
        "00000000000000000000.timeindex.deleted"]
    assert next(log.records()).offset == 105
    log.close()


def test_reader_holding_a_deleted_segment_finishes_or_gets_out_of_range(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock, retention_ms=1000, file_delete_delay_ms=0)
    fill(log, clock, 20)
    fetched = log.read(0, max_bytes=10_000_000)
    fetched_offsets = [b.base_offset for b in fetched.batches()]
    records = log.records(0)
    first = next(records)
    clock.advance(10_000)
    apply_retention(log)
    assert [b.base_offset for b in fetched.batches()] == fetched_offsets  # bytes already read
    assert first.offset == 0
    try:
        for _ in records:
            pass
    except OffsetOutOfRangeError:
        pass
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0)
    log.close()


def test_retention_races_appenders_and_readers(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock, retention_ms=3000, file_delete_delay_ms=500)
    errors: list[BaseException] = []
    out_of_range = [0]
    done = threading.Event()

    def appender():
        try:
            for i in range(600):
                log.append([(b"k%d" % i, VALUE)])
        except BaseException as exc:  # noqa: BLE001 - surfaced by the assertion below
            errors.append(exc)
        finally:
            done.set()

    def reader():
        try:
            while not done.is_set():
                start = log.log_start_offset
                try:
                    result = log.read(start, max_bytes=2000)
                except OffsetOutOfRangeError:
                    out_of_range[0] += 1
                    continue
                offsets = [b.base_offset for b in result.batches()]
                assert offsets == sorted(offsets)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    def janitor():
        # Works while the others do, and on until retention has run once: on a busy machine the
        # appender can finish before this thread moved the clock past retention.ms.
        try:
            while not done.is_set() or (log.log_start_offset == 0 and clock.time_ms() < T0 + 60_000):
                clock.advance(100)
                apply_retention(log)
                log.delete_expired_files()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=f) for f in (appender, reader, reader, janitor)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    offsets = [r.offset for r in log.records()]
    assert offsets == list(range(log.log_start_offset, log.log_end_offset))
    assert log.log_end_offset == 600
    assert log.log_start_offset > 0  # retention did run while the others worked
    assert log.segments[0].base_offset <= log.log_start_offset
    log.close()


CRASH_SCRIPT = textwrap.dedent(
    """
    import os, sys
    from logstore import Log
    from logstore.clock import ManualClock
    from retention import apply_retention
    clock = ManualClock({t0})
    log = Log.open(sys.argv[1], {{"segment.bytes": 400, "retention.ms": 5000,
                                  "file.delete.delay.ms": 60000}}, clock=clock)
    for i in range(30):
        log.append([(b"k%d" % i, b"v" * 40)])
        clock.advance(1000)
    log.flush()
    if sys.argv[2] == "after-rename":
        print(apply_retention(log).new_log_start_offset, flush=True)
    else:
        target = log.segments[3].base_offset
        log.maybe_increment_log_start_offset(target, "segment_deletion")
        print(target, flush=True)
    os._exit(0)  # no close: the process dies with .deleted files or undeleted segments on disk
    """
)


@pytest.mark.parametrize("moment", ["after-rename", "before-rename"])
def test_crash_between_start_offset_rename_and_delete_is_finished_on_reopen(tmp_path, clock, moment):
    directory = tmp_path / "t-0"
    out = subprocess.run([sys.executable, "-c", CRASH_SCRIPT.format(t0=T0), str(directory), moment],
                         capture_output=True, text=True, check=True, cwd=REPO_ROOT)
    start = int(out.stdout.strip())
    if moment == "after-rename":
        assert deleted_files(directory)
    else:
        assert deleted_files(directory) == []
    clock.set(T0 + 30_000)
    log = open_log(directory, clock, retention_ms=-1)
    assert deleted_files(directory) == []  # the loader finishes the interrupted delete
    assert log.log_start_offset == start
    apply_retention(log)  # what the crash left below the start goes by the start-offset rule
    assert log.segments[0].base_offset <= start < (log.segments[1].base_offset if len(log.segments) > 1 else 1 << 62)
    assert next(log.records()).offset == start
    assert log.log_end_offset == 30
    log.close()


def test_follower_follows_leader_start_offset_and_restarts_when_too_far_behind(tmp_path, clock):
    leader = open_log(tmp_path / "leader" / "t-0", clock, retention_ms=5000, file_delete_delay_ms=0)
    follower = open_log(tmp_path / "follower" / "t-0", clock, retention_ms=-1, file_delete_delay_ms=0)
    follower.high_watermark_follows_log_end = False

    def fetch_once() -> None:
        """One fetch round as an embedding application wires it."""
        try:
            fetched = leader.read(follower.log_end_offset, max_bytes=1 << 20)
        except OffsetOutOfRangeError:
            follower.truncate_fully_and_start_at(leader.log_start_offset)
            fetched = leader.read(follower.log_end_offset, max_bytes=1 << 20)
        if fetched.records:
            follower.append_as_follower(fetched.records)
        follower.high_watermark = fetched.high_watermark
        if follower.maybe_increment_log_start_offset(fetched.log_start_offset, LEADER_OFFSET_INCREMENTED):
            apply_retention(follower)  # the segments wholly below the new start go now

    fill(leader, clock, 30)
    while follower.log_end_offset < leader.log_end_offset:
        fetch_once()
    assert [r.offset for r in follower.records()] == list(range(30))

    clock.set(leader.segments[2].largest_timestamp + 5001)
    assert len(apply_retention(leader).deletions) == 3
    fetch_once()
    assert follower.log_start_offset == leader.log_start_offset
    assert all(s.base_offset >= leader.segments[0].base_offset for s in follower.segments)
    assert [s.base_offset for s in follower.segments] == [s.base_offset for s in leader.segments]

    # A follower that fell behind the leader's start restarts there.
    lagging = open_log(tmp_path / "lagging" / "t-0", clock, retention_ms=-1)
    with pytest.raises(OffsetOutOfRangeError, match=rf"valid offsets are \[{leader.log_start_offset}, "):
        leader.read(lagging.log_end_offset)
    follower.close()
    follower = lagging
    follower.high_watermark_follows_log_end = False
    fetch_once()
    assert follower.log_start_offset == leader.log_start_offset
    while follower.log_end_offset < leader.log_end_offset:
        fetch_once()
    assert [r.offset for r in follower.records()] == list(range(leader.log_start_offset, 30))
    for log in (leader, follower):
        log.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    appends=st.lists(st.tuples(st.integers(1, 150), st.integers(0, 3000)), min_size=1, max_size=25),
    retention_ms=st.sampled_from([-1, 0, 2000, 10_000]),
    retention_bytes=st.sampled_from([-1, 0, 300, 1000, 3000]),
    policy=st.sampled_from(["delete", "compact", "compact,delete"]),
    hw_back=st.integers(0, 6),
    lso_forward=st.integers(0, 30),
    wait_ms=st.integers(0, 20_000),
)
def test_apply_on_a_real_log_matches_the_plan_of_its_metadata(
    tmp_path_factory, appends, retention_ms, retention_bytes, policy, hw_back, lso_forward, wait_ms
):
    clock = ManualClock(T0)
    config = {"retention.ms": retention_ms, "retention.bytes": retention_bytes, "cleanup.policy": policy}
    log = open_log(tmp_path_factory.mktemp("p") / "t-0", clock, file_delete_delay_ms=1000)
    log.high_watermark_follows_log_end = False
    for value_size, step_ms in appends:
        log.append([(b"k", b"x" * value_size)])
        clock.advance(step_ms)
    log.high_watermark = log.log_end_offset - hw_back
    log.delete_records_before(min(lso_forward, log.high_watermark))
    log.config = log.config.with_overrides(config)
    clock.advance(wait_ms)
    infos = [SegmentInfo.of(s) for s in log.segments]
    expected = plan_retention(infos, config, now_ms=clock.time_ms(),
                              log_start_offset=log.log_start_offset, high_watermark=log.high_watermark)
    done = apply_retention(log)
    assert [(d.segment.base_offset, d.reason) for d in done.deletions] == [
        (d.segment.base_offset, d.reason) for d in expected.deletions]
    assert (done.new_log_start_offset, done.bytes_reclaimed, done.roll_active_first) == (
        expected.new_log_start_offset, expected.bytes_reclaimed, expected.roll_active_first)
    assert log.log_start_offset == expected.new_log_start_offset
    kept = [i.base_offset for i in infos[len(expected.deletions):]]
    if expected.roll_active_first:
        kept.append(infos[-1].next_offset)
    assert [s.base_offset for s in log.segments] == kept
    gone = {segment_file_name(d.segment.base_offset, LOG_SUFFIX, DELETED_SUFFIX) for d in expected.deletions}
    assert gone <= set(files(log.dir))
    log.close()

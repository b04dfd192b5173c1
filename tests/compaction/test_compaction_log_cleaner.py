"""Background cleaning: LogManager's cleaner task, dirtiest first, threads, stop wait/abandon,
and cleanup.policy=compact,delete running both retention and compaction."""

from __future__ import annotations

import threading
import time

from compaction.cleaner import Cleaner
from compaction.log_cleaner import LogCleaner
from logstore.clock import ManualClock
from logstore.manager import LogManager
from retention import apply_retention

DAY = 24 * 3600 * 1000
BASE = {"segment.bytes": 1024, "file.delete.delay.ms": 0, "log.cleaner.backoff.ms": 1000}


def _manager(tmp_path, config, clock) -> LogManager:
    """A LogManager with the cleaner and the retention pass, as a broker runs one."""
    return LogManager(tmp_path, config, clock=clock, cleaner=LogCleaner, retention=apply_retention)


def _fill(log, n, keys, tag=b"v"):
    for i in range(n):
        log.append([(b"k%d" % (i % keys), tag + b"%d" % i)])


def test_manager_cleans_due_compacted_logs_on_its_schedule(tmp_path):
    clock = ManualClock(10**12)
    with _manager(tmp_path, BASE, clock) as mgr:
        compacted = mgr.get_or_create("users", 0, {"cleanup.policy": "compact"})
        plain = mgr.get_or_create("events", 0, {"cleanup.policy": "delete", "retention.ms": -1})
        _fill(compacted, 200, 5)
        _fill(plain, 200, 5)
        compacted.roll()
        plain.roll()
        plain_before = [r.offset for r in plain.records()]
        clock.advance(1000)
        assert "kafka-log-cleaner" in mgr.run_pending()
        assert [r.value for r in compacted.records()] == [b"v%d" % i for i in range(195, 200)]
        assert [r.offset for r in plain.records()] == plain_before  # never compacted
        assert mgr.log_cleaner.results[-1].topic == "users"
        assert (tmp_path / "cleaner-offset-checkpoint").read_text().splitlines()[2] == "users 0 200"


def test_dirtiest_log_is_cleaned_first_and_clean_logs_are_left_alone(tmp_path):
    clock = ManualClock(10**12)
    with _manager(tmp_path, BASE, clock) as mgr:
        a = mgr.get_or_create("a", 0, {"cleanup.policy": "compact"})
        b = mgr.get_or_create("b", 0, {"cleanup.policy": "compact"})
        _fill(a, 100, 3)
        a.roll()
        _fill(b, 100, 3)
        b.roll()
        cleaner = LogCleaner(mgr.logs, BASE, clock=clock)
        first = cleaner.run_once()
        second = cleaner.run_once()
        assert {first.topic, second.topic} == {"a", "b"}
        assert cleaner.run_once() is None  # ratio now 0: nothing due
        _fill(b, 100, 3, b"w")
        b.roll()
        assert cleaner.run_once().topic == "b"


def test_compact_delete_policy_runs_retention_and_compaction(tmp_path):
    # Segments emptied by cleaning are dated by their files' mtime (as in Kafka), so this
    # clock starts at the wall-clock time the files get.
    clock = ManualClock(time.time_ns() // 1_000_000)
    with _manager(tmp_path, {**BASE, "log.retention.check.interval.ms": 1000}, clock) as mgr:
        log = mgr.get_or_create("cd", 0, {"cleanup.policy": "compact,delete", "retention.ms": DAY})
        _fill(log, 100, 4)
        log.roll()
        clock.advance(1000)
        mgr.run_pending()
        assert len(list(log.records())) == 4  # compacted
        clock.advance(2 * DAY)
        log.append([(b"fresh", b"1")])
        mgr.run_pending()
        assert [r.key for r in log.records()] == [b"fresh"]  # old segments deleted by retention


def test_threads_clean_in_the_background_and_stop_waits(tmp_path):
    clock = ManualClock(10**12)
    mgr = _manager(tmp_path, {**BASE, "log.cleaner.threads": 2}, clock)
    log = mgr.get_or_create("t", 0, {"cleanup.policy": "compact"})
    _fill(log, 300, 4)
    log.roll()
    done = threading.Event()
    original = Cleaner.clean

    def clean(self, lg, **kw):
        result = original(self, lg, **kw)
        done.set()
        return result

    Cleaner.clean = clean
    try:
        mgr.start()
        assert mgr.log_cleaner.running
        assert done.wait(20)
    finally:
        mgr.close()
        Cleaner.clean = original
    assert not mgr.log_cleaner.running


def test_stop_without_waiting_abandons_a_clean_safely(tmp_path):
    clock = ManualClock(10**12)
    mgr = _manager(tmp_path, BASE, clock)
    log = mgr.get_or_create("t", 0, {"cleanup.policy": "compact"})
    _fill(log, 300, 4)
    log.roll()
    before = [(r.offset, r.value) for r in log.records()]
    first_segment_end = log.segments[1].base_offset
    entered, release = threading.Event(), threading.Event()
    original_chunk, original_abort = Cleaner._clean_chunk, Cleaner.abort

    def slow(self, *args, **kw):
        entered.set()
        release.wait(10)
        return original_chunk(self, *args, **kw)

    def abort(self):
        original_abort(self)
        release.set()  # the abort request is in before the first segment finishes

    Cleaner._clean_chunk, Cleaner.abort = slow, abort
    try:
        mgr.log_cleaner.start()
        assert entered.wait(20)
        mgr.log_cleaner.stop(wait=False)
    finally:
        Cleaner._clean_chunk, Cleaner.abort = original_chunk, original_abort
    # The group in hand was finished and swapped; the clean stopped before the next one.
    assert [(r.offset, r.value) for r in log.records()] == [x for x in before if x[0] >= first_segment_end]
    assert not any(p.name.endswith((".cleaned", ".swap")) for p in (tmp_path / "t-0").iterdir())
    assert not (tmp_path / "cleaner-offset-checkpoint").exists()
    mgr.close()


def test_exclusive_keeps_the_cleaner_off_a_log(tmp_path):
    clock = ManualClock(10**12)
    with _manager(tmp_path, BASE, clock) as mgr:
        log = mgr.get_or_create("t", 0, {"cleanup.policy": "compact"})
        _fill(log, 100, 3)
        log.roll()
        with mgr.log_cleaner.exclusive(log):
            assert mgr.log_cleaner.run_once() is None
        assert mgr.log_cleaner.run_once().topic == "t"

"""The descriptor pool: segments' `.log` descriptors and mapped indexes within one bounded budget,
given back least recently used first, taken again on next use, pinned while sent from; running
out is a DescriptorLimitError naming the limit."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logstore import Log, LogManager, descriptor_pool
from logstore.clock import ManualClock
from logstore.descriptor_pool import DescriptorPool, capacity_for, process_pool
from logstore.errors import DescriptorLimitError, LogLockedError
from logstore.lock import LOCK_FILE_NAME
from tests.support.clock import NOW
from tests.support.paths import REPO_ROOT

TINY = 4


@pytest.fixture
def tiny_pool(monkeypatch):
    """A process pool of TINY descriptors for the test's segments, so that what earlier tests in
    this process left in the shared pool (a log never closed) does not take part of it."""
    pool = DescriptorPool(TINY)
    monkeypatch.setattr(descriptor_pool, "_process_pool", pool)
    assert process_pool() is pool
    return pool


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def values(log: Log, offset: int = 0) -> list[bytes]:
    return [r.value for r in log.records() if r.offset >= offset]


def test_capacity_leaves_headroom_for_sockets_and_the_interpreter():
    assert capacity_for(1024) == 768
    assert capacity_for(100) == 68
    assert capacity_for(20) == 1


def test_a_manager_holds_no_more_descriptors_than_its_pool(tmp_path, tiny_pool, clock):
    before = open_descriptors()
    with LogManager(tmp_path, clock=clock) as manager:
        logs = [manager.get_or_create("t", p) for p in range(20)]
        for p, log in enumerate(logs):
            log.append([(b"k", b"%d" % p)])
        for p, log in enumerate(logs):
            assert values(log) == [b"%d" % p]
            assert tiny_pool.in_use <= TINY
        assert open_descriptors() - before <= TINY + 1  # + the data directory's lock
    assert open_descriptors() <= before  # fewer when segments left open elsewhere gave theirs back


@pytest.mark.parametrize("let_go", [Log.close, Log.abandon], ids=["closed", "abandoned"])
def test_a_log_let_go_holds_no_descriptor_not_even_for_segments_awaiting_deletion(tmp_path, clock, let_go):
    before = open_descriptors()
    log = Log.open(tmp_path / "t-0", {"segment.bytes": 200, "file.delete.delay.ms": 60_000}, clock=clock)
    for i in range(12):
        log.append([(b"k", b"v%03d" % i)])
    log.truncate_fully_and_start_at(100)
    assert log.pending_deletes and all(s.descriptors.held for s in log.pending_deletes)
    let_go(log)
    assert open_descriptors() == before
    with Log.open(tmp_path / "t-0", clock=clock) as reopened:  # the .deleted files go at load
        assert (reopened.log_start_offset, reopened.log_end_offset) == (100, 100)
    assert not list((tmp_path / "t-0").glob("*.deleted"))


def test_a_log_given_back_and_reopened_keeps_every_write_and_index_entry(tmp_path, tiny_pool, clock):
    config = {"segment.bytes": 2000, "index.interval.bytes": 100}
    with Log.open(tmp_path / "a-0", config, clock=clock) as a, Log.open(tmp_path / "b-0", config, clock=clock) as b:
        for i in range(60):  # each append to one log takes the other's descriptors
            a.append([(b"k", b"a%03d" % i)])
            b.append([(b"k", b"b%03d" % i)])
        assert len(a.segments) > 1 and all(s.offset_index.entry_count for s in a.segments[:-1])
        for offset in (0, 17, 59):
            assert values(a, offset)[0] == b"a%03d" % offset
            assert a.read(offset).first_offset <= offset
        entries = [(s.offset_index.entry_count, s.time_index.entry_count) for s in a.segments]
    with Log.open(tmp_path / "a-0", config, clock=clock) as a:
        assert a.had_clean_shutdown  # no index needed rebuilding
        assert values(a) == [b"a%03d" % i for i in range(60)]
        assert [(s.offset_index.entry_count, s.time_index.entry_count) for s in a.segments] == entries


def append_or_read(log: Log, model: list[bytes], op: str, partition: int, n: int) -> int:
    """Append 1-3 records to `log` and `model`, or check `log` reads what `model` holds from an
    offset picked by `n`; the offset read from."""
    if op == "append":
        batch = [b"%d-%d-%d" % (partition, len(model), i) for i in range(n % 3 + 1)]
        log.append([(b"k", v) for v in batch])
        model += batch
        return len(model)
    offset = n % (len(model) + 1)
    assert values(log, offset) == model[offset:]
    return offset


OPS = st.lists(st.tuples(st.sampled_from(["append", "read", "flush", "reopen"]), st.integers(0, 2),
                         st.integers(0, 9)), max_size=30)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_logs_through_a_tiny_pool_read_what_a_list_model_holds(tmp_path_factory, tiny_pool, ops):
    """Appends and reads of three partitions with several segments each, through a pool of four
    descriptors, give what an unbounded list holds; reopens included."""
    directory = tmp_path_factory.mktemp("data")
    config = {"segment.bytes": 300, "index.interval.bytes": 50}
    model: dict[int, list[bytes]] = {p: [] for p in range(3)}
    manager = LogManager(directory, config, clock=ManualClock(NOW))
    try:
        for op, partition, n in ops:
            log = manager.get_or_create("t", partition)
            if op in ("append", "read"):
                offset = append_or_read(log, model[partition], op, partition, n)
                if op == "read":
                    got = log.read(offset, max_bytes=1)  # one batch, the one holding `offset`
                    assert offset == len(model[partition]) or got.first_offset <= offset
            elif op == "flush":
                log.flush()
            else:
                manager.close()
                manager = LogManager(directory, config, clock=ManualClock(NOW))
            assert tiny_pool.in_use <= TINY
        for partition, expected in model.items():
            assert values(manager.get_or_create("t", partition)) == expected
    finally:
        manager.close()


CRASH_OPS = st.lists(st.tuples(st.sampled_from(["append", "read", "flush", "roll", "crash"]), st.integers(0, 1),
                               st.integers(0, 9)), max_size=30)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=CRASH_OPS)
def test_a_flush_fsyncs_every_log_file_written_before_it_though_its_descriptor_was_given_back(
        tmp_path_factory, tiny_pool, monkeypatch, ops):
    """Two logs sharing a pool of four descriptors (each append takes the other's back): after
    every flush each `.log` file was fsynced at its current size, and a crash (no flush, no close)
    then reopen keeps every record. A crash in-process keeps the page cache, so the fsyncs are spied."""
    synced: dict[tuple[int, int], int] = {}  # (device, inode) -> size when last fsynced
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        real_fsync(fd)
        st_ = os.fstat(fd)
        synced[(st_.st_dev, st_.st_ino)] = st_.st_size

    monkeypatch.setattr(os, "fsync", spy)
    directory = tmp_path_factory.mktemp("data")
    config = {"segment.bytes": 300, "index.interval.bytes": 50}
    clock = ManualClock(NOW)
    paths = [directory / f"t-{p}" for p in range(2)]
    logs = [Log.open(path, config, clock=clock) for path in paths]
    model: list[list[bytes]] = [[], []]
    try:
        for op, p, n in ops:
            log = logs[p]
            if op in ("append", "read"):
                append_or_read(log, model[p], op, p, n)
            elif op == "flush":
                log.flush()
                for file in sorted(paths[p].glob("*.log")):
                    st_ = file.stat()
                    assert synced.get((st_.st_dev, st_.st_ino), 0) == st_.st_size, f"{file} not fsynced"
            elif op == "roll":
                log.roll()
            else:
                log._release()  # a killed process: no flush, no close, no checkpoint
                logs[p] = Log.open(paths[p], config, clock=clock)
                assert values(logs[p]) == model[p]
            assert tiny_pool.in_use <= TINY
    finally:
        for log in logs:
            log.close()


UNLOCKED = "reader-without-the-log-lock"


def race_with_a_fetch(log: Log, others: list, read: Callable[[], object], paused: threading.Event,
                      go: threading.Event) -> object:
    """Run `read` on a thread named UNLOCKED (without the log's lock); once it signals `paused`
    (mid-read, its hook waits for `go`), fetch under the lock from the log's first segment, then
    read and map every segment of `others` (the pool gives the first back if it may); what
    `read` returned, or the error it raised."""
    result: list[object] = []

    def run() -> None:
        try:
            result.append(read())
        except BaseException as exc:  # noqa: BLE001 -- the caller compares it
            result.append(exc)

    worker = threading.Thread(target=run, name=UNLOCKED)
    worker.start()
    try:
        assert paused.wait(10)
        with log.locked():
            log.read(0)
            for segment in others:
                segment.read_bytes(0, 1)
                segment.offset_index.entry_count  # noqa: B018 -- maps it
    finally:
        go.set()
        worker.join()
    return result[0]


def test_a_read_outside_the_logs_lock_keeps_its_descriptor_while_a_reader_under_the_lock_takes_others(
        tmp_path, tiny_pool, clock, monkeypatch):
    """The cleaner reads segments without their Log's lock: a fetch under the lock that reads the
    same segment, then others, must not close the descriptor under that read (its number would
    be reused by the next file opened, and the read would return another segment's bytes)."""
    with Log.open(tmp_path / "t-0", {"segment.bytes": 200}, clock=clock) as log:
        for i in range(12):
            log.append([(b"k", b"v%03d" % i)])
        old, *others = log.segments
        assert len(others) >= 3
        expected = old.read_bytes(0, old.size)
        real_pread, reading, go = os.pread, threading.Event(), threading.Event()

        def pread(fd: int, size: int, position: int) -> bytes:
            if threading.current_thread().name == UNLOCKED and not reading.is_set():
                reading.set()  # the worker holds the descriptor's number: now the fetch runs
                go.wait(10)
            return real_pread(fd, size, position)

        monkeypatch.setattr(os, "pread", pread)
        assert race_with_a_fetch(log, others, lambda: old.read_bytes(0, old.size), reading, go) == expected


def test_an_index_lookup_outside_the_logs_lock_keeps_its_mapping_while_a_reader_under_the_lock_takes_others(
        tmp_path, tiny_pool, clock):
    """As for the `.log`: an index read without the Log's lock (the cleaner's) is not unmapped
    under it by a fetch under the lock that reads the same segment, then others."""
    with Log.open(tmp_path / "t-0", {"segment.bytes": 400, "index.interval.bytes": 50}, clock=clock) as log:
        for i in range(24):
            log.append([(b"k", b"v%03d" % i)])
        old, *others = log.segments
        index = old.offset_index
        expected = (index.entries().tolist(), index.lookup(old.next_offset - 1))
        assert len(others) >= 3 and expected[0]
        loaded, go = threading.Event(), threading.Event()
        real_ensure_loaded = index._ensure_loaded

        def ensure_loaded() -> None:
            real_ensure_loaded()
            if threading.current_thread().name == UNLOCKED and not loaded.is_set():
                loaded.set()  # mapped for the worker: now the fetch runs
                go.wait(10)

        index._ensure_loaded = ensure_loaded
        got = race_with_a_fetch(log, others, lambda: (index.entries().tolist(), index.lookup(old.next_offset - 1)),
                                loaded, go)
        assert got == expected


def test_a_pinned_segment_keeps_its_descriptor_while_others_come_and_go(tmp_path, tiny_pool, clock):
    with LogManager(tmp_path, clock=clock) as manager:
        pinned_log = manager.get_or_create("t", 0)
        pinned_log.append([(b"k", b"sent")])
        others = [manager.get_or_create("t", p) for p in range(1, 10)]
        for p, log in enumerate(others):
            log.append([(b"k", b"%d" % p)])  # t-0 gives its descriptors back
        segment = pinned_log.segments[-1]
        assert segment.descriptors.held == 0
        with segment.pinned() as fd:  # only the .log: one descriptor of four
            for p, log in enumerate(others):
                log.append([(b"k", b"more")])
                assert values(log) == [b"%d" % p, b"more"]
            assert segment.descriptors.held == 1
            assert os.pread(fd, segment.size, 0) == segment.read_bytes(0, segment.size)
        assert values(pinned_log) == [b"sent"]


def test_running_out_of_descriptors_is_an_error_naming_the_limit(tmp_path, tiny_pool, clock):
    with LogManager(tmp_path, clock=clock) as manager:
        first, second = manager.get_or_create("t", 0), manager.get_or_create("t", 1)
        first.append([(b"k", b"first")])
        pinned = first.segments[-1].descriptors
        assert pinned.held == 3  # its .log and both indexes, of four
        with tiny_pool.pinned(pinned):
            with pytest.raises(DescriptorLimitError, match=r"pinned.*RLIMIT_NOFILE soft limit \d+.*ulimit -n"):
                second.append([(b"k", b"second")])  # needs three
            assert values(first) == [b"first"]
        second.append([(b"k", b"second")])
        assert values(second) == [b"second"] and values(first) == [b"first"]


# Under a limit of 64 descriptors, with the headroom eaten by files the process keeps open, a
# LogManager's next partition fails for want of descriptors outside the pool (checkpoints, locks).
OUT_OF_HEADROOM = """
import os, resource, sys
from logstore import LogManager
from logstore.errors import DescriptorLimitError
resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
with LogManager(sys.argv[1]) as manager:
    held = []
    try:
        while True:
            held.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    try:
        manager.get_or_create("t", 0).append([(b"k", b"v")])
    except DescriptorLimitError as exc:
        print(exc)
    for fd in held:
        os.close(fd)
"""


def test_a_process_out_of_descriptors_gets_an_error_naming_the_limit_not_an_oserror(tmp_path):
    result = subprocess.run([sys.executable, "-c", OUT_OF_HEADROOM, str(tmp_path)], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "t-0" in result.stdout and "RLIMIT_NOFILE soft limit 64" in result.stdout
    assert "ulimit -n" in result.stdout


class _Holder:
    """A holder of one counted descriptor, used under `guard`."""

    def __init__(self, pool: DescriptorPool, guard: threading.RLock | None):
        import numpy as np

        self.account = pool.account(self, np.zeros(2, np.int64))
        self.account.guard = guard
        self.open = False

    def use(self) -> None:
        self.account.touch()
        if not self.open:
            self.account.acquire()
            self.open = True

    def release_descriptors(self) -> None:
        if self.open:
            self.open = False
            self.account.release()


def test_a_segment_busy_under_its_log_lock_in_another_thread_is_not_taken_back():
    pool = DescriptorPool(1)
    guard = threading.RLock()
    busy = _Holder(pool, guard)
    with guard:
        busy.use()
    holding, done = threading.Event(), threading.Event()

    def hold_lock():
        with guard:
            holding.set()
            done.wait()

    thread = threading.Thread(target=hold_lock)
    thread.start()
    holding.wait()
    try:
        with pytest.raises(DescriptorLimitError):
            _Holder(pool, None).use()
        assert busy.open
    finally:
        done.set()
        thread.join()
    _Holder(pool, None).use()  # the lock is free: the least recently used holder gives its back
    assert not busy.open


def test_a_standalone_open_of_a_managed_partition_is_refused(tmp_path, clock):
    with LogManager(tmp_path, clock=clock) as manager:
        manager.get_or_create("t", 0)
        with pytest.raises(LogLockedError, match="held by the LogManager"):
            Log.open(tmp_path / "t-0", clock=clock)
        with Log.open(tmp_path / "other-0", clock=clock) as other:  # not one of the manager's
            with pytest.raises(LogLockedError):
                manager.get_or_create("other", 0)
            other.append([(b"k", b"v")])
    Log.open(tmp_path / "t-0", clock=clock).close()


def test_a_partition_in_another_processs_managed_directory_is_refused(tmp_path, clock):
    (tmp_path / "t-0").mkdir()
    # Another process's LogManager holds the data directory's lock exclusively (flock belongs to
    # the open file description, so this descriptor stands for that process).
    other = os.open(tmp_path / LOCK_FILE_NAME, os.O_RDWR | os.O_CREAT)
    import fcntl

    fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        with pytest.raises(LogLockedError, match="another process"):
            Log.open(tmp_path / "t-0", clock=clock)
    finally:
        os.close(other)
    Log.open(tmp_path / "t-0", clock=clock).close()


# Opens `partitions` partitions under a descriptor `limit` (argv: directory, limit, partitions), appends to all, reads all,
# closes, reopens and reads again, checking every record; prints the most descriptors
# the process had open at once.
MANY_PARTITIONS = """
import os, resource, sys
directory, limit, partitions = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(limit, hard), hard))
from logstore import LogManager

peak = 0
def sample():
    global peak
    peak = max(peak, len(os.listdir("/proc/self/fd")))

def check(log, expected):
    assert [r.value for r in log.records()] == expected, (log.name, expected)

with LogManager(directory, {"segment.index.bytes": 4096}) as manager:
    logs = [manager.get_or_create("t", p) for p in range(partitions)]
    for p, log in enumerate(logs):
        log.append([(b"k", b"%d" % p)])
        if p % 500 == 0:
            sample()
    for p, log in enumerate(logs):
        check(log, [b"%d" % p])
    sample()
with LogManager(directory) as manager:
    logs = manager.logs()
    assert len(logs) == partitions
    for log in logs:
        check(log, [b"%d" % log.partition])
    sample()
print(peak)
"""


@pytest.mark.slow
def test_ten_thousand_partitions_open_append_read_and_reopen_under_a_limit_of_1024(tmp_path):
    """The issue's acceptance test. The data sits on a tmpfs when there is one (/dev/shm): the
    test counts descriptors, and 10,000 partitions' fsyncs on a disk would take minutes."""
    limit, partitions = 1024, 10_000
    shm = "/dev/shm"
    directory = Path(tempfile.mkdtemp(dir=shm)) if os.path.isdir(shm) else tmp_path / "data"
    try:
        result = subprocess.run([sys.executable, "-c", MANY_PARTITIONS, str(directory), str(limit), str(partitions)],
                                cwd=REPO_ROOT,
                                capture_output=True, text=True, timeout=600, check=False)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert int(result.stdout.split()[-1]) < limit

"""Clock, directory lock and checkpoint files: the small pieces Log and LogManager stand on."""

import multiprocessing
import os

import pytest

from logstore.checkpoint import (
    atomic_write,
    read_checkpoint,
    read_offsets_checkpoint,
    write_checkpoint,
    write_offsets_checkpoint,
)
from logstore.clock import ManualClock, SystemClock
from logstore.errors import CorruptCheckpointError, LogLockedError
from logstore.lock import DirectoryLock
from tests.support.paths import KAFKA_LOGDIR


def test_manual_clock_moves_only_when_told():
    clock = ManualClock(1000)
    assert clock.time_ms() == 1000
    assert clock.advance(5) == 1005
    clock.set(10)
    assert clock.time_ms() == 10
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_system_clock_is_epoch_milliseconds():
    assert SystemClock().time_ms() > 1_600_000_000_000


def test_second_lock_in_same_process_fails_until_released(tmp_path):
    first = DirectoryLock(tmp_path).acquire()
    with pytest.raises(LogLockedError, match=str(tmp_path)):
        DirectoryLock(tmp_path).acquire()
    first.release()
    with DirectoryLock(tmp_path) as again:
        assert again.held
    assert (tmp_path / ".lock").exists()


def _try_lock(path, queue):
    try:
        DirectoryLock(path).acquire()
        queue.put("acquired")
    except LogLockedError:
        queue.put("locked")


def test_lock_held_against_another_process(tmp_path):
    lock = DirectoryLock(tmp_path).acquire()
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_try_lock, args=(str(tmp_path), queue))
    child.start()
    child.join(30)
    assert queue.get(timeout=10) == "locked"
    lock.release()


def test_offsets_checkpoint_reads_kafkas_files():
    assert read_offsets_checkpoint(os.path.join(KAFKA_LOGDIR, "recovery-point-offset-checkpoint")) == {
        ("plain", 0): 720
    }
    assert read_offsets_checkpoint(os.path.join(KAFKA_LOGDIR, "log-start-offset-checkpoint")) == {
        ("plain", 0): 0
    }


def test_offsets_checkpoint_is_byte_identical_to_kafkas(tmp_path):
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_offsets_checkpoint(path, {("plain", 0): 720})
    with open(os.path.join(KAFKA_LOGDIR, "recovery-point-offset-checkpoint"), "rb") as f:
        assert path.read_bytes() == f.read()
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


def test_missing_checkpoint_reads_empty(tmp_path):
    assert read_checkpoint(tmp_path / "nope", (int, int)) == []


@pytest.mark.parametrize(
    "text, where",
    [
        ("1\n0\n", "line 1"),
        ("0\n2\n0 5\n", "line 2"),
        ("0\n1\n0 x\n", "line 3"),
        ("0\n1\n0 1 2\n", "line 3"),
        ("zero\n", "truncated"),
        ("x\n0\n", "line 1"),
    ],
)
def test_malformed_checkpoint_names_file_and_line(tmp_path, text, where):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text(text)
    with pytest.raises(CorruptCheckpointError, match=where) as info:
        read_checkpoint(path, (int, int))
    assert "leader-epoch-checkpoint" in str(info.value)


def test_checkpoint_round_trip_and_atomic_replace(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    write_checkpoint(path, [(0, 0), (3, 120)])
    assert path.read_text() == "0\n2\n0 0\n3 120\n"
    assert read_checkpoint(path, (int, int)) == [(0, 0), (3, 120)]
    atomic_write(path, b"0\n0\n")
    assert read_checkpoint(path, (int, int)) == []
    assert sorted(os.listdir(tmp_path)) == ["leader-epoch-checkpoint"]


@pytest.mark.parametrize("offset", ["99999999999999999999", "1_000", "\u0661\u0662", "0x10", " 5"])
def test_checkpoint_offsets_are_java_longs(tmp_path, offset):
    path = tmp_path / "log-start-offset-checkpoint"
    path.write_text(f"0\n1\nt 0 {offset}\n")
    with pytest.raises(CorruptCheckpointError, match="line 3"):
        read_offsets_checkpoint(path)


def test_checkpoint_with_crlf_line_endings_reads(tmp_path):
    path = tmp_path / "log-start-offset-checkpoint"
    path.write_bytes(b"0\r\n1\r\nt 0 -9223372036854775808\r\n")
    assert read_offsets_checkpoint(path) == {("t", 0): -(2**63)}

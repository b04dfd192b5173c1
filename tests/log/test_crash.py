"""Crash safety: SIGKILL during appends and flushes, torn and corrupted segment tails, lost indexes."""

import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from logstore import Log, Record
from logstore.clock import ManualClock
from logstore.records import build_batch, iter_batches
from tests.support.clock import NOW

CONFIG = {"segment.bytes": 2048, "index.interval.bytes": 256}

CHILD = textwrap.dedent(
    """
    import random, sys
    from logstore import Log, Record
    from logstore.records import build_batch
    path, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    log = Log.open(path, {"segment.bytes": 2048, "index.interval.bytes": 256})
    next_offset = log.log_end_offset
    print("ready", flush=True)
    while True:
        n = rng.randint(1, 5)
        records = [Record(i, 1_700_000_000_000 + next_offset + i, b"k%d" % (next_offset + i),
                          b"v%d" % (next_offset + i) * rng.randint(1, 20)) for i in range(n)]
        log.append(build_batch(records, compression=rng.choice(["none", "gzip", "lz4"])))
        next_offset += n
        if rng.random() < 0.3:
            log.flush()
            print("flushed", log.recovery_point, flush=True)
    """
)


def check_log(path: Path, *, at_least: int = 0) -> Log:
    """Reopen and check: dense offsets with the child's values, indexes consistent with the log."""
    log = Log.open(path, CONFIG, clock=ManualClock(NOW + 10**9))
    assert log.log_end_offset >= at_least
    expected = 0
    for record in log.records():
        assert record.offset == expected
        assert record.key == b"k%d" % expected and record.value.startswith(b"v%d" % expected)
        expected += 1
    assert expected == log.log_end_offset
    for segment in log.segments:
        segment.sanity_check()
        batches = {}
        for batch in segment.iter_batches():
            assert batch.is_valid()
            batches[batch.position] = batch
        for offset, position in segment.offset_index.entries().tolist():
            assert batches[position].last_offset == offset
        last_offsets = {b.last_offset: b for b in batches.values()}
        running = -1
        for timestamp, offset in segment.time_index.entries().tolist():
            assert offset in last_offsets and timestamp > running
            running = timestamp
    return log


def run_child_and_kill(path: Path, seed: int, kill_after_lines: int) -> int:
    script = path.parent / "child.py"
    script.write_text(CHILD)
    proc = subprocess.Popen([sys.executable, str(script), str(path), str(seed)], stdout=subprocess.PIPE,
                            text=True, cwd=os.getcwd())
    flushed = 0
    try:
        for _ in range(kill_after_lines):
            line = proc.stdout.readline()
            if not line:
                break
            if line.startswith("flushed"):
                flushed = int(line.split()[1])
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    return flushed


@pytest.mark.parametrize("seed", range(3))
def test_sigkill_keeps_every_flushed_record(tmp_path, seed):
    path = tmp_path / "crash-0"
    flushed = 0
    rng = random.Random(seed)
    for round_ in range(2):
        flushed = max(flushed, run_child_and_kill(path, seed * 10 + round_, rng.randint(2, 40)))
        check_log(path, at_least=flushed).close()


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10))
def test_sigkill_loop(tmp_path, seed):
    path = tmp_path / "crash-0"
    flushed = 0
    rng = random.Random(1000 + seed)
    for round_ in range(5):
        flushed = max(flushed, run_child_and_kill(path, seed * 100 + round_, rng.randint(1, 200)))
        check_log(path, at_least=flushed).close()


def build_log(path: Path, batches: int, seed: int) -> list[int]:
    """A closed log of `batches` batches; returns each batch's end position in the active segment."""
    rng = random.Random(seed)
    with Log.open(path, CONFIG, clock=ManualClock(NOW + 10**9)) as log:
        offset = 0
        for _ in range(batches):
            n = rng.randint(1, 4)
            records = [Record(i, NOW + offset + i, b"k%d" % (offset + i), b"v%d" % (offset + i)) for i in range(n)]
            log.append(build_batch(records, compression=rng.choice(["none", "zstd"])))
            offset += n
    return offset


def _forget_recovery_point(path: Path) -> None:
    """What a crash leaves: no recovery point past the last checkpoint, no clean-shutdown marker."""
    (path.parent / "recovery-point-offset-checkpoint").unlink()
    (path.parent / ".kafka_cleanshutdown").unlink()


def _active_log_file(path: Path) -> Path:
    return sorted(path.glob("*.log"))[-1]


@pytest.mark.parametrize("seed", range(8))
def test_random_truncation_of_the_active_segment_recovers_a_valid_prefix(tmp_path, seed):
    path = tmp_path / "t-0"
    build_log(path, 30, seed)
    active = _active_log_file(path)
    full = active.read_bytes()
    cut = random.Random(seed).randrange(len(full))
    os.truncate(active, cut)
    ends = [0] + [b.position + b.size_in_bytes for b in iter_batches(full)]
    keep = max(e for e in ends if e <= cut)
    _forget_recovery_point(path)
    log = check_log(path)
    assert log.recovered_bytes == cut - keep
    assert active.stat().st_size == keep
    log.close()


@pytest.mark.parametrize("seed", range(8))
def test_random_byte_corruption_of_the_active_segment_recovers_a_valid_prefix(tmp_path, seed):
    path = tmp_path / "t-0"
    build_log(path, 30, seed)
    active = _active_log_file(path)
    data = bytearray(active.read_bytes())
    batches = list(iter_batches(bytes(data)))
    rng = random.Random(seed)
    # baseOffset and partitionLeaderEpoch lie outside the CRC (Kafka cannot detect them either):
    # corrupt the length field or a CRC-covered byte.
    victim = rng.choice(batches)
    where = victim.position + rng.choice([8, 9, 10, 11, 16, *range(17, victim.size_in_bytes)])
    data[where] ^= 1 << rng.randrange(8)
    active.write_bytes(bytes(data))
    _forget_recovery_point(path)
    log = check_log(path)
    assert active.stat().st_size == victim.position
    assert log.recovered_bytes == len(data) - victim.position
    log.close()


def test_lost_indexes_of_every_segment_are_rebuilt_identically(tmp_path):
    path = tmp_path / "t-0"
    build_log(path, 40, 7)
    originals = {p.name: p.read_bytes() for p in path.iterdir() if p.suffix in (".index", ".timeindex")}
    assert len(originals) >= 4
    for name in originals:
        (path / name).unlink()
    check_log(path).close()
    assert {p.name: p.read_bytes() for p in path.iterdir() if p.suffix in (".index", ".timeindex")} == originals

"""A read-only open recovers in memory: it shows what Kafka's recovery keeps and writes no byte;
a raw one shows every byte on disk, damage included."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from logstore import Log
from logstore.clock import ManualClock
from logstore.errors import CorruptRecordError
from logstore.log_files import CLEAN_SHUTDOWN_FILE
from tests.support.files import directory_digest
from tests.support.kafka_dirs import SAMPLE_DAMAGE, damaged_kafka_sample


def _three_segments(root: Path) -> Path:
    path = root / "t-0"
    with Log.open(path, {"segment.bytes": 2000}, clock=ManualClock(10**12)) as log:
        for i in range(60):
            log.append([(b"k%d" % i, b"v" * 40)])
        assert len(log.segments) == 4
    (root / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 0\n")
    (root / CLEAN_SHUTDOWN_FILE).unlink()  # as after a crash
    return path


def test_a_corrupt_middle_segment_hides_its_tail_and_the_later_segments(tmp_path: Path):
    path = _three_segments(tmp_path)
    second = sorted(path.glob("*.log"))[1]
    data = bytearray(second.read_bytes())
    data[300] ^= 0xFF
    second.write_bytes(bytes(data))
    before = directory_digest(tmp_path)
    with Log.open(path, read_only=True) as log:
        base = log.segments[1].base_offset
        assert len(log.segments) == 2
        end = log.log_end_offset
        assert base < end < base + 5
        assert [r.offset for r in log.records()] == list(range(end))
        assert log.recovered_bytes == sum(p.stat().st_size for p in sorted(path.glob("*.log"))[1:]) \
            - log.segments[1].size
    assert directory_digest(tmp_path) == before
    with Log.open(path) as log:  # the writable open (Kafka's recovery) keeps the same records
        assert log.log_end_offset == end and len(log.segments) == 2


def test_no_recovery_below_the_recovery_point_or_after_a_clean_shutdown(tmp_path: Path):
    path = _three_segments(tmp_path)
    last = sorted(path.glob("*.log"))[-1]
    last.write_bytes(last.read_bytes()[:-10])
    (tmp_path / CLEAN_SHUTDOWN_FILE).write_text("")
    with Log.open(path, read_only=True) as log:
        assert log.recovered_bytes == 0
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()
    with Log.open(path, read_only=True) as log:
        torn = log.recovered_bytes
        assert torn > 0 and log.log_end_offset == 59
    second = sorted(path.glob("*.log"))[1]
    second.write_bytes(second.read_bytes()[:-10])
    (tmp_path / "recovery-point-offset-checkpoint").write_text(f"0\n1\nt 0 {int(last.name[:20])}\n")
    with Log.open(path, read_only=True) as log:  # Kafka recovers from the last segment only
        assert log.recovered_bytes == torn and log.log_end_offset == 59
        assert log.segments[1].size == second.stat().st_size


def test_a_raw_read_only_open_shows_every_byte_on_disk(tmp_path: Path):
    path = _three_segments(tmp_path)
    last = sorted(path.glob("*.log"))[-1]
    last.write_bytes(last.read_bytes()[:-10])
    with Log.open(path, read_only=True, raw=True) as log:  # an audit reports the damage itself
        assert log.recovered_bytes == 0 and log.segments[-1].size == last.stat().st_size
    with pytest.raises(ValueError, match="read_only"):
        Log.open(path, raw=True)


@pytest.mark.parametrize("damage", SAMPLE_DAMAGE)
def test_a_read_only_open_of_kafkas_partition_shows_what_kafkas_recovery_keeps(tmp_path: Path, damage: str):
    partition = damaged_kafka_sample(tmp_path / "logdir", damage)
    before = directory_digest(tmp_path)
    with Log.open(partition, read_only=True) as log:
        seen = [r.offset for r in log.records()]
        end = log.log_end_offset
    assert directory_digest(tmp_path) == before
    shutil.copytree(tmp_path / "logdir", tmp_path / "copy")
    with Log.open(tmp_path / "copy" / "plain-0") as recovered:  # Kafka's recovery, writing
        assert seen == [r.offset for r in recovered.records()] == list(range(end))
    assert 633 < end < 720
    if damage == "zeros":  # the raw view finds the zero-filled tail, damage for an audit to report
        with pytest.raises(CorruptRecordError, match="position 9262"):
            Log.open(partition, read_only=True, raw=True)
    else:
        with Log.open(partition, read_only=True, raw=True) as raw:
            assert raw.segments[-1].size == (partition / "00000000000000000633.log").stat().st_size
            assert raw.recovered_bytes == 0

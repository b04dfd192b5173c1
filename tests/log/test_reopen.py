"""Reopening after a clean shutdown (the `.kafka_cleanshutdown` marker): the open reads only the
directory listing, the checkpoints and the producer snapshot, yet the log answers reads,
offsets-for-times and appends exactly as one rebuilt by a full recovery of the same files."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from index.base import AbstractIndex
from logstore import Log, Record
from logstore.clock import ManualClock
from logstore.file_records import FileRecords
from logstore.log_files import CLEAN_SHUTDOWN_FILE, LOG_SUFFIX, SNAPSHOT_SUFFIX
from logstore.records import build_batch
from tests.support.clock import NOW

# Small segments and indexes: rolls by size and by full index both happen within a few appends.
CONFIG = {"segment.bytes": 600, "index.interval.bytes": 100, "segment.index.bytes": 48}

# An append: (records, milliseconds after the previous append's last timestamp, value size).
appends = st.lists(st.tuples(st.integers(1, 4), st.integers(0, 30), st.integers(0, 60)), max_size=14)


def append(log: Log, model: list[tuple[int, bytes]], records: int, gap: int, value_size: int) -> None:
    """Append one batch of `records` with timestamps rising from `gap` after the model's last."""
    start = model[-1][0] + gap if model else NOW + gap
    batch = [Record(i, start + i, b"k%d" % (len(model) + i), bytes(value_size)) for i in range(records)]
    log.append(build_batch(batch))
    model.extend((r.timestamp, r.value) for r in batch)


def observed(log: Log) -> dict:
    """What a reader sees: offsets, segment bases, every read and every timestamp search."""
    end = log.log_end_offset
    first_ts = NOW - 1
    last_ts = max((r.timestamp for r in log.records()), default=NOW) + 1
    return {
        "offsets": (log.log_start_offset, end),
        "bases": [s.base_offset for s in log.segments],
        "reads": [bytes(log.read(o, 300).records) for o in range(end)],
        "times": [log.offset_for_timestamp(t) for t in range(first_ts, last_ts + 1, 7)],
        "records": [(r.offset, r.timestamp, r.value) for r in log.records()],
    }


def expected_records(model: list[tuple[int, bytes]]) -> list[tuple[int, int, bytes]]:
    return [(offset, ts, value) for offset, (ts, value) in enumerate(model)]


def first_at_or_after(model: list[tuple[int, bytes]], timestamp: int) -> tuple[int, int] | None:
    """The list model's ListOffsets: the first record with a timestamp >= `timestamp`."""
    return next(((ts, offset) for offset, (ts, _) in enumerate(model) if ts >= timestamp), None)


def fully_loaded(data_dir: Path, copy: Path) -> Log:
    """A copy of the cleanly closed `data_dir` opened the eager way: the end read from the
    active segment (its end snapshot removed) and every index mapped and checked."""
    shutil.copytree(data_dir, copy)
    active = max(copy.glob("t-0/*" + LOG_SUFFIX))
    for snapshot in copy.glob("t-0/*" + SNAPSHOT_SUFFIX):
        if snapshot.name > active.name:
            snapshot.unlink()
    log = Log.open(copy / "t-0", CONFIG, clock=ManualClock(NOW))
    for segment in log.segments:
        segment.sanity_check()
    return log


@settings(max_examples=30, deadline=None)
@given(appends, appends)
def test_a_clean_reopen_answers_reads_times_and_appends_as_a_fully_loaded_log(before, after):
    with tempfile.TemporaryDirectory() as tmp:
        data, model = Path(tmp) / "data", []
        with Log.open(data / "t-0", CONFIG, clock=ManualClock(NOW)) as log:
            for args in before:
                append(log, model, *args)
        assert (data / CLEAN_SHUTDOWN_FILE).exists()
        loaded = fully_loaded(data, Path(tmp) / "copy")
        try:
            with Log.open(data / "t-0", CONFIG, clock=ManualClock(NOW)) as reopened:
                assert reopened.had_clean_shutdown
                seen = observed(reopened)
                assert seen == observed(loaded)
                assert seen["records"] == expected_records(model)
                compare_times(reopened, model)
                loaded_model = list(model)
                for args in after:
                    append(reopened, model, *args)
                    append(loaded, loaded_model, *args)
                seen = observed(reopened)
                assert seen == observed(loaded)
                assert seen["records"] == expected_records(model)
        finally:
            loaded.close()


def compare_times(log: Log, model: list[tuple[int, bytes]]) -> None:
    """offset_for_timestamp agrees with the list model at every millisecond around the records."""
    for t in range(NOW - 1, (model[-1][0] if model else NOW) + 2):
        found = log.offset_for_timestamp(t)
        assert (None if found is None else (found.timestamp, found.offset)) == first_at_or_after(model, t)


@pytest.fixture
def closed_log(tmp_path: Path) -> tuple[Path, list[tuple[int, bytes]]]:
    """A cleanly closed log of several segments and its list model."""
    model: list[tuple[int, bytes]] = []
    with Log.open(tmp_path / "t-0", CONFIG, clock=ManualClock(NOW)) as log:
        for i in range(12):
            append(log, model, 3, i % 4, 40)
        assert len(log.segments) > 3
    return tmp_path / "t-0", model


@pytest.fixture
def file_access(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts index mappings and `.log` reads through their one seam each."""
    counts = {"index maps": 0, "log reads": 0}
    load, read = AbstractIndex._load, FileRecords.read

    def counted_load(self: AbstractIndex) -> None:
        counts["index maps"] += 1
        load(self)

    def counted_read(self: FileRecords, position: int, size: int) -> bytes:
        counts["log reads"] += 1
        return read(self, position, size)

    monkeypatch.setattr(AbstractIndex, "_load", counted_load)
    monkeypatch.setattr(FileRecords, "read", counted_read)
    return counts


def test_a_clean_reopen_maps_no_index_and_reads_no_segment_data(closed_log, file_access):
    path, model = closed_log
    with Log.open(path, CONFIG, clock=ManualClock(NOW)) as log:
        assert file_access == {"index maps": 0, "log reads": 0}
        assert log.log_end_offset == len(model)
        assert [(r.timestamp, r.value) for r in log.records(len(model) - 3)] == model[-3:]
        assert file_access["index maps"] > 0 and file_access["log reads"] > 0  # the spies see use


def test_a_reopened_log_appends_into_its_active_segment_without_rolling(closed_log):
    path, model = closed_log
    with Log.open(path, CONFIG, clock=ManualClock(NOW)) as log:
        bases = [s.base_offset for s in log.segments]
        assert log.read(len(model) - 1, 100).records  # the read maps the active segment's index first
        append(log, model, 1, 0, 0)
        assert [s.base_offset for s in log.segments] == bases  # its indexes regrew: not full
        compare_times(log, model)


def test_without_the_end_snapshot_the_reopen_reads_the_end_from_the_segment(closed_log):
    path, model = closed_log
    active = max(path.glob("*" + LOG_SUFFIX))
    for snapshot in path.glob("*" + SNAPSHOT_SUFFIX):
        if snapshot.name > active.name:
            snapshot.unlink()
    with Log.open(path, CONFIG, clock=ManualClock(NOW)) as log:
        assert log.had_clean_shutdown
        assert log.log_end_offset == len(model)
        append(log, model, 2, 1, 5)
        assert [(r.timestamp, r.value) for r in log.records()] == model


def test_an_unclean_reopen_still_recovers_a_torn_tail(closed_log, file_access):
    path, model = closed_log
    (path.parent / CLEAN_SHUTDOWN_FILE).unlink()
    active = max(path.glob("*" + LOG_SUFFIX))
    with open(active, "ab") as torn:
        torn.write(b"\x00\x00\x00\x00\x00\x00\x00\x09\x00\x00\x01\x00")  # a batch cut off by a crash
    with Log.open(path, CONFIG, clock=ManualClock(NOW)) as log:
        assert not log.had_clean_shutdown
        assert log.recovered_bytes == 12
        assert file_access["log reads"] > 0  # recovery re-read the segment
        assert log.log_end_offset == len(model)
        assert [(r.timestamp, r.value) for r in log.records()] == model

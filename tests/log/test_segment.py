"""LogSegment: Kafka's byte-identical indexes, reads, timestamp search, recovery and truncation."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

import logstore.file_records as file_records_module
from index import OffsetPosition, TimestampOffset
from logstore.clock import ManualClock
from logstore.errors import (
    CorruptIndexError,
    IndexOffsetOverflowError,
    LogClosedError,
    ReadOnlyLogError,
)
from logstore.log_files import segment_file_name
from logstore.records import Record, build_batch, read_batch_header, set_base_offset_and_epoch
from logstore.segment import LogSegment
from logstore.segment_options import SegmentOptions
from tests.support.paths import KAFKA_SAMPLE

SAMPLES = KAFKA_SAMPLE
KAFKA_SEGMENTS = [0, 105, 211, 318, 426, 531, 633]
SEGMENT_BYTES = 16384
INDEX_INTERVAL = 4096
MAX_INDEX_SIZE = 10 * 1024 * 1024
WEEK_MS = 7 * 24 * 3600 * 1000


def kafka_calls():
    """Each append call of the sample as (first offset, batch bytes with offsets assigned)."""
    calls = json.loads((SAMPLES / "inputs/plain-0.json").read_text())
    data = (SAMPLES / "inputs/plain-0.records").read_bytes()
    out = []
    for call in calls:
        buf = bytearray(data[call["position"] : call["position"] + call["size"]])
        next_offset, pos = call["result"]["firstOffset"], 0
        while pos < len(buf):
            set_base_offset_and_epoch(buf, pos, next_offset, call["leaderEpoch"])
            header = read_batch_header(buf, pos)
            next_offset = header.next_offset
            pos += header.size_in_bytes
        assert next_offset - 1 == call["result"]["lastOffset"]
        out.append((call["result"]["firstOffset"], bytes(buf)))
    return out


def append_like_kafka(directory: Path, clock: ManualClock) -> list[LogSegment]:
    """Append every sample call, rolling where Kafka's rule says, and close the segments."""
    segments: list[LogSegment] = []

    def new_segment(base):
        return LogSegment.create(directory, base, SegmentOptions(
            index_interval_bytes=INDEX_INTERVAL, max_index_size=MAX_INDEX_SIZE, clock=clock))

    for first_offset, data in kafka_calls():
        headers, pos = [], 0
        while pos < len(data):
            headers.append(read_batch_header(data, pos))
            pos += headers[-1].size_in_bytes
        if not segments:
            segments.append(new_segment(first_offset))
        active = segments[-1]
        if active.should_roll(
            max_segment_bytes=SEGMENT_BYTES,
            max_segment_ms=WEEK_MS,
            messages_size=len(data),
            max_timestamp_in_messages=max(h.max_timestamp for h in headers),
            max_offset_in_messages=headers[-1].last_offset,
            now_ms=clock.time_ms(),
        ):
            active.on_become_inactive_segment()
            segments.append(new_segment(first_offset))
        segments[-1].append_batches(data)
    return segments


@pytest.fixture
def kafka_dir(tmp_path):
    """A copy of Kafka's partition directory."""
    dst = tmp_path / "kafka"
    shutil.copytree(SAMPLES / "logdir/plain-0", dst)
    for p in dst.iterdir():
        p.chmod(0o644)
    return dst


@pytest.fixture
def built(tmp_path):
    """The sample appended through LogSegment, still open (active segment last)."""
    d = tmp_path / "ours"
    d.mkdir()
    return d, append_like_kafka(d, ManualClock(1_700_000_000_000))


def files_of(directory: Path, base: int) -> dict[str, bytes]:
    return {
        suffix: (directory / segment_file_name(base, suffix)).read_bytes()
        for suffix in (".log", ".index", ".timeindex")
    }


def test_appending_kafkas_batches_gives_kafkas_files_byte_for_byte(built):
    directory, segments = built
    assert [s.base_offset for s in segments] == KAFKA_SEGMENTS
    for s in segments:
        s.close()
    for base in KAFKA_SEGMENTS:
        ours = files_of(directory, base)
        theirs = files_of(SAMPLES / "logdir/plain-0", base)
        for suffix in ours:
            assert ours[suffix] == theirs[suffix], f"{base}{suffix}"


def test_active_indexes_are_preallocated_and_rolled_ones_trimmed(built):
    directory, segments = built
    assert (directory / segment_file_name(633, ".index")).stat().st_size == MAX_INDEX_SIZE
    assert (directory / segment_file_name(633, ".timeindex")).stat().st_size == (
        MAX_INDEX_SIZE // 12 * 12
    )
    assert (directory / segment_file_name(0, ".index")).stat().st_size == 24
    for s in segments:
        s.close()


def test_recovery_rebuilds_kafkas_indexes_exactly(kafka_dir):
    for base in KAFKA_SEGMENTS:
        expected = files_of(kafka_dir, base)
        (kafka_dir / segment_file_name(base, ".index")).unlink()
        (kafka_dir / segment_file_name(base, ".timeindex")).write_bytes(b"\x00" * 36)
        seg = LogSegment.open(kafka_dir, base, SegmentOptions(index_interval_bytes=INDEX_INTERVAL))
        with pytest.raises(CorruptIndexError):
            seg.sanity_check()
        assert seg.recover() == 0
        seg.close()
        assert files_of(kafka_dir, base) == expected


def test_open_is_lazy_and_reads_kafka_files_read_only(kafka_dir):
    before = {p.name: p.read_bytes() for p in kafka_dir.iterdir()}
    segs = [LogSegment.open(kafka_dir, b, SegmentOptions(read_only=True)) for b in KAFKA_SEGMENTS]
    assert not any(s.offset_index.is_loaded or s.time_index.is_loaded for s in segs)
    assert [s.next_offset for s in segs] == [*KAFKA_SEGMENTS[1:], 720]
    for s in segs:
        s.sanity_check()
        s.close()
    with pytest.raises(ReadOnlyLogError):
        LogSegment.open(kafka_dir, 0, SegmentOptions(read_only=True)).append_batches(b"")
    assert {p.name: p.read_bytes() for p in kafka_dir.iterdir()} == before


def test_translate_offset_finds_the_batch_holding_an_offset(kafka_dir):
    seg = LogSegment.open(kafka_dir, 105, SegmentOptions(read_only=True))
    for offset in range(105, 211):
        found = seg.translate_offset(offset)
        header = read_batch_header(seg.read_bytes(found.position, 61), 0)
        assert header.base_offset <= offset <= header.last_offset == found.offset
        assert found.size == header.size_in_bytes
    assert seg.translate_offset(211) is None
    assert seg.translate_offset(0).position == 0


def test_read_returns_whole_batches_from_the_offset(kafka_dir):
    seg = LogSegment.open(kafka_dir, 0, SegmentOptions(read_only=True))
    everything = seg.read(0, 1 << 20)
    assert everything.data == (kafka_dir / segment_file_name(0, ".log")).read_bytes()
    mid = seg.read(50, 1)
    assert mid.first_batch_incomplete is False
    header = read_batch_header(mid.data, 0)
    assert header.base_offset <= 50 <= header.last_offset
    assert len(mid.data) == header.size_in_bytes  # min one message
    strict = seg.read(50, 1, min_one_message=False)
    assert strict.data == b"" and strict.first_batch_incomplete  # whole batches only
    assert seg.read(50, 0, min_one_message=False).data == b""
    capped = seg.read(0, 1 << 20, max_position=mid.position)
    assert len(capped.data) == mid.position
    assert seg.read(105, 100) is None


def test_find_offset_by_timestamp_matches_a_record_scan(kafka_dir):
    seg = LogSegment.open(kafka_dir, 211, SegmentOptions(read_only=True))
    records = [r for b in seg.iter_batches() for r in b.records()]
    stamps = sorted({r.timestamp for r in records})
    for target in [stamps[0] - 1, *stamps[::7], stamps[-1]]:
        want = next(r for r in records if r.timestamp >= target)
        found = seg.find_offset_by_timestamp(target)
        assert (found.timestamp, found.offset) == (want.timestamp, want.offset)
        assert found.leader_epoch == 0
    assert seg.find_offset_by_timestamp(stamps[-1] + 1) is None
    late = seg.find_offset_by_timestamp(stamps[0] - 1, starting_offset=300)
    assert late.offset == 300


def test_max_timestamp_comes_from_the_time_index(kafka_dir):
    seg = LogSegment.open(kafka_dir, 0, SegmentOptions(read_only=True))
    last = seg.time_index.last_entry
    assert seg.max_timestamp_so_far == last.timestamp
    assert seg.offset_of_max_timestamp == last.offset
    assert seg.largest_timestamp == last.timestamp
    batches = list(seg.iter_batches())
    assert last.timestamp == max(b.max_timestamp for b in batches)


def copy_segment(kafka_dir, base=0):
    return LogSegment.open(kafka_dir, base, SegmentOptions(index_interval_bytes=INDEX_INTERVAL))


def test_recover_truncates_a_torn_tail(kafka_dir):
    log = kafka_dir / segment_file_name(0, ".log")
    full = log.read_bytes()
    seg = copy_segment(kafka_dir)
    last = seg.translate_offset(104)
    with open(log, "r+b") as f:
        f.truncate(last.position + 30)
    seg = copy_segment(kafka_dir)
    assert seg.recover() == 30
    assert seg.size == last.position
    assert log.read_bytes() == full[: last.position]
    assert seg.next_offset == read_batch_header(full, last.position).base_offset
    seg.offset_index.sanity_check()
    seg.time_index.sanity_check()


def test_recover_truncates_from_a_corrupt_batch(kafka_dir):
    log = kafka_dir / segment_file_name(0, ".log")
    seg = copy_segment(kafka_dir)
    victim = seg.translate_offset(60)
    data = bytearray(log.read_bytes())
    data[victim.position + 70] ^= 0xFF
    log.write_bytes(bytes(data))
    seg = copy_segment(kafka_dir)
    assert seg.recover() == len(data) - victim.position
    assert seg.size == victim.position
    assert all(e["offset"] < 60 for e in seg.offset_index.entries())
    assert seg.time_index.last_entry.offset < seg.next_offset


def test_recover_drops_garbage_after_the_last_batch(kafka_dir):
    log = kafka_dir / segment_file_name(0, ".log")
    size = log.stat().st_size
    with open(log, "ab") as f:
        f.write(b"\x00" * 100)
    seg = copy_segment(kafka_dir)
    assert seg.recover() == 100
    assert seg.size == size


def test_recover_calls_back_for_each_valid_batch(kafka_dir):
    seen = []
    seg = copy_segment(kafka_dir, 105)
    seg.recover(on_batch=lambda b: seen.append(b.base_offset))
    assert seen[0] == 105 and len(seen) == len(list(seg.iter_batches()))


def test_truncate_to_removes_the_batch_holding_the_offset_and_regrows_indexes(kafka_dir):
    seg = copy_segment(kafka_dir)
    holder = seg.translate_offset(80)
    start = read_batch_header(seg.read_bytes(holder.position, 61), 0).base_offset
    size = seg.size
    assert seg.truncate_to(80) == size - holder.position
    assert seg.next_offset == start
    assert seg.offset_index.length == MAX_INDEX_SIZE
    assert all(e["offset"] < 80 for e in seg.offset_index.entries())
    assert seg.time_index.last_entry.offset < 80
    assert seg.max_timestamp_so_far == max(b.max_timestamp for b in seg.iter_batches())
    assert seg.truncate_to(10_000) == 0
    assert seg.truncate_to(0) == holder.position
    assert seg.size == 0 and seg.next_offset == 0


def batch(base_offset, timestamps, value=b"v" * 40):
    records = [Record(base_offset + i, ts, None, value, ()) for i, ts in enumerate(timestamps)]
    return build_batch(records, base_offset=base_offset)


def fresh(tmp_path, clock=None, **kw):
    return LogSegment.create(tmp_path, 100, SegmentOptions(max_index_size=1024, clock=clock or ManualClock(0), **kw))


def test_index_entry_uses_bytes_before_the_call_and_max_timestamp_so_far(tmp_path):
    seg = fresh(tmp_path, index_interval_bytes=100)
    b1 = batch(100, [1000, 1001])
    seg.append_batches(b1)  # 0 bytes before: no entry
    seg.append_batches(batch(102, [900]))  # len(b1) bytes before > 100: entry
    assert seg.offset_index.entries().tolist() == [(102, len(b1))]
    # the time entry is the max so far (1001) with the last offset of its batch (101)
    assert seg.time_index.last_entry == TimestampOffset(1001, 101)
    seg.append_batches(batch(103, [5000]))  # counter restarted at the previous call's bytes
    assert seg.offset_index.entry_count == 2
    seg.close()


def test_append_of_several_buffers_writes_them_back_to_back(tmp_path, monkeypatch):
    b1, b2, b3, b4 = batch(100, [1]), batch(101, [2]), batch(102, [3]), batch(103, [4])
    (tmp_path / "whole").mkdir()
    (tmp_path / "parts").mkdir()
    whole = fresh(tmp_path / "whole", index_interval_bytes=0)
    whole.append(102, 3, 102, b1 + b2 + b3)
    whole.append(103, 4, 103, b4)
    real_pwritev = os.pwritev

    def short_pwritev(fd, buffers, position):  # the kernel may write less than asked
        return real_pwritev(fd, [memoryview(buffers[0])[:7]], position)

    monkeypatch.setattr(os, "pwritev", short_pwritev)
    parts = fresh(tmp_path / "parts", index_interval_bytes=0)
    parts.append(102, 3, 102, [b1, memoryview(b2), bytearray(b3)])
    parts.append(103, 4, 103, [b4])
    assert parts.log_path.read_bytes() == whole.log_path.read_bytes()
    assert parts.offset_index.entries().tolist() == whole.offset_index.entries().tolist()
    assert parts.size == whole.size
    whole.close()
    parts.close()


def test_write_behind_sends_appended_bytes_without_changing_them(tmp_path, monkeypatch):
    monkeypatch.setattr(file_records_module, "WRITE_BEHIND_MIN_BYTES", 1)
    seg = fresh(tmp_path)
    seg.write_behind()  # nothing appended yet: nothing to do
    first, second = batch(100, [1]), batch(101, [2])
    seg.append_batches(first)
    seg.write_behind()
    seg.append_batches(second)
    seg.write_behind()
    assert seg.log_path.read_bytes() == first + second
    seg.truncate_to(101)
    seg.append_batches(second)
    seg.write_behind()
    seg.flush()
    assert seg.log_path.read_bytes() == first + second
    seg.close()


def test_close_adds_the_unindexed_max_timestamp(tmp_path):
    seg = fresh(tmp_path)
    seg.append_batches(batch(100, [10, 30, 20]))
    seg.close()
    reopened = LogSegment.open(tmp_path, 100)
    assert reopened.time_index.entries().tolist() == [(30, 102)]
    assert reopened.offset_index.entry_count == 0
    assert (tmp_path / segment_file_name(100, ".index")).stat().st_size == 0


def test_should_roll_rules(tmp_path):
    clock = ManualClock(50_000)
    seg = fresh(tmp_path, clock=clock, roll_jitter_ms=100)
    args = dict(
        max_segment_bytes=1000,
        max_segment_ms=1000,
        messages_size=10,
        max_timestamp_in_messages=0,
        max_offset_in_messages=100,
        now_ms=clock.time_ms(),
    )
    assert not seg.should_roll(**args)
    seg.append_batches(batch(100, [10_000]))
    size = seg.size
    assert not seg.should_roll(**{**args, "max_timestamp_in_messages": 10_900})
    assert seg.should_roll(**{**args, "max_timestamp_in_messages": 10_901})  # 1000 - jitter
    assert seg.should_roll(**{**args, "messages_size": 1001 - size})
    assert not seg.should_roll(**{**args, "messages_size": 1000 - size})
    assert seg.should_roll(**{**args, "max_offset_in_messages": 100 + 2**31})
    seg.close()


def test_should_roll_by_wall_clock_when_batches_have_no_timestamp(tmp_path):
    clock = ManualClock(50_000)
    seg = fresh(tmp_path, clock=clock)
    seg.append_batches(batch(100, [-1]))
    kw = dict(
        max_segment_bytes=10**6,
        max_segment_ms=1000,
        messages_size=1,
        max_timestamp_in_messages=-1,
        max_offset_in_messages=101,
    )
    assert not seg.should_roll(now_ms=51_000, **kw)
    assert seg.should_roll(now_ms=51_001, **kw)


def test_append_rejects_offsets_that_overflow_the_segment(tmp_path):
    seg = fresh(tmp_path)
    with pytest.raises(IndexOffsetOverflowError):
        seg.append(100 + 2**31, 0, 100 + 2**31, batch(100, [0]))
    assert not seg.can_convert_to_relative_offset(99)
    assert not seg.has_overflow()


def test_change_file_suffixes_and_delete(tmp_path):
    seg = fresh(tmp_path)
    seg.append_batches(batch(100, [1]))
    seg.change_file_suffixes("", ".deleted")
    assert seg.has_suffix(".deleted")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000100.index.deleted",
        "00000000000000000100.log.deleted",
        "00000000000000000100.timeindex.deleted",
    ]
    assert seg.read(100, 100).offset == 100
    seg.delete()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(LogClosedError):
        seg.read(100, 100)


def test_a_segment_opened_but_never_used_renames_follows_and_closes_its_files(tmp_path):
    """A segment builds its file objects on first use (an open of thousands of segments builds
    none): renames, a moved directory and close still act on every file."""
    first, moved = tmp_path / "t-0", tmp_path / "u-0"
    first.mkdir()
    seg = fresh(first)
    seg.append_batches(batch(100, [1]))
    seg.close()
    names = sorted(p.name for p in first.iterdir())

    unused = LogSegment.open(first, 100, SegmentOptions(max_index_size=1024))
    unused.change_file_suffixes("", ".deleted")
    assert sorted(p.name for p in first.iterdir()) == [name + ".deleted" for name in names]
    unused.change_file_suffixes(".deleted", "")

    unused = LogSegment.open(first, 100, SegmentOptions(max_index_size=1024))
    first.rename(moved)
    unused.update_parent_dir(moved)
    assert unused.read(100, 100).offset == 100

    closed = LogSegment.open(moved, 100, SegmentOptions(max_index_size=1024))
    closed.close()
    with pytest.raises(LogClosedError):
        closed.read(100, 100)
    assert sorted(p.name for p in moved.iterdir()) == names


def test_flush_then_reopen_after_crash_keeps_data(tmp_path):
    seg = fresh(tmp_path, index_interval_bytes=10)
    for i in range(5):
        seg.append_batches(batch(100 + i, [i]))
    seg.flush()
    seg.close_handlers()  # a crash: nothing trimmed
    again = LogSegment.open(tmp_path, 100, SegmentOptions(max_index_size=1024, index_interval_bytes=10))
    with pytest.raises(CorruptIndexError):
        again.sanity_check()
    assert again.recover() == 0
    assert again.next_offset == 105
    assert again.offset_index.lookup(104) == OffsetPosition(
        104, again.translate_offset(104).position
    )
    assert again.offset_index.entry_count == 4
    again.close()


def test_read_only_open_of_a_live_active_segment_ignores_its_zero_filled_slots(built):
    directory, segments = built
    active = segments[-1]
    active.flush()
    live_bytes = {p.name: p.read_bytes() for p in directory.iterdir()}
    view = LogSegment.open(directory, 633, SegmentOptions(read_only=True))
    assert view.offset_index.entries().tolist() == active.offset_index.entries().tolist()
    assert view.time_index.last_entry == active.time_index.last_entry
    assert view.next_offset == 720
    assert view.translate_offset(700) == active.translate_offset(700)
    view.close()
    assert {p.name: p.read_bytes() for p in directory.iterdir()} == live_bytes
    for s in segments:
        s.close()


def test_opening_a_thousand_segments_maps_and_opens_nothing(tmp_path):
    for base in range(0, 1000 * 10, 10):
        for suffix in (".log", ".index", ".timeindex"):
            (tmp_path / segment_file_name(base, suffix)).write_bytes(b"")
    segments = [LogSegment.open(tmp_path, base) for base in range(0, 10_000, 10)]
    assert not any(s.offset_index.is_loaded or s.time_index.is_loaded for s in segments)
    assert all(s._state.fd is None for s in segments)
    for s in segments:
        s.close()
    assert all((tmp_path / segment_file_name(b, ".index")).stat().st_size == 0 for b in (0, 9990))


def test_legacy_magic_1_entries_are_read_and_recovered(tmp_path):
    from logstore.records.legacy import build_legacy_entry

    data = b"".join(
        build_legacy_entry([Record(i, 900 + i, b"k", b"v" * 50, ())], magic=1)
        for i in range(100, 110)
    )
    (tmp_path / segment_file_name(100, ".log")).write_bytes(data + b"\x01\x02")
    seg = LogSegment.open(tmp_path, 100, SegmentOptions(max_index_size=1024, index_interval_bytes=100))
    assert seg.recover() == 2
    assert seg.next_offset == 110
    assert seg.offset_index.entry_count > 0
    assert seg.find_offset_by_timestamp(1005).offset == 105
    assert seg.translate_offset(107).offset == 107
    seg.close()


def test_closed_segment_can_still_be_renamed_and_deleted(tmp_path):
    seg = fresh(tmp_path)
    seg.append_batches(batch(100, [1]))
    seg.close()
    seg.change_file_suffixes("", ".deleted")
    assert (tmp_path / "00000000000000000100.log.deleted").exists()
    seg.delete()
    assert list(tmp_path.iterdir()) == []

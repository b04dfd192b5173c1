"""Log: append paths, reads, rolls, flushes, truncation, log start offset, deletion, swaps, recovery."""

import os

import pyarrow as pa
import pytest

from logstore import Log, LogConfig, Record
from logstore.errors import (
    InvalidRecordError,
    LogClosedError,
    LogLockedError,
    OffsetOutOfRangeError,
    ReadOnlyLogError,
)
from logstore.log_files import DELETED_SUFFIX, LOG_SUFFIX, segment_file_name
from logstore.records import RecordBatch, iter_batches
from tests.log.log_builders import batch, log_with_cleaned_copy, offsets, open_log
from tests.support.clock import NOW

# ------------------------------------------------------------------ append (leader)


def test_append_assigns_dense_offsets_and_leader_epoch(tmp_path, clock):
    with open_log(tmp_path, clock) as log:
        a = log.append(batch(3), leader_epoch=5)
        b = log.append(batch(2, compression="gzip"), leader_epoch=5)
        assert (a.first_offset, a.last_offset, a.record_count) == (0, 2, 3)
        assert (b.first_offset, b.last_offset) == (3, 4)
        assert a.max_timestamp == NOW + 2 and a.offset_of_max_timestamp == 2 and a.log_append_time == -1
        assert log.log_end_offset == 5 == log.high_watermark
        batches = list(log.read(0).batches())
        assert [(x.base_offset, x.partition_leader_epoch) for x in batches] == [(0, 5), (3, 5)]
        assert all(x.is_valid() for x in batches)
        assert offsets(log) == [0, 1, 2, 3, 4]


def test_append_modifies_a_bytearray_in_place(tmp_path, clock):
    with open_log(tmp_path, clock) as log:
        log.append(batch(1))
        buf = bytearray(batch(2))
        log.append(buf, leader_epoch=3)
        assert RecordBatch(buf).base_offset == 1 and RecordBatch(buf).partition_leader_epoch == 3


def test_append_stamps_a_writable_view_in_place_and_copies_a_read_only_one(tmp_path, clock):
    with open_log(tmp_path, clock) as log:
        frame = bytearray(b"head" + batch(2))  # as a server's request frame holds the records
        log.append(memoryview(frame)[4:], leader_epoch=3)
        assert RecordBatch(frame[4:]).base_offset == 0 and RecordBatch(frame[4:]).partition_leader_epoch == 3
        original = batch(1)
        log.append(memoryview(original), leader_epoch=4)
        assert RecordBatch(original).partition_leader_epoch != 4  # the caller's bytes stay as given
        assert [(b.base_offset, b.partition_leader_epoch) for b in log.read(0).batches()] == [(0, 3), (2, 4)]


def test_append_records_tuples_and_arrow_tables(tmp_path, clock):
    with open_log(tmp_path, clock) as log:
        log.append([Record(0, NOW - 5, b"a", b"1", (("h", b"x"),))])
        log.append([(b"b", b"2"), (None, b"3")])
        log.append(pa.table({"key": [b"c", b"d"], "value": [b"4", None], "timestamp": [NOW - 1, NOW - 2]}))
        got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in log.records()]
        assert got == [
            (0, NOW - 5, b"a", b"1", (("h", b"x"),)),
            (1, NOW, b"b", b"2", ()),
            (2, NOW, None, b"3", ()),
            (3, NOW - 1, b"c", b"4", ()),
            (4, NOW - 2, b"d", None, ()),
        ]


# ------------------------------------------------------------------ follower


def test_append_as_follower_keeps_offsets_and_rejects_going_back(tmp_path, clock):
    with open_log(tmp_path, clock) as log:
        log.high_watermark_follows_log_end = False
        info = log.append_as_follower(batch(2, base_offset=10, partition_leader_epoch=7) + batch(1, base_offset=12))
        assert (info.first_offset, info.last_offset, log.log_end_offset) == (10, 12, 13)
        assert log.high_watermark == 0
        assert [b.partition_leader_epoch for b in log.read(10).batches()] == [7, -1]
        with pytest.raises(InvalidRecordError, match="below the log end offset"):
            log.append_as_follower(batch(1, base_offset=12))
        with pytest.raises(InvalidRecordError, match="out of order"):
            log.append_as_follower(batch(1, base_offset=20) + batch(1, base_offset=15))
        log.high_watermark = 100
        assert log.high_watermark == 13


# ------------------------------------------------------------------ read


def test_read_range_errors_name_the_valid_range(tmp_path, clock):
    with open_log(tmp_path, clock) as log:
        log.append(batch(3))
        assert log.read(3).records == b""
        with pytest.raises(OffsetOutOfRangeError, match=r"\[0, 3\]"):
            log.read(4)
        with pytest.raises(OffsetOutOfRangeError):
            log.read(-1)


def test_read_max_bytes_min_one_batch_and_max_offset(tmp_path, clock):
    with open_log(tmp_path, clock) as log:
        for _ in range(4):
            log.append(batch(2))
        one = len(batch(2))
        r = log.read(3, max_bytes=1)
        assert r.first_offset == 2 and len(r.records) == one
        assert log.read(3, max_bytes=1, min_one_batch=False).records == b""
        assert len(log.read(0, max_bytes=2 * one).records) == 2 * one
        r = log.read(0, max_offset=5)
        assert [b.base_offset for b in r.batches()] == [0, 2]
        assert (r.high_watermark, r.log_start_offset, r.log_end_offset) == (8, 0, 8)


def test_read_spans_segments(tmp_path, clock):
    with open_log(tmp_path, clock, **{"segment.bytes": 200}) as log:
        for _ in range(6):
            log.append(batch(1))
        assert len(log.segments) > 1
        assert offsets(log) == list(range(6))
        assert [r.offset for r in log.records(4)] == [4, 5]


# ------------------------------------------------------------------ roll


def test_roll_on_segment_bytes(tmp_path, clock):
    size = len(batch(1))
    with open_log(tmp_path, clock, **{"segment.bytes": 3 * size}) as log:
        for _ in range(7):
            log.append(batch(1))
        assert [s.base_offset for s in log.segments] == [0, 3, 6]
        assert all(s.size <= 3 * size for s in log.segments)


def test_roll_on_segment_ms_from_first_batch_timestamp(tmp_path, clock):
    with open_log(tmp_path, clock, **{"segment.ms": 1000}) as log:
        log.append(batch(1, ts=NOW))
        log.append(batch(1, ts=NOW + 1000))
        assert len(log.segments) == 1
        log.append(batch(1, ts=NOW + 1001))
        assert [s.base_offset for s in log.segments] == [0, 2]


def test_roll_on_full_index(tmp_path, clock):
    cfg = {"segment.index.bytes": 24, "index.interval.bytes": 1}
    with open_log(tmp_path, clock, **cfg) as log:
        for _ in range(8):
            log.append(batch(1))
        assert len(log.segments) >= 2
        assert all(s.offset_index.entry_count <= 3 for s in log.segments)
        assert offsets(log) == list(range(8))


def test_forced_roll_and_rolling_an_empty_segment_is_a_no_op(tmp_path, clock):
    with open_log(tmp_path, clock) as log:
        log.append(batch(2))
        new = log.roll()
        assert new.base_offset == 2 and log.roll() is new
        assert log.recovery_point == 2


# ------------------------------------------------------------------ flush


def test_flush_messages_moves_the_recovery_point(tmp_path, clock):
    with open_log(tmp_path, clock, **{"flush.messages": 4}) as log:
        log.append(batch(3))
        assert log.recovery_point == 0
        log.append(batch(1))
        assert log.recovery_point == 4


def test_flush_ms_is_driven_by_the_clock(tmp_path, clock):
    with open_log(tmp_path, clock, **{"flush.ms": 500}) as log:
        log.append(batch(1))
        assert not log.flush_if_due()
        clock.advance(500)
        assert log.flush_if_due() and log.recovery_point == 1
        assert not log.flush_if_due()


# ------------------------------------------------------------------ truncation and start offset


def test_truncate_to_removes_whole_batches_and_later_segments(tmp_path, clock):
    with open_log(tmp_path, clock, **{"segment.bytes": 200, "file.delete.delay.ms": 0}) as log:
        for _ in range(6):
            log.append(batch(2))
        assert len(log.segments) > 2
        assert log.truncate_to(5)
        assert log.log_end_offset == 4 and offsets(log) == [0, 1, 2, 3]
        assert log.high_watermark == 4 and log.recovery_point <= 4
        assert not log.truncate_to(10)
        log.append(batch(1))
        assert offsets(log) == [0, 1, 2, 3, 4]
    assert not [n for n in os.listdir(tmp_path / "t-0") if n.endswith(".deleted")]


def test_truncate_fully_and_start_at(tmp_path, clock):
    with open_log(tmp_path, clock) as log:
        log.append(batch(3))
        log.truncate_fully_and_start_at(100)
        assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (100, 100, 100)
        assert [s.base_offset for s in log.segments] == [100]
        assert log.append(batch(1)).first_offset == 100
    with Log.open(tmp_path / "t-0", clock=clock) as log:
        assert (log.log_start_offset, log.log_end_offset) == (100, 101)


def test_delete_records_before_is_bounded_by_the_high_watermark(tmp_path, clock):
    with open_log(tmp_path, clock) as log:
        log.append(batch(5))
        log.high_watermark_follows_log_end = False
        log.high_watermark = 3
        with pytest.raises(OffsetOutOfRangeError, match="high watermark 3"):
            log.delete_records_before(4)
        assert log.delete_records_before(2) == 2
        assert not log.maybe_increment_log_start_offset(1, "leader_offset_incremented")
        assert [r.offset for r in log.records()] == [2, 3, 4]
        with pytest.raises(OffsetOutOfRangeError):
            log.read(1)
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n1\nt 0 2\n"
    with Log.open(tmp_path / "t-0", clock=clock) as log:
        assert log.log_start_offset == 2


def _crash(log):
    """Drop the log as a killed process does: no flush, no close, no checkpoint."""
    log._release()


def test_truncation_below_the_log_start_is_checkpointed_before_it_returns(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append(batch(2))
    log.append(batch(2))
    log.delete_records_before(2)
    assert log.truncate_to(0)
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n1\nt 0 0\n"
    _crash(log)
    with Log.open(tmp_path / "t-0", clock=clock) as log:
        assert (log.log_start_offset, log.log_end_offset) == (0, 0)


def test_truncation_inside_the_batch_holding_the_log_start_brings_the_start_down_to_the_end(tmp_path, clock):
    with open_log(tmp_path, clock) as log:
        log.append(batch(3))
        log.append(batch(2))
        log.delete_records_before(1)
        assert log.truncate_to(2)  # removes the whole batch 0..2, which holds the start
        assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (0, 0, 0)
        assert log.append(batch(1)).first_offset == 0
    with Log.open(tmp_path / "t-0", clock=clock) as log:
        assert (log.log_start_offset, log.log_end_offset) == (0, 1)


# ------------------------------------------------------------------ segment deletion and swap


def test_delete_segments_renames_then_deletes_after_the_delay(tmp_path, clock):
    with open_log(tmp_path, clock, **{"segment.bytes": 200, "file.delete.delay.ms": 1000}) as log:
        for _ in range(6):
            log.append(batch(1))
        first = log.segments[0]
        fetched = first.read(0, 10_000)
        assert log.delete_segments([first], "retention") == 1
        assert log.log_start_offset == log.segments[0].base_offset
        names = os.listdir(log.dir)
        assert segment_file_name(0, LOG_SUFFIX, DELETED_SUFFIX) in names and segment_file_name(0, LOG_SUFFIX) not in names
        assert first.read(0, 10_000) == fetched  # a reader holding the segment finishes
        assert log.delete_expired_files(NOW + 999) == 0
        assert log.delete_expired_files(NOW + 1000) == 1
        assert not [n for n in os.listdir(log.dir) if n.endswith(".deleted")]


def test_delete_segments_including_the_active_one_rolls_first(tmp_path, clock):
    with open_log(tmp_path, clock) as log:
        log.append(batch(3))
        log.delete_segments(log.segments)
        assert [s.base_offset for s in log.segments] == [3]
        assert (log.log_start_offset, log.log_end_offset) == (3, 3)


def test_replace_segments_swaps_crash_safely(tmp_path, clock):
    with open_log(tmp_path, clock, **{"segment.bytes": 200}) as log:
        old, expected, new = log_with_cleaned_copy(log)
        log.replace_segments([new], old)
        assert log.segments[0] is new and offsets(log) == expected
        assert not [n for n in os.listdir(log.dir) if n.endswith((".swap", ".cleaned"))]
    with Log.open(tmp_path / "t-0", clock=clock) as log:
        assert offsets(log) == expected


# ------------------------------------------------------------------ open, recovery, ownership


def test_second_open_of_the_same_directory_is_refused(tmp_path, clock):
    with open_log(tmp_path, clock), pytest.raises(LogLockedError):
        Log.open(tmp_path / "t-0", clock=clock)
    Log.open(tmp_path / "t-0", clock=clock).close()


def test_read_only_refuses_writes_and_writes_nothing(tmp_path, clock):
    with open_log(tmp_path, clock) as log:
        log.append(batch(2))
    before = {n: (tmp_path / "t-0" / n).read_bytes() for n in os.listdir(tmp_path / "t-0")}
    with Log.open(tmp_path / "t-0", read_only=True, clock=clock) as log:
        with pytest.raises(ReadOnlyLogError):
            log.append(batch(1))
        with pytest.raises(ReadOnlyLogError):
            log.truncate_to(0)
        assert offsets(log) == [0, 1]
        with Log.open(tmp_path / "t-0", read_only=True, clock=clock) as again:
            assert again.log_end_offset == 2
    after = {n: (tmp_path / "t-0" / n).read_bytes() for n in os.listdir(tmp_path / "t-0")}
    assert after == before


def test_closed_log_refuses_work(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.close()
    log.close()
    with pytest.raises(LogClosedError):
        log.append(batch(1))
    with pytest.raises(LogClosedError):
        log.read(0)


def test_directory_name_must_be_topic_dash_partition(tmp_path, clock):
    from logstore.errors import InvalidTopicError

    with pytest.raises(InvalidTopicError):
        Log.open(tmp_path / "no_partition", clock=clock)
    with pytest.raises(InvalidTopicError):
        Log.open(tmp_path / "bad topic-0", clock=clock)


def test_config_accepts_logconfig_or_dict(tmp_path, clock):
    with Log.open(tmp_path / "t-0", LogConfig(segment_bytes=1000), clock=clock) as log:
        assert log.config.segment_bytes == 1000 and log.config["segment.bytes"] == 1000
        assert (log.topic, log.partition, log.dir, log.clock) == ("t", 0, tmp_path / "t-0", clock)


def test_iter_batches_of_the_log_files_agree_with_offsets(tmp_path, clock):
    with open_log(tmp_path, clock, **{"segment.bytes": 300}) as log:
        for i in range(10):
            log.append(batch(1 + i % 3, compression=["none", "lz4", "snappy"][i % 3]))
        seen = []
        for segment in log.segments:
            data = segment.read_bytes(0, segment.size)
            seen += [b.base_offset for b in iter_batches(data)]
        assert seen == [b.base_offset for s in log.segments for b in s.iter_batches()]
        assert offsets(log) == list(range(log.log_end_offset))


def test_roll_when_offsets_would_overflow_the_relative_index(tmp_path, clock):
    with open_log(tmp_path, clock) as log:
        log.append_as_follower(batch(1, base_offset=0))
        far = 2**31 + 5
        log.append_as_follower(batch(1, base_offset=far))
        assert [s.base_offset for s in log.segments] == [0, far]
        assert [r.offset for r in log.records()] == [0, far]


def test_segment_jitter_is_below_segment_ms(tmp_path, clock):
    with open_log(tmp_path, clock, **{"segment.ms": 1000, "segment.jitter.ms": 5000}) as log:
        for i in range(5):
            log.append(batch(1, ts=NOW + i * 1001))
        assert len(log.segments) == 5
        assert all(0 <= s.roll_jitter_ms < 1000 for s in log.segments)


def test_appends_reads_and_deletions_on_threads(tmp_path, clock):
    import threading

    errors = []
    with open_log(tmp_path, clock, **{"segment.bytes": 500, "file.delete.delay.ms": 0}) as log:
        done = threading.Event()

        def appender():
            try:
                for _ in range(300):
                    log.append(batch(2))
            except Exception as exc:  # collected for the assertion below
                errors.append(exc)
            finally:
                done.set()

        def reader():
            rng = __import__("random").Random(1)
            while not done.is_set():
                end = log.log_end_offset
                if end == 0:
                    continue
                try:
                    fetched = log.read(rng.randrange(end), 300)
                    assert all(b.is_valid() for b in fetched.batches())
                except OffsetOutOfRangeError:
                    pass  # deleted under us: the documented outcome
                except Exception as exc:
                    errors.append(exc)

        def deleter():
            while not done.is_set():
                try:
                    segments = log.segments
                    if len(segments) > 3:
                        log.maybe_increment_log_start_offset(segments[2].base_offset, "test")
                        log.delete_segments(segments[:2], "test")
                except Exception as exc:
                    errors.append(exc)

        threads = [threading.Thread(target=f) for f in (appender, reader, deleter)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert log.log_end_offset == 600
        got = [r.offset for r in log.records()]
        assert got == list(range(log.log_start_offset, 600))



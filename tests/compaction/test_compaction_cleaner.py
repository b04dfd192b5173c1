"""compaction.Cleaner on real Logs: dict model, tombstone lifecycle, transactions, crash-safe
swaps, bounded offset maps, dry runs, and cleaning while appends and reads go on."""

from __future__ import annotations

import os
import random
import shutil
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.cleaner import CLEANER_OFFSET_CHECKPOINT, Cleaner, ReadBufferAppender
from compaction.decode import decode_chunks
from compaction.plan import COPY
from logstore import Log
from logstore.clock import ManualClock
from logstore.errors import InvalidRecordError, LogCleaningAbortedError
from logstore.records import (
    Record,
    build_batch,
    build_control_batch,
    build_legacy_entry,
    iter_batches,
)
from logstore.txn_index import AbortedTxn
from tests.support.paths import KAFKA_LOGDIR

DAY = 24 * 3600 * 1000
COMPACT = {"cleanup.policy": "compact", "segment.bytes": 1024, "file.delete.delay.ms": 0}


def _open(path, clock, **overrides):
    return Log.open(path, {**COMPACT, **overrides}, clock=clock)


def _read(log):
    return [(r.offset, r.key, r.value) for r in log.records()]


def _latest(model):
    return sorted((o, k, v) for k, (o, v) in model.items())


def _fill(log, ops, model):
    for k, v in ops:
        info = log.append([(k, v)])
        model[k] = (info.first_offset, v)


ops_st = st.lists(st.tuples(st.integers(0, 15).map(lambda i: b"key-%d" % i),
                            st.one_of(st.none(), st.binary(min_size=1, max_size=60))),
                  min_size=1, max_size=150)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops_st, st.sampled_from([64 * 20, 1 << 20]))
def test_cleaned_log_reads_as_the_latest_value_per_key(tmp_path_factory, ops, map_bytes):
    path = tmp_path_factory.mktemp("log") / "t-0"
    clock = ManualClock(10**12)
    log = _open(path, clock, **{"log.cleaner.dedupe.buffer.size": map_bytes})
    model: dict = {}
    _fill(log, ops, model)
    log.roll()
    before = _read(log)
    cleaner = Cleaner(log.config)
    for _ in range(100):  # a small map cleans in several passes, as Kafka does
        result = cleaner.clean(log)
        if result.end_offset >= log.log_end_offset:
            break
    assert _read(log) == _latest(model)
    assert [o for o, _, _ in _read(log)] == sorted(o for o, _, _ in _read(log))
    assert set(_read(log)) <= set(before)
    assert log.log_end_offset == len(ops)
    log.close()
    reopened = _open(path, clock)
    assert _read(reopened) == _latest(model)
    reopened.close()


def test_tombstones_get_a_delete_horizon_and_go_after_delete_retention(tmp_path):
    clock = ManualClock(10**12)
    log = _open(tmp_path / "t-0", clock, **{"delete.retention.ms": DAY})
    log.append([(b"a", b"1"), (b"b", b"1")])
    log.append([(b"a", None)])
    log.roll()
    cleaner = Cleaner(log.config)
    first = cleaner.clean(log)
    assert first.records_removed == 1 and first.tombstones_removed == 0
    batches = [b for s in log.segments for b in s.iter_batches()]
    tomb = [b for b in batches if any(r.value is None for r in b.records())]
    assert tomb[0].delete_horizon_ms == 10**12 + DAY  # now + delete.retention.ms, KIP-534
    assert [r.timestamp for r in tomb[0].records()] == [10**12]  # record timestamps unchanged
    # Later rounds need new dirty data; before the horizon the tombstone stays ...
    clock.advance(DAY - 1)
    log.append([(b"c", b"1")])
    log.roll()
    cleaner.clean(log)
    assert (2, b"a", None) in _read(log)
    # ... and at the horizon it goes.
    clock.advance(1)
    log.append([(b"d", b"1")])
    log.roll()
    result = cleaner.clean(log)
    assert result.tombstones_removed == 1
    assert [k for _, k, _ in _read(log)] == [b"b", b"c", b"d"]


def test_keyless_appends_to_a_compacted_log_are_rejected(tmp_path):
    log = _open(tmp_path / "t-0", ManualClock(0))
    with pytest.raises(InvalidRecordError, match="without a key"):
        log.append([(None, b"v")])
    log.close()


def test_aborted_data_goes_and_markers_last_until_their_horizon(tmp_path):
    clock = ManualClock(10**12)
    log = _open(tmp_path / "t-0", clock, **{"delete.retention.ms": 1000})
    ts = clock.time_ms()
    txn = build_batch([Record(0, ts, b"x", b"aborted"), Record(1, ts, b"y", b"aborted")],
                      producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True)
    abort = build_control_batch("abort", producer_id=5, producer_epoch=0, coordinator_epoch=0,
                                base_offset=2, timestamp=ts)
    plain = build_batch([Record(3, ts, b"x", b"kept")], base_offset=3)
    tail = build_batch([Record(4, ts, b"z", b"tail")], base_offset=4, producer_id=5,
                       producer_epoch=0, base_sequence=2)
    for raw in (txn, abort, plain, tail):
        log.append_as_follower(raw)
    log.high_watermark = log.log_end_offset  # a follower's HW comes from its leader
    assert log.active_segment.txn_index.all_aborted_txns() == [AbortedTxn(5, 0, 2, 3)]  # indexed by the log
    log.roll()
    cleaner = Cleaner(log.config)
    result = cleaner.clean(log)
    assert result.removed_by_reason["aborted"] == 2
    offsets = [b.base_offset for s in log.segments for b in s.iter_batches()]
    assert offsets == [2, 3, 4]  # the abort marker outlives its data for one round
    assert [t.producer_id for t in log.segments[0].txn_index.all_aborted_txns()] == [5]
    # Next round: the data is gone, so the marker gets a horizon; after it, the marker goes.
    log.append([(b"w", b"1")])
    log.roll()
    cleaner.clean(log)
    marker = next(b for s in log.segments for b in s.iter_batches() if b.is_control)
    assert marker.delete_horizon_ms == 10**12 + 1000
    clock.advance(1000)
    log.append([(b"v", b"1")])
    log.roll()
    result = cleaner.clean(log)
    assert result.removed_by_reason["marker_expired"] == 1
    batches = [b for s in log.segments for b in s.iter_batches()]
    assert not any(b.is_control for b in batches)
    assert _read(log)[:2] == [(3, b"x", b"kept"), (4, b"z", b"tail")]


def test_last_batch_of_a_producer_is_kept_empty(tmp_path):
    clock = ManualClock(10**12)
    log = _open(tmp_path / "t-0", clock)
    ts = clock.time_ms()
    log.append_as_follower(build_batch([Record(0, ts, b"k", b"1")], producer_id=9, producer_epoch=3,
                                       base_sequence=0))
    log.append_as_follower(build_batch([Record(1, ts, b"k", b"2")], base_offset=1))
    log.high_watermark = log.log_end_offset
    log.roll()
    Cleaner(log.config).clean(log)
    batches = [b for s in log.segments for b in s.iter_batches()]
    assert [(b.base_offset, b.record_count, b.producer_id, b.producer_epoch) for b in batches] == \
        [(0, 0, 9, 3), (1, 1, -1, -1)]


def test_dry_run_changes_nothing_and_predicts_the_real_run(tmp_path):
    clock = ManualClock(10**12)
    log = _open(tmp_path / "t-0", clock)
    rng = random.Random(3)
    for i in range(200):
        log.append([(b"k%d" % rng.randrange(30), b"v%d" % i)])
    log.roll()
    files = {p.name: p.stat().st_size for p in (tmp_path / "t-0").iterdir()}
    cleaner = Cleaner(log.config)
    dry = cleaner.clean(log, dry_run=True)
    assert {p.name: p.stat().st_size for p in (tmp_path / "t-0").iterdir()} == files
    assert not (tmp_path / CLEANER_OFFSET_CHECKPOINT).exists()
    real = cleaner.clean(log)
    for field in ("records_removed", "records_written", "bytes_written", "bytes_read", "end_offset"):
        assert getattr(dry, field) == getattr(real, field)


_BATCH = st.tuples(
    st.sampled_from(["none", "gzip", "snappy", "lz4", "zstd", "magic0", "magic1"]),
    st.lists(st.tuples(st.integers(0, 5), st.booleans(), st.integers(0, 3 * DAY)),
             min_size=1, max_size=6))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(_BATCH, min_size=2, max_size=25))
def test_dry_run_counts_exactly_what_rewritten_batches_write(tmp_path_factory, batches):
    """Multi-record batches of every codec and magic, partly kept: a dry run's byte count
    (sizes only, nothing built) equals what the real round writes."""
    clock = ManualClock(10 * DAY)
    log = Log.open(tmp_path_factory.mktemp("dry") / "t-0", {**COMPACT, "segment.bytes": 4096},
                   clock=clock)
    offset = 0
    for codec, rows in batches:
        records = [Record(offset + i, ts, b"k%d" % key, None if tomb else b"v" * (key + 1))
                   for i, (key, tomb, ts) in enumerate(rows)]
        if codec.startswith("magic"):
            log.append_as_follower(build_legacy_entry(
                records, magic=int(codec[-1]), compression="gzip" if len(records) > 1 else "none"))
        else:
            log.append_as_follower(build_batch(records, base_offset=offset, compression=codec))
        offset += len(records)
    log.high_watermark = log.log_end_offset
    log.roll()
    dry = Cleaner(log.config).clean(log, dry_run=True)
    real = Cleaner(log.config).clean(log)
    for field in ("records_removed", "records_written", "tombstones_removed", "bytes_written",
                  "bytes_read", "end_offset", "removed_by_reason"):
        assert getattr(dry, field) == getattr(real, field), field
    log.close()


def test_groups_merge_small_segments_within_segment_bytes(tmp_path):
    clock = ManualClock(10**12)
    log = _open(tmp_path / "t-0", clock)
    for i in range(300):
        log.append([(b"k%d" % (i % 10), b"v%d" % i)])
    log.roll()
    cleaner = Cleaner(log.config)
    cleaner.clean(log)
    n = len(log.segments)
    log.append([(b"k1", b"new")])
    log.roll()
    cleaner.clean(log)
    assert len(log.segments) < n  # the now-small cleaned segments were grouped into one


class _AppendLog:
    """Stands in for the cleaned segment: records each append's last offset and bytes."""

    def __init__(self):
        self.appends = []

    def append(self, largest_offset, largest_timestamp, offset_of_max_timestamp, parts):
        self.appends.append((largest_offset, b"".join(parts)))

    def write_behind(self):
        pass


@pytest.mark.parametrize("chunk_bytes", [1, 150, 1 << 20])
def test_appends_follow_kafkas_read_buffer_fills_across_chunks(tmp_path, chunk_bytes):
    """Complete batches within one buffer fill go in one append; a batch larger than the
    buffer doubles it for the rest of the segment; where the decoded chunks end changes nothing."""
    sizes = [10, 10, 10, 10, 300, 10, 10, 10, 10]
    raw = [build_batch([Record(o, 10**12, b"k", b"v" * n)], base_offset=o) for o, n in enumerate(sizes)]
    (tmp_path / "s.log").write_bytes(b"".join(raw))
    small = len(raw[0])
    out = _AppendLog()
    appender = ReadBufferAppender(out, int(2.5 * small))
    for d in decode_chunks(tmp_path / "s.log", segment_base=0, size=sum(map(len, raw)),
                           chunk_bytes=chunk_bytes):
        appender.add(d, np.full(len(d.position), COPY, np.int8), d.header["max_timestamp"])
    appender.finish()
    # Fills of 2 small batches; the big one needs the buffer grown to 5 small batches' worth.
    assert [last for last, _ in out.appends] == [1, 3, 4, 8]
    assert [data for _, data in out.appends] == [raw[0] + raw[1], raw[2] + raw[3], raw[4], b"".join(raw[5:])]


def _crash_copies(tmp_path, monkeypatch):
    clock = ManualClock(10**12)
    path = tmp_path / "src" / "t-0"
    log = _open(path, clock)
    model: dict = {}
    rng = random.Random(7)
    _fill(log, [(b"k%d" % rng.randrange(12), b"v%d" % i) for i in range(120)], model)
    log.roll()
    before = _read(log)
    log.config = {**COMPACT, "segment.bytes": 1 << 20}  # one group: one swap
    real_replace = os.replace
    copies = []

    def replace(src, dst):
        crash = tmp_path / f"crash{len(copies)}" / "t-0"
        shutil.copytree(path, crash, ignore=shutil.ignore_patterns(".lock"))
        copies.append(crash)
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    Cleaner(log.config).clean(log)
    monkeypatch.setattr(os, "replace", real_replace)
    final = tmp_path / f"crash{len(copies)}" / "t-0"
    shutil.copytree(path, final, ignore=shutil.ignore_patterns(".lock"))
    copies.append(final)
    log.close()
    return clock, before, _latest(model), copies


def test_a_crash_at_every_step_of_the_swap_reopens_to_old_or_new(tmp_path, monkeypatch):
    clock, before, after, copies = _crash_copies(tmp_path, monkeypatch)
    assert len(copies) > 8  # .cleaned -> .swap, old -> .deleted, .swap -> live, per file
    seen = set()
    for crash in copies:
        log = Log.open(crash, COMPACT, clock=clock)
        got = _read(log)
        assert got in (before, after), crash
        seen.add(got == after)
        assert not any(p.name.endswith((".cleaned", ".swap")) for p in crash.iterdir())
        log.close()
    assert seen == {False, True}


def test_abort_stops_the_clean_and_leaves_no_cleaned_files(tmp_path):
    clock = ManualClock(10**12)
    log = _open(tmp_path / "t-0", clock)
    for i in range(100):
        log.append([(b"k%d" % (i % 7), b"v")])
    log.roll()
    before = _read(log)
    cleaner = Cleaner(log.config)
    cleaner.abort()
    with pytest.raises(LogCleaningAbortedError):
        cleaner.clean(log)
    assert _read(log) == before
    assert not any(p.name.endswith(".cleaned") for p in (tmp_path / "t-0").iterdir())
    assert cleaner.clean(log).records_removed > 0  # the abort applied to one clean only


def test_cleaning_while_appends_and_reads_continue(tmp_path):
    clock = ManualClock(10**12)
    log = _open(tmp_path / "t-0", clock)
    model: dict = {}
    _fill(log, [(b"k%d" % (i % 20), b"v%d" % i) for i in range(400)], model)
    log.roll()
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer():
        i = 0
        try:
            while not stop.is_set() and i < 3000:
                k = b"w%d" % (i % 50)
                info = log.append([(k, b"x%d" % i)])
                model[k] = (info.first_offset, b"x%d" % i)
                i += 1
        except BaseException as e:  # surfaced below
            errors.append(e)

    def reader():
        # A short pause between full reads: a thread spinning on the GIL would otherwise make
        # every syscall of the cleaner wait out a whole switch interval (minutes in total).
        try:
            while not stop.wait(0.001):
                offsets = [r.offset for r in log.records()]
                assert offsets == sorted(offsets)
        except BaseException as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
    for t in threads:
        t.start()
    cleaner = Cleaner(log.config)
    for _ in range(3):
        cleaner.clean(log)
    stop.set()
    for t in threads:
        t.join()
    assert not errors
    log.roll()
    cleaner.clean(log)
    assert _read(log) == _latest(model)
    for seg in log.segments:
        for b in iter_batches(seg.read_bytes(0, seg.size)):
            b.validate()


def test_cleaning_a_kafka_written_partition_keeps_the_latest_keyed_records(tmp_path):
    shutil.copytree(KAFKA_LOGDIR, tmp_path / "data")
    path = tmp_path / "data" / "plain-0"
    clock = ManualClock(2 * 10**12)
    log = Log.open(path, {"cleanup.policy": "compact", "segment.bytes": 16384,
                          "index.interval.bytes": 4096}, clock=clock)
    before = [(r.offset, r.key, r.value, r.headers) for r in log.records()]
    active = log.active_segment.base_offset
    latest = {}
    for o, k, _, _ in before:
        if o < active and k is not None:
            latest[k] = o
    expected = [r for r in before if r[0] >= active or (r[1] is not None and latest[r[1]] == r[0])]
    result = Cleaner(log.config).clean(log)
    assert result.end_offset == active
    got = [(r.offset, r.key, r.value, r.headers) for r in log.records()]
    assert got == expected  # offsets, values, null values and headers as they were
    assert result.removed_by_reason["keyless"] == sum(1 for r in before if r[0] < active and r[1] is None)
    codecs = {b.compression for s in log.segments for b in s.iter_batches()}
    assert codecs >= {"gzip", "snappy", "lz4", "zstd"}  # rewritten batches keep their codec
    log.close()


class _StatefulLog:
    """A Log seen together with its producer state and LSO, as the cleaner looks for them."""

    def __init__(self, log, producers, lso):
        self._log, self.last_stable_offset = log, lso
        self.producer_state = type("PSM", (), {"producers": producers})()

    def __getattr__(self, name):
        return getattr(self._log, name)


def test_producer_state_and_lso_come_from_the_log_when_it_carries_them(tmp_path):
    from logstore.producer_append import BatchMetadata, ProducerStateEntry

    clock = ManualClock(10**12)
    log = Log.open(tmp_path / "t-0", COMPACT, clock=clock)
    ts = clock.time_ms()
    log.append(build_batch([Record(0, ts, b"k", b"1")], producer_id=4, producer_epoch=0, base_sequence=0))
    log.append(build_batch([Record(0, ts, b"k", b"2")]))
    log.roll()
    log.append([(b"k", b"3")])
    log.roll()
    # An open transaction at offset 2 (the LSO) keeps the last segment out of this round.
    result = Cleaner(log.config).clean(_StatefulLog(log, {}, 2))
    assert result.first_uncleanable_offset == 2
    batches = [b for s in log.segments for b in s.iter_batches()]
    # Producer 4 has expired from the producer state: its emptied batch goes (the headers alone
    # would have kept it as the producer's last batch).
    assert [(b.base_offset, b.record_count) for b in batches] == [(1, 1), (2, 1)]
    entry = ProducerStateEntry(4, 0)
    entry.batch_metadata.append(BatchMetadata(0, 0, 0, ts))
    assert Cleaner(log.config).clean(_StatefulLog(log, {4: entry}, 3)).end_offset == 3
    log.close()


def test_garbage_after_the_last_batch_of_a_segment_stops_the_clean(tmp_path):
    from logstore.errors import CorruptRecordError

    clock = ManualClock(10**12)
    log = _open(tmp_path / "t-0", clock)
    for i in range(30):
        log.append([(b"k%d" % (i % 3), b"v")])
    log.roll()
    with open(log.segments[0].log_path, "ab") as f:
        f.write(b"\x00" * 7)
    log.close()
    log = _open(tmp_path / "t-0", clock)  # a clean shutdown: no recovery of old segments
    before = _read(log)
    with pytest.raises(CorruptRecordError, match="after the last complete batch"):
        Cleaner(log.config).clean(log)
    assert _read(log) == before
    assert not any(p.name.endswith(".cleaned") for p in (tmp_path / "t-0").iterdir())
    log.close()


@pytest.mark.parametrize("delete_delay_ms", [0, 60_000])
def test_a_truncation_into_segments_being_cleaned_aborts_their_swap(tmp_path, delete_delay_ms):
    """A follower truncates into a segment the cleaner is reading, takes new records from its
    leader and rolls again: the segment object is the same but its bytes are not, and the swap
    must not put the old records back over the new ones (Kafka aborts cleaning on truncation).
    Segments the truncation deleted (at once, or renamed for later) abort the clean too."""
    clock = ManualClock(10**12)
    log = _open(tmp_path / "t-0", clock, **{"file.delete.delay.ms": delete_delay_ms})
    model: dict = {}
    _fill(log, [(b"k%d" % (i % 5), b"v%d" % i) for i in range(120)], model)
    log.roll()
    cleaner = Cleaner(log.config)
    check = cleaner._check_abort
    cut = log.segments[0].base_offset + 3
    state = {"checks": 0}

    def truncate_mid_clean():
        state["checks"] += 1
        if state["checks"] == 3:  # inside the first group, after its segments were read
            log.truncate_to(cut)
            for i in range(200):
                log.append([(b"new%d" % (i % 7), b"n%d" % i)])
            log.roll()
        check()

    cleaner._check_abort = truncate_mid_clean
    expected = [(r.offset, r.key, r.value) for r in log.records()]
    with pytest.raises(LogCleaningAbortedError, match="while being cleaned"):
        cleaner.clean(log)
    after = _read(log)
    assert after[:3] == expected[:3]
    assert [(k, v) for _, k, v in after[3:]] == [(b"new%d" % (i % 7), b"n%d" % i) for i in range(200)]

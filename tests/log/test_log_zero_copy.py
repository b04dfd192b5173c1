"""Log.read with zero_copy: a FileSlice of the segment file over exactly the batches the
bytes read returns, found from the index and batch headers, its descriptor pinned in the
descriptor pool until the slice is closed, even past the deletion of its segment."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logstore import Log
from logstore.clock import ManualClock
from logstore.descriptor_pool import process_pool
from logstore.file_slice import FileSlice
from logstore.records import iter_batches
from tests.log.log_builders import batch
from tests.support.clock import NOW

CONFIG = {"segment.bytes": 4096, "index.interval.bytes": 300}


def read_both(log, offset, max_bytes, **options):
    """(bytes read, first offset, next offset) and the same from a zero-copy read, its slice closed."""
    plain = log.read(offset, max_bytes, **options)
    sliced = log.read(offset, max_bytes, zero_copy=True, **options)
    records = sliced.records
    if isinstance(records, FileSlice):
        with records:
            records = records.read()
    return ((bytes(plain.records), plain.first_offset, plain.next_offset),
            (records, sliced.first_offset, sliced.next_offset))


def expected_batches(appended, segment_bases, offset, max_bytes, limit, min_one):
    """The model's answer: (base, last) of the batches a read returns, from the one holding
    `offset`, within its segment, below `limit` and `max_bytes` (the first whole with `min_one`)."""
    start = next(i for i, (_, last, _) in enumerate(appended) if last >= offset)
    segment_end = min((b for b in segment_bases if b > appended[start][0]), default=None)
    taken, total = [], 0
    for base, last, size in appended[start:]:
        if last >= limit or (segment_end is not None and base >= segment_end):
            break
        if total + size > max_bytes and not (min_one and not taken):
            break
        taken.append((base, last))
        total += size
    return taken


# Small segments and index interval (reads cross segments and index entries), and large
# batches (a slice's walk reads headers past its first chunk).
LAYOUTS = [(CONFIG, 200, 5000), ({"segment.bytes": 200_000, "index.interval.bytes": 150_000}, 4000, 200_000)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layout=st.sampled_from(LAYOUTS), sizes=st.lists(st.integers(1, 12), min_size=1, max_size=30),
       value_pick=st.floats(0, 1), offset_pick=st.floats(0, 1), bytes_pick=st.floats(0, 1), min_one=st.booleans(),
       isolation=st.sampled_from(["log_end", "high_watermark"]), hw_pick=st.floats(0, 1),
       max_offset_pick=st.none() | st.floats(0, 1.1))
def test_a_zero_copy_read_covers_the_batches_a_bytes_read_returns(tmp_path_factory, layout, sizes, value_pick,
                                                                  offset_pick, bytes_pick, min_one, isolation,
                                                                  hw_pick, max_offset_pick):
    config, max_value, max_max_bytes = layout
    with Log.open(tmp_path_factory.mktemp("zc") / "t-0", config, clock=ManualClock(NOW)) as log:
        appended = []
        for n in sizes:
            base = log.log_end_offset
            data = batch(n, value=b"v" * max(1, int(value_pick * max_value)))
            log.append(data)
            appended.append((base, base + n - 1, len(data)))
        end = log.log_end_offset
        log.high_watermark = int(hw_pick * end)
        offset = int(offset_pick * end)
        max_bytes = int(bytes_pick * max_max_bytes)
        max_offset = None if max_offset_pick is None else int(max_offset_pick * end)
        plain, sliced = read_both(log, offset, max_bytes, min_one_batch=min_one, isolation=isolation,
                                  max_offset=max_offset)
        assert sliced == plain
        limit = min(end if isolation == "log_end" else log.high_watermark,
                    end if max_offset is None else max_offset)
        expected = [] if offset >= limit else expected_batches(
            appended, [s.base_offset for s in log.segments], offset, max_bytes, limit, min_one)
        assert [(b.base_offset, b.last_offset) for b in iter_batches(plain[0])] == expected
        assert plain[2] == (expected[-1][1] + 1 if expected else offset)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(1, 3), min_size=40, max_size=150), interval=st.sampled_from([1, 150, 400]),
       offset_pick=st.floats(0, 0.5), bytes_pick=st.floats(0, 1), max_offset_pick=st.none() | st.floats(0, 1.1))
def test_a_read_of_many_small_batches_ends_where_the_model_says(tmp_path_factory, sizes, interval, offset_pick,
                                                               bytes_pick, max_offset_pick):
    """Reads many batches long look their end up in the offset index (a walk over the last
    few headers instead of all of them): the same batches and next offset as a full walk."""
    config = {"segment.bytes": 1_000_000, "index.interval.bytes": interval}
    with Log.open(tmp_path_factory.mktemp("small") / "t-0", config, clock=ManualClock(NOW)) as log:
        appended = []
        for n in sizes:
            base = log.log_end_offset
            data = batch(n, value=b"v" * 5)
            log.append(data)
            appended.append((base, base + n - 1, len(data)))
        end = log.log_end_offset
        offset = int(offset_pick * end)
        max_bytes = int(bytes_pick * sum(size for _, _, size in appended))
        max_offset = None if max_offset_pick is None else int(max_offset_pick * end)
        plain, sliced = read_both(log, offset, max_bytes, max_offset=max_offset)
        assert sliced == plain
        limit = end if max_offset is None else min(end, max_offset)
        expected = [] if offset >= limit else expected_batches(appended, [0], offset, max_bytes, limit, True)
        assert [(b.base_offset, b.last_offset) for b in iter_batches(plain[0])] == expected
        assert plain[2] == (expected[-1][1] + 1 if expected else offset)


def test_a_slice_keeps_its_descriptor_while_the_pool_gives_back_the_others(tmp_path):
    pool = process_pool()
    capacity = pool.capacity
    with Log.open(tmp_path / "t-0", CONFIG, clock=ManualClock(NOW)) as log:
        for _ in range(20):
            log.append(batch(5, value=b"x" * 100))
        expected = bytes(log.read(0, 1000).records)
        first = log.segments[0]
        try:
            with log.read(0, 1000, zero_copy=True).records as sliced:
                pool.resize(1)  # every segment not pinned gives its descriptors back
                assert first.descriptors.held
                assert sliced.read() == expected
            pool.resize(1)
            assert not first.descriptors.held  # unpinned once closed
        finally:
            pool.resize(capacity)


def test_a_slice_outlives_the_deletion_of_its_segment(tmp_path):
    with Log.open(tmp_path / "t-0", CONFIG, clock=ManualClock(NOW)) as log:
        for _ in range(20):
            log.append(batch(5, value=b"x" * 100))
        expected = bytes(log.read(0, 1000).records)
        sliced = log.read(0, 1000, zero_copy=True).records
        first = log.segments[0]
        log.delete_segments(log.segments[:-1])
        log.delete_expired_files(NOW + 10**9)
        assert not list(log.dir.glob("00000000000000000000.log*"))
        with sliced:
            assert first.descriptors.held  # closed by the deletion, kept open while pinned
            assert sliced.read() == expected
        assert not first.descriptors.held


def test_a_zero_copy_read_that_fails_leaves_no_descriptor_pinned(tmp_path, monkeypatch):
    with Log.open(tmp_path / "t-0", CONFIG, clock=ManualClock(NOW)) as log:
        for _ in range(20):
            log.append(batch(5, value=b"x" * 100))
        first = log.segments[0]

        read_bytes = first.read_bytes

        def failing_read(position, size):  # the slice is found; reading its first offset fails
            if size == 8:
                raise OSError(5, "Input/output error")
            return read_bytes(position, size)

        monkeypatch.setattr(first, "read_bytes", failing_read)
        with pytest.raises(OSError, match="Input/output error") as failed:
            log.read(0, 1000, zero_copy=True)
        assert failed.value.__traceback__ is not None  # its frames, and what they hold, still alive
        assert not first.descriptors.pins



@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(1, 3), min_size=10, max_size=30), interval=st.sampled_from([1, 150, 400]),
       damage_pick=st.floats(0, 1), offset_pick=st.floats(0, 1), max_bytes_pick=st.floats(0, 1),
       length=st.sampled_from([0, 5, 2**31 - 1]), garbage=st.sampled_from([-1, 0, 10**12]))
def test_a_damaged_header_never_makes_a_read_report_an_offset_past_its_batches(
        tmp_path_factory, sizes, interval, damage_pick, offset_pick, max_bytes_pick, length, garbage):
    """A batch whose base offset and length are garbage: reads before it (bytes and zero-copy)
    report a next offset from the batches they return, never one read from the damaged header."""
    with Log.open(tmp_path_factory.mktemp("damaged") / "t-0", {"index.interval.bytes": interval},
                  clock=ManualClock(NOW)) as log:
        appended, position = [], 0
        for n in sizes:
            base = log.log_end_offset
            data = batch(n, value=b"v" * 5)
            log.append(data)
            appended.append((base, base + n - 1, position, len(data)))
            position += len(data)
        damaged = int(damage_pick * (len(appended) - 1))
        base, _, at, _ = appended[damaged]
        with open(log.segments[0].log_path, "r+b") as f:  # baseOffset and batchLength
            f.seek(at)
            f.write(garbage.to_bytes(8, "big", signed=True) + length.to_bytes(4, "big", signed=True))
        offset = int(offset_pick * base)
        if offset == base:
            return  # a read from the damaged batch raises, as the damage tests show
        # Each read returns whole batches from the one holding `offset`; either it stops before
        # the damage or (having skipped its header by the index) takes it along with the rest.
        ends = {start + size: last + 1 for _, last, start, size in appended}
        first_base, first_position = next((b, start) for b, last, start, _ in appended if last >= offset)
        for records, first, next_offset in read_both(log, offset, int(max_bytes_pick * position)):
            assert first == first_base
            assert next_offset == ends[first_position + len(records)]

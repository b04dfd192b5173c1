"""Log.read against a list model: whole batches from the one holding the offset, within one
segment, at most max_bytes (the first batch whole with min_one_batch, as Kafka returns it), for
any start; sequential readers following FetchResult.next_offset see every batch once, across
segment boundaries and truncations."""

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logstore import Log
from logstore.clock import ManualClock
from logstore.errors import CorruptRecordError
from logstore.records import iter_batches, read_batch_header
from logstore.records.header import LOG_OVERHEAD, SIZE_OFFSET
from tests.log.log_builders import batch
from tests.support.clock import NOW

# A batch appended as a follower: records, value size, offsets skipped before it (as after compaction).
batch_specs = st.tuples(st.integers(1, 4), st.integers(0, 200), st.sampled_from([0, 0, 0, 1, 7]))
# A follower append: one to three batches in one call (one index entry for all of them).
appends = st.lists(st.lists(batch_specs, min_size=1, max_size=3), min_size=1, max_size=14)
configs = st.fixed_dictionaries({"segment.bytes": st.integers(3000, 8000),
                                 "index.interval.bytes": st.sampled_from([1, 100, 700, 4096])})


class LogModel:
    """The log as a list of (segment base offset, base offset, last offset, bytes) per batch."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, int, int, bytes]] = []

    def append(self, log: Log, specs: list[tuple[int, int, int]]) -> None:
        offset = log.log_end_offset
        built = []
        for records, value_size, gap in specs:
            offset += gap
            built.append((offset, batch(records, value=b"v" * value_size, base_offset=offset)))
            offset += records
        log.append_as_follower(b"".join(data for _, data in built))
        segments = [s.base_offset for s in log.segments]
        for base, data in built:
            segment = max(s for s in segments if s <= base)
            self.batches.append((segment, base, read_batch_header(data).last_offset, data))

    def truncate(self, offset: int) -> None:
        self.batches = [b for b in self.batches if b[2] < offset]

    def read(self, segments: list[int], offset: int, max_bytes: int, min_one: bool) -> tuple[bytes, int]:
        """What Log.read returns: (records, first offset)."""
        start = max([s for s in segments if s <= offset], default=segments[0])
        for segment in segments[segments.index(start):]:
            held = [b for b in self.batches if b[0] == segment and b[2] >= offset]
            if held:
                break
        else:
            return b"", offset
        out = []
        for i, (_, _, _, data) in enumerate(held):
            if sum(map(len, out)) + len(data) > max_bytes and not (i == 0 and min_one):
                break
            out.append(data)
        return (b"".join(out), held[0][1]) if out else (b"", offset)


def last_batch_end(records: bytes) -> int:
    """The offset after the last batch of `records`."""
    return list(iter_batches(records))[-1].next_offset


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=configs, appends=appends, data=st.data())
def test_reads_return_the_batches_of_a_list_model(config, appends, data):
    with tempfile.TemporaryDirectory() as tmp:
        model = LogModel()
        with Log.open(Path(tmp) / "t-0", config, clock=ManualClock(NOW)) as log:
            for specs in appends:
                model.append(log, specs)
            ends: list[int] = []
            for _ in range(data.draw(st.integers(1, 12), label="operations")):
                segments = [s.base_offset for s in log.segments]
                end = log.log_end_offset
                # Often where an earlier read ended: a sequential reader, possibly from before a truncation.
                valid = [o for o in ends if log.log_start_offset <= o <= end]
                at_end = st.sampled_from(valid) if valid else st.integers(log.log_start_offset, end)
                if data.draw(st.integers(0, 5), label="truncate?") == 0:
                    cut = data.draw(st.one_of(at_end, st.integers(0, end)), label="truncate to")
                    log.truncate_to(cut)
                    model.truncate(cut)
                    for _ in range(data.draw(st.integers(1, 3), label="appends")):
                        model.append(log, data.draw(st.lists(batch_specs, min_size=1, max_size=3), label="append"))
                    continue
                offset = data.draw(st.one_of(at_end, st.integers(log.log_start_offset, end)), label="offset")
                max_bytes = data.draw(st.integers(0, 3000), label="max bytes")
                min_one = data.draw(st.booleans(), label="min one batch")
                fetched = log.read(offset, max_bytes, min_one_batch=min_one)
                expected, first = model.read(segments, offset, max_bytes, min_one)
                assert bytes(fetched.records) == expected
                assert fetched.first_offset == first
                assert fetched.next_offset == (last_batch_end(expected) if expected else offset)
                ends.append(fetched.next_offset)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=configs, appends=appends, start=st.integers(0, 200), max_bytes=st.integers(0, 3000))
def test_a_sequential_reader_sees_every_batch_once_across_segments(config, appends, start, max_bytes):
    with tempfile.TemporaryDirectory() as tmp:
        model = LogModel()
        with Log.open(Path(tmp) / "t-0", config, clock=ManualClock(NOW)) as log:
            for specs in appends:
                model.append(log, specs)
            offset = min(start, log.log_end_offset)
            seen = []
            while offset < log.log_end_offset:
                fetched = log.read(offset, max_bytes)
                assert fetched.records  # min one batch: never stuck
                seen.append(bytes(fetched.records))
                offset = fetched.next_offset
            assert b"".join(seen) == b"".join(b[3] for b in model.batches if b[2] >= start)


def test_a_read_after_truncation_finds_the_new_batches(tmp_path, clock):
    with Log.open(tmp_path / "t-0", clock=clock) as log:
        for _ in range(4):
            log.append(batch(2, value=b"a" * 50))
        first = log.read(0, 1)  # takes the header of the batch at offset 2 along
        log.truncate_to(1)  # the batch holding offset 1 goes: the log ends at 0
        for value in (b"b" * 500, b"c", b"d" * 5):
            log.append(batch(1, value=value))
        assert first.next_offset == 2 and log.log_end_offset == 3
        assert [b.records()[0].value for b in log.read(2).batches()] == [b"d" * 5]


@pytest.mark.parametrize("zero_copy", [False, True])
def test_a_read_stops_before_an_impossible_batch_size_and_the_next_names_the_file_and_position(tmp_path, clock,
                                                                                               zero_copy):
    size = len(batch(2))
    with Log.open(tmp_path / "t-0", {"segment.bytes": 3 * size}, clock=clock) as log:
        for _ in range(6):
            log.append(batch(2))
    path = min((tmp_path / "t-0").glob("*.log"))  # not the last segment, which opening scans
    damaged = bytearray(path.read_bytes())
    damaged[size + SIZE_OFFSET: size + LOG_OVERHEAD] = (3).to_bytes(4, "big")
    path.write_bytes(damaged)
    with Log.open(tmp_path / "t-0", clock=clock, read_only=True) as log:
        fetched = log.read(0, 10 * size, zero_copy=zero_copy)
        assert len(fetched.records) == size  # the batch before the damage, as a consumer reads it
        with pytest.raises(CorruptRecordError) as caught:
            log.read(2, 10 * size, zero_copy=zero_copy)
    assert caught.value.position == size and str(path) in str(caught.value)

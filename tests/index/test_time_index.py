"""TimeIndex: Kafka's entry layout, maybe_append rules, lookup, truncation and the reserved slot."""

from __future__ import annotations

import bisect
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from index import NO_TIMESTAMP, TimeIndex, TimestampOffset
from logstore.errors import CorruptIndexError, IndexFullError, InvalidOffsetError

BASE = 500
NAME = "00000000000000000500.timeindex"


def make(tmp_path, max_size=120):
    return TimeIndex(tmp_path / NAME, BASE, max_size)


def test_new_time_index_is_preallocated_to_whole_entries(tmp_path):
    idx = make(tmp_path, max_size=125)
    assert idx.max_entries == 10
    assert (tmp_path / NAME).stat().st_size == 120


def test_entries_are_big_endian_timestamp_then_relative_offset(tmp_path):
    idx = make(tmp_path)
    idx.maybe_append(1_700_000_000_000, BASE + 3)
    idx.close()
    assert (tmp_path / NAME).read_bytes() == struct.pack(">qi", 1_700_000_000_000, 3)


def test_maybe_append_only_adds_greater_timestamps(tmp_path):
    idx = make(tmp_path)
    idx.maybe_append(100, BASE + 1)
    idx.maybe_append(100, BASE + 1)  # same entry again (roll/close): ignored
    idx.maybe_append(100, BASE + 5)  # same timestamp, later offset: ignored
    idx.maybe_append(150, BASE + 5)
    assert [tuple(e) for e in idx.entries()] == [(100, BASE + 1), (150, BASE + 5)]


def test_no_timestamp_is_never_indexed(tmp_path):
    idx = make(tmp_path)
    idx.maybe_append(NO_TIMESTAMP, BASE + 1)
    assert idx.entry_count == 0
    assert idx.last_entry == TimestampOffset(NO_TIMESTAMP, BASE)


def test_maybe_append_rejects_going_backwards(tmp_path):
    idx = make(tmp_path)
    idx.maybe_append(100, BASE + 5)
    with pytest.raises(InvalidOffsetError):
        idx.maybe_append(200, BASE + 4)
    with pytest.raises(InvalidOffsetError):
        idx.maybe_append(99, BASE + 6)


def test_last_slot_is_reserved_for_the_roll_entry(tmp_path):
    idx = make(tmp_path, max_size=36)
    idx.maybe_append(10, BASE + 1)
    idx.maybe_append(20, BASE + 2)
    assert idx.is_full
    with pytest.raises(IndexFullError):
        idx.maybe_append(30, BASE + 3)
    idx.maybe_append(30, BASE + 3, skip_full_check=True)
    assert idx.entry_count == 3


def test_lookup_returns_largest_timestamp_at_or_below_target(tmp_path):
    idx = make(tmp_path)
    idx.maybe_append(100, BASE + 2)
    idx.maybe_append(200, BASE + 7)
    assert idx.lookup(99) == TimestampOffset(NO_TIMESTAMP, BASE)
    assert idx.lookup(100) == TimestampOffset(100, BASE + 2)
    assert idx.lookup(199) == TimestampOffset(100, BASE + 2)
    assert idx.lookup(10**15) == TimestampOffset(200, BASE + 7)


def test_truncate_to_searches_by_offset(tmp_path):
    idx = make(tmp_path)
    for ts, rel in ((100, 2), (200, 7), (300, 9)):
        idx.maybe_append(ts, BASE + rel)
    idx.truncate_to(BASE + 8)
    assert idx.last_entry == TimestampOffset(200, BASE + 7)
    idx.truncate_to(BASE + 7)
    assert idx.last_entry == TimestampOffset(100, BASE + 2)
    idx.truncate_to(BASE)
    assert idx.entry_count == 0


def test_resize_and_reopen_keep_the_last_entry(tmp_path):
    idx = make(tmp_path)
    idx.maybe_append(100, BASE + 2)
    idx.close()
    again = TimeIndex(tmp_path / NAME, BASE, 120)
    assert again.last_entry == TimestampOffset(100, BASE + 2)
    again.resize(120)
    again.maybe_append(110, BASE + 3)
    assert again.entry_count == 2


def test_sanity_check_flags_an_untrimmed_zero_tail(tmp_path):
    idx = make(tmp_path)
    idx.maybe_append(1_000, BASE + 2)
    idx.flush()
    idx.close_handler()
    again = TimeIndex(tmp_path / NAME, BASE, 120)
    assert again.entry_count == 10
    with pytest.raises(CorruptIndexError):
        again.sanity_check()
    ro = TimeIndex(tmp_path / NAME, BASE, writable=False)
    assert ro.entry_count == 1
    ro.sanity_check()


@settings(max_examples=60, deadline=None)
@given(
    deltas=st.lists(st.tuples(st.integers(1, 10**6), st.integers(0, 5)), max_size=40),
    targets=st.lists(st.integers(-5, 4 * 10**7), min_size=1, max_size=20),
)
def test_lookup_matches_bisect_over_a_sorted_list(tmp_path_factory, deltas, targets):
    idx = TimeIndex(tmp_path_factory.mktemp("t") / "x.timeindex", BASE, 12 * 64)
    stamps, offsets, ts, rel = [], [], 0, 0
    for dts, drel in deltas:
        ts += dts
        rel += drel
        stamps.append(ts)
        offsets.append(BASE + rel)
        idx.maybe_append(ts, BASE + rel)
    for t in targets:
        i = bisect.bisect_right(stamps, t) - 1
        want = TimestampOffset(stamps[i], offsets[i]) if i >= 0 else TimestampOffset(-1, BASE)
        assert idx.lookup(t) == want
    idx.close()


def test_roll_entry_grows_a_trimmed_index_by_one_slot(tmp_path):
    idx = make(tmp_path)
    idx.maybe_append(10, BASE + 1)
    idx.trim_to_valid_size()
    idx.maybe_append(20, BASE + 2, skip_full_check=True)
    assert idx.length == 24
    assert idx.last_entry == TimestampOffset(20, BASE + 2)

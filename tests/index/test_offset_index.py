"""OffsetIndex: Kafka's entry layout, lookup, truncation, sizing and reopen rules."""

from __future__ import annotations

import bisect
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from index import OffsetIndex, OffsetPosition
from logstore.errors import (
    CorruptIndexError,
    IndexFullError,
    IndexOffsetOverflowError,
    InvalidConfigError,
    InvalidOffsetError,
    ReadOnlyLogError,
)

BASE = 1000


def make(tmp_path, max_size=800, base=BASE, name="00000000000000001000.index"):
    return OffsetIndex(tmp_path / name, base, max_size)


def test_new_index_is_preallocated_to_max_size_rounded_down_to_entries(tmp_path):
    idx = make(tmp_path, max_size=803)
    assert idx.entry_count == 0
    assert (tmp_path / "00000000000000001000.index").stat().st_size == 800
    assert idx.max_entries == 100


def test_entries_are_big_endian_relative_offset_then_position(tmp_path):
    idx = make(tmp_path)
    idx.append(1005, 4096)
    idx.append(1010, 8200)
    idx.close()
    data = (tmp_path / "00000000000000001000.index").read_bytes()
    assert data == struct.pack(">iiii", 5, 4096, 10, 8200)


def test_lookup_returns_largest_entry_at_or_below_target_or_segment_start(tmp_path):
    idx = make(tmp_path)
    for rel in (5, 10, 20):
        idx.append(BASE + rel, rel * 100)
    assert idx.lookup(BASE) == OffsetPosition(BASE, 0)
    assert idx.lookup(BASE + 4) == OffsetPosition(BASE, 0)
    assert idx.lookup(BASE + 5) == OffsetPosition(BASE + 5, 500)
    assert idx.lookup(BASE + 19) == OffsetPosition(BASE + 10, 1000)
    assert idx.lookup(BASE + 10**6) == OffsetPosition(BASE + 20, 2000)
    assert idx.lookup(0) == OffsetPosition(BASE, 0)


def test_empty_index_lookup_returns_segment_start(tmp_path):
    assert make(tmp_path).lookup(BASE + 7) == OffsetPosition(BASE, 0)


def test_append_rejects_offsets_not_above_the_last(tmp_path):
    idx = make(tmp_path)
    idx.append(BASE + 3, 10)
    with pytest.raises(InvalidOffsetError):
        idx.append(BASE + 3, 20)
    with pytest.raises(InvalidOffsetError):
        idx.append(BASE + 2, 20)


def test_append_rejects_offsets_that_overflow_the_relative_offset(tmp_path):
    idx = make(tmp_path)
    assert not idx.can_append_offset(BASE + 2**31)
    assert not idx.can_append_offset(BASE - 1)
    with pytest.raises(IndexOffsetOverflowError):
        idx.append(BASE + 2**31, 0)


def test_append_to_full_index_raises(tmp_path):
    idx = make(tmp_path, max_size=16)
    idx.append(BASE + 1, 1)
    idx.append(BASE + 2, 2)
    assert idx.is_full
    with pytest.raises(IndexFullError):
        idx.append(BASE + 3, 3)


def test_truncate_to_drops_entries_at_or_above_offset(tmp_path):
    idx = make(tmp_path)
    for rel in (5, 10, 20):
        idx.append(BASE + rel, rel)
    idx.truncate_to(BASE + 21)
    assert idx.entry_count == 3
    idx.truncate_to(BASE + 15)
    assert list(idx.entries()["offset"]) == [BASE + 5, BASE + 10]
    idx.truncate_to(BASE + 10)
    assert list(idx.entries()["offset"]) == [BASE + 5]
    idx.truncate_to(BASE)
    assert idx.entry_count == 0
    assert idx.last_offset == BASE


def test_close_trims_to_entries_and_reopen_counts_file_size(tmp_path):
    idx = make(tmp_path)
    idx.append(BASE + 1, 10)
    idx.append(BASE + 2, 20)
    idx.close()
    path = tmp_path / "00000000000000001000.index"
    assert path.stat().st_size == 16
    again = OffsetIndex(path, BASE, 800)
    assert again.entry_count == 2
    assert again.last_entry == OffsetPosition(BASE + 2, 20)
    assert again.resize(800)
    again.append(BASE + 3, 30)
    assert list(again.entries()["position"]) == [10, 20, 30]


def test_reopened_untrimmed_index_counts_every_slot_and_fails_sanity_check(tmp_path):
    # Kafka's rule: an existing file holds (file size / entry size) entries. An active index
    # that was never trimmed (crash) therefore reads as full of zero entries; sanity_check
    # flags it so the segment gets recovered.
    idx = make(tmp_path, max_size=80)
    idx.append(BASE + 4, 100)
    idx.flush()
    idx.close_handler()
    path = tmp_path / "00000000000000001000.index"
    again = OffsetIndex(path, BASE, 80)
    assert again.entry_count == 10
    assert again.is_full
    with pytest.raises(CorruptIndexError):
        again.sanity_check()


def test_read_only_open_keeps_the_ascending_prefix_and_changes_no_byte(tmp_path):
    idx = make(tmp_path, max_size=80)
    idx.append(BASE + 4, 100)
    idx.append(BASE + 9, 300)
    idx.flush()
    idx.close_handler()
    path = tmp_path / "00000000000000001000.index"
    before = path.read_bytes()
    ro = OffsetIndex(path, BASE, writable=False)
    assert ro.entry_count == 2
    assert ro.lookup(BASE + 100) == OffsetPosition(BASE + 9, 300)
    ro.sanity_check()
    with pytest.raises(ReadOnlyLogError):
        ro.append(BASE + 10, 400)
    ro.close()
    assert path.read_bytes() == before


class CountingAccount:
    """A descriptor account that counts what the index holds."""

    def __init__(self):
        self.held = 0

    def acquire(self):
        self.held += 1

    def release(self):
        self.held -= 1

    def touch(self):
        return True  # used by this one thread: nothing to pin


def test_an_unloaded_index_gives_its_descriptor_back_and_keeps_its_entries(tmp_path):
    account = CountingAccount()
    path = tmp_path / "00000000000000001000.index"
    idx = OffsetIndex(path, BASE, 800, account=account)
    idx.append(BASE + 1, 10)
    assert account.held == 1
    assert idx.unload() and account.held == 0 and not idx.is_loaded
    idx.append(BASE + 2, 20)  # maps the file again, with its one entry, not 100 "full" slots
    assert account.held == 1 and idx.lookup(BASE + 5) == OffsetPosition(BASE + 2, 20)
    idx.unload()
    idx.close()  # trims without mapping the file again
    assert account.held == 0 and path.stat().st_size == 16
    assert list(OffsetIndex(path, BASE, 800).entries()["position"]) == [10, 20]


def test_a_preallocated_index_holds_no_descriptor_until_used(tmp_path):
    account = CountingAccount()
    path = tmp_path / "00000000000000001000.index"
    idx = OffsetIndex(path, BASE, 800, account=account)
    idx.preallocate()
    assert path.stat().st_size == 800 and account.held == 0
    assert idx.entry_count == 0 and idx.max_entries == 100 and account.held == 1


def test_opening_is_lazy_until_first_use(tmp_path):
    path = tmp_path / "00000000000000001000.index"
    idx = OffsetIndex(path, BASE, 800)
    assert not idx.is_loaded
    assert not path.exists()
    idx.close()
    assert not path.exists()


def test_sanity_check_rejects_partial_entry_and_descending_entries(tmp_path):
    path = tmp_path / "00000000000000001000.index"
    path.write_bytes(struct.pack(">ii", 1, 10) + b"\x00\x00\x00")
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, BASE, 800).sanity_check()
    path.write_bytes(struct.pack(">iiii", 5, 10, 3, 20))
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, BASE, 800).sanity_check()
    path.write_bytes(struct.pack(">ii", -3, 10))
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, BASE, 800).sanity_check()


def test_reset_removes_entries_and_regrows(tmp_path):
    idx = make(tmp_path)
    idx.append(BASE + 1, 1)
    idx.trim_to_valid_size()
    assert idx.length == 8
    idx.reset()
    assert idx.entry_count == 0
    assert idx.length == 800


def test_rename_and_delete(tmp_path):
    idx = make(tmp_path)
    idx.append(BASE + 1, 1)
    new = tmp_path / "00000000000000001000.index.deleted"
    idx.rename_to(new)
    assert new.exists()
    assert idx.lookup(BASE + 1) == OffsetPosition(BASE + 1, 1)
    assert idx.delete()
    assert not new.exists()
    assert not idx.delete()


@settings(max_examples=60, deadline=None)
@given(
    deltas=st.lists(st.integers(1, 1000), min_size=0, max_size=60),
    targets=st.lists(st.integers(-10, 70_000), min_size=1, max_size=20),
)
def test_lookup_matches_bisect_over_a_sorted_list(tmp_path_factory, deltas, targets):
    tmp = tmp_path_factory.mktemp("idx")
    idx = OffsetIndex(tmp / "x.index", BASE, 8 * 64)
    rels, rel = [], 0
    for d in deltas:
        rel += d
        rels.append(rel)
        idx.append(BASE + rel, rel * 2)
    for t in targets:
        i = bisect.bisect_right(rels, t) - 1
        want = OffsetPosition(BASE + rels[i], rels[i] * 2) if i >= 0 else OffsetPosition(BASE, 0)
        assert idx.lookup(BASE + t) == want
        assert idx.lookup_position(t * 2) == want  # positions ascend with the offsets here
        before = OffsetPosition(BASE + rels[i - 1], rels[i - 1] * 2) if i >= 1 else OffsetPosition(BASE, 0)
        assert idx.lookup_before_position(t * 2) == before  # the entry before that one
    idx.close()


@settings(max_examples=60, deadline=None)
@given(
    deltas=st.lists(st.integers(1, 50), max_size=40),
    cut=st.integers(-5, 2100),
)
def test_truncate_to_matches_a_list_model(tmp_path_factory, deltas, cut):
    idx = OffsetIndex(tmp_path_factory.mktemp("idx") / "x.index", BASE, 8 * 64)
    model, rel = [], 0
    for d in deltas:
        rel += d
        model.append((BASE + rel, rel))
        idx.append(BASE + rel, rel)
    idx.truncate_to(BASE + cut)
    assert idx.entries().tolist() == [e for e in model if e[0] < BASE + cut]
    idx.close()


def test_max_index_size_below_one_entry_is_a_config_error(tmp_path):
    with pytest.raises(InvalidConfigError):
        make(tmp_path, max_size=4).append(BASE + 1, 0)

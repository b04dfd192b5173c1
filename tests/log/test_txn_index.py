"""TransactionIndex: Kafka's `.txnindex` entries (docs/FORMAT.md "Segment files") and its rules."""

from __future__ import annotations

import struct

import pytest

from logstore import dump
from logstore.errors import CorruptIndexError, CorruptRecordError, CorruptTxnIndexError
from logstore.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex, parse_aborted_txns

ENTRY = struct.Struct(">hqqqq")  # docs/FORMAT.md: version, producerId, first, last, lastStableOffset


@pytest.fixture
def index(tmp_path):
    return TransactionIndex.for_segment(tmp_path, 0)


def test_entry_is_34_big_endian_bytes_with_version_0():
    txn = AbortedTxn(producer_id=7, first_offset=100, last_offset=150, last_stable_offset=101)
    assert ENTRY_SIZE == 34
    assert txn.to_bytes() == ENTRY.pack(0, 7, 100, 150, 101)


def test_file_is_named_after_the_segment_and_created_on_first_append(tmp_path):
    idx = TransactionIndex.for_segment(tmp_path, 1234)
    assert idx.path.name == "00000000000000001234.txnindex"
    assert not idx.path.exists()
    assert idx.all_aborted_txns() == []
    idx.append(AbortedTxn(1, 1234, 1240, 1241))
    idx.append(AbortedTxn(2, 1235, 1250, 1251))
    assert idx.path.read_bytes() == ENTRY.pack(0, 1, 1234, 1240, 1241) + ENTRY.pack(0, 2, 1235, 1250, 1251)


def test_entries_read_back_after_reopen_and_order_is_enforced(tmp_path, index):
    txns = [AbortedTxn(1, 0, 10, 11), AbortedTxn(2, 5, 20, 21)]
    for txn in txns:
        index.append(txn)
    reopened = TransactionIndex.for_segment(tmp_path, 0)
    assert reopened.all_aborted_txns() == txns
    with pytest.raises(ValueError):
        reopened.append(AbortedTxn(3, 15, 20, 21))


def test_collect_aborted_txns_returns_overlaps_and_stops_at_the_upper_bound(index):
    index.append(AbortedTxn(1, 0, 10, 0))
    index.append(AbortedTxn(2, 12, 30, 12))
    index.append(AbortedTxn(3, 40, 50, 51))
    index.append(AbortedTxn(4, 45, 60, 61))
    result = index.collect_aborted_txns(fetch_offset=11, upper_bound_offset=45)
    # txn 1 ended before the fetch; txn 3 overlaps; its LSO 51 >= 45 ends the search.
    assert result.aborted == [AbortedTxn(2, 12, 30, 12), AbortedTxn(3, 40, 50, 51)]
    assert result.is_complete
    result = index.collect_aborted_txns(fetch_offset=0, upper_bound_offset=1000)
    assert [t.producer_id for t in result.aborted] == [1, 2, 3, 4]
    assert not result.is_complete  # later segments may still hold overlapping aborts


def test_truncate_to_removes_entries_ending_at_or_after_offset(tmp_path, index):
    for pid, last in [(1, 10), (2, 20), (3, 30)]:
        index.append(AbortedTxn(pid, last - 5, last, last + 1))
    index.truncate_to(20)
    assert [t.producer_id for t in index.all_aborted_txns()] == [1]
    assert index.path.stat().st_size == ENTRY_SIZE
    index.append(AbortedTxn(4, 12, 15, 16))  # the last offset restarted at 10
    index.truncate_to(0)
    assert index.all_aborted_txns() == []
    index.append(AbortedTxn(5, 0, 1, 2))


def test_reset_empties_the_file(index):
    index.append(AbortedTxn(1, 0, 10, 11))
    index.reset()
    assert index.path.read_bytes() == b""
    index.append(AbortedTxn(1, 0, 5, 6))
    assert len(index) == 1


def test_sanity_check_rejects_an_entry_before_the_segment(tmp_path):
    idx = TransactionIndex.for_segment(tmp_path, 100)
    idx.append(AbortedTxn(1, 90, 120, 121))
    idx.sanity_check()
    idx.path.write_bytes(ENTRY.pack(0, 1, 50, 99, 100))
    with pytest.raises(CorruptIndexError, match="start offset 100"):
        TransactionIndex.for_segment(tmp_path, 100).sanity_check()


def test_unknown_entry_version_is_corrupt_on_use_not_on_construction(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(ENTRY.pack(1, 1, 0, 10, 11))
    index = TransactionIndex(0, path)
    with pytest.raises(CorruptIndexError, match="version 1"):
        index.sanity_check()


def test_a_torn_trailing_partial_entry_is_ignored(index):
    index.append(AbortedTxn(1, 0, 10, 11))
    with open(index.path, "ab") as f:
        f.write(b"\x00" * 20)
    assert index.all_aborted_txns() == [AbortedTxn(1, 0, 10, 11)]


def test_rename_and_delete_follow_the_file(tmp_path, index):
    index.append(AbortedTxn(1, 0, 10, 11))
    index.flush()
    target = tmp_path / (index.path.name + ".deleted")
    index.rename_to(target)
    assert target.exists() and index.path == target
    assert index.all_aborted_txns() == [AbortedTxn(1, 0, 10, 11)]
    index.close()
    assert index.delete() is True
    assert index.delete() is False


def test_parse_aborted_txns_reads_whole_entries_as_a_numpy_array():
    data = ENTRY.pack(0, 7, 10, 20, 30) + ENTRY.pack(0, 8, 21, 25, 26) + b"\x00" * 5
    entries = parse_aborted_txns(data, "/d/00000000000000000000.txnindex")
    assert entries.dtype.itemsize == ENTRY_SIZE == 34
    assert entries["producer_id"].tolist() == [7, 8]
    assert entries["last_stable_offset"].tolist() == [30, 26]


def test_parse_aborted_txns_names_the_file_and_position_of_an_unknown_version():
    data = ENTRY.pack(0, 7, 10, 20, 30) + ENTRY.pack(3, 8, 21, 25, 26)
    with pytest.raises(CorruptTxnIndexError) as caught:
        parse_aborted_txns(data, "/d/00000000000000000000.txnindex")
    assert caught.value.position == ENTRY_SIZE
    assert "version 3 in transaction index /d/00000000000000000000.txnindex" in str(caught.value)
    assert isinstance(caught.value, CorruptIndexError)
    assert isinstance(caught.value, CorruptRecordError)


def test_dump_and_the_index_read_entries_with_the_same_parser(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(ENTRY.pack(0, 7, 10, 20, 30) + ENTRY.pack(1, 8, 21, 25, 26))
    with pytest.raises(CorruptTxnIndexError, match="position 34"):
        TransactionIndex(0, path).all_aborted_txns()
    with pytest.raises(CorruptTxnIndexError, match="position 34"):
        dump.read_aborted_txns(path.read_bytes(), str(path))


def test_an_index_kept_in_memory_never_touches_its_file(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(ENTRY.pack(5, 1, 0, 10, 11))  # corrupt: left exactly as it is
    index = TransactionIndex(0, path)
    index.keep_in_memory()
    index.append(AbortedTxn(1, 0, 10, 11))
    index.append(AbortedTxn(2, 12, 20, 21))
    assert index.in_memory
    assert index.collect_aborted_txns(0, 15).aborted == [AbortedTxn(1, 0, 10, 11),
                                                        AbortedTxn(2, 12, 20, 21)]
    index.truncate_to(20)
    assert index.all_aborted_txns() == [AbortedTxn(1, 0, 10, 11)]
    index.flush()
    assert path.read_bytes() == ENTRY.pack(5, 1, 0, 10, 11)

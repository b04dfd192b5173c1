"""Log reads bounded by fetch isolation: log end, high watermark, and read_committed."""

import pytest

from logstore import Log, Record
from logstore.clock import ManualClock
from logstore.records import build_batch, build_control_batch
from tests.support.clock import NOW


def txn_batch(producer_id, sequence, values):
    records = [Record(i, NOW, b"k", v) for i, v in enumerate(values)]
    return build_batch(records, producer_id=producer_id, producer_epoch=0, base_sequence=sequence,
                       is_transactional=True)


def marker(kind, producer_id):
    return build_control_batch(kind, producer_id=producer_id, producer_epoch=0, coordinator_epoch=0,
                               timestamp=NOW)


@pytest.fixture
def log(tmp_path):
    with Log.open(tmp_path / "t-0", clock=ManualClock(NOW)) as log:
        yield log


def test_read_committed_drops_aborted_records_and_markers(log):
    log.append(txn_batch(1, 0, [b"a1", b"a2"]))  # 0-1, aborted below
    log.append(txn_batch(2, 0, [b"c1"]))  # 2, committed below
    log.append(marker("abort", 1), origin="coordinator")  # 3
    log.append([(b"k", b"plain")])  # 4
    log.append(marker("commit", 2), origin="coordinator")  # 5
    assert log.last_stable_offset == 6
    fetched = log.read(0, isolation="read_committed")
    assert [(t.producer_id, t.first_offset) for t in fetched.aborted_transactions] == [(1, 0)]
    assert [r.value for r in log.records(isolation="read_committed")] == [b"c1", b"plain"]
    assert len(list(log.records())) == 6


def test_an_open_transaction_holds_the_last_stable_offset_back(log):
    log.append([(b"k", b"before")])  # 0
    log.append(txn_batch(1, 0, [b"open"]))  # 1, undecided
    log.append([(b"k", b"after")])  # 2
    assert log.last_stable_offset == 1
    assert [r.value for r in log.records(isolation="read_committed")] == [b"before"]
    assert [r.offset for r in log.records(isolation="high_watermark")] == [0, 1, 2]
    log.append(marker("commit", 1), origin="coordinator")
    assert [r.value for r in log.records(isolation="read_committed")] == [b"before", b"open", b"after"]


def test_high_watermark_isolation_stops_at_the_high_watermark(tmp_path):
    with Log.open(tmp_path / "t-0", clock=ManualClock(NOW)) as log:
        log.high_watermark_follows_log_end = False
        log.append([(b"k", b"1")])
        log.append([(b"k", b"2")])
        log.high_watermark = 1
        assert [r.offset for r in log.records(isolation="high_watermark")] == [0]
        assert [r.offset for r in log.records()] == [0, 1]
        assert log.last_stable_offset == 1
        with pytest.raises(ValueError, match="isolation"):
            log.read(0, isolation="read_uncommitted")


def _dir_bytes(directory):
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def write_aborted_transactions_across_segments(directory):
    """Producer 1's transaction spans a roll and is aborted in the second segment; producer 2
    commits; producer 3 aborts inside the third. Returns the committed values."""
    with Log.open(directory, {"segment.bytes": 200}, clock=ManualClock(NOW)) as log:
        log.append(txn_batch(1, 0, [b"a1"]))
        log.append(txn_batch(2, 0, [b"c1"]))
        log.append(txn_batch(1, 1, [b"a2"]))
        log.append(marker("abort", 1), origin="coordinator")
        log.append(marker("commit", 2), origin="coordinator")
        log.append([(b"k", b"plain")])
        log.append(txn_batch(3, 0, [b"a3"]))
        log.append(marker("abort", 3), origin="coordinator")
        assert len(log.segments) >= 3
        assert [r.value for r in log.records(isolation="read_committed")] == [b"c1", b"plain"]
    return [b"c1", b"plain"]


def test_read_only_read_committed_rebuilds_missing_txn_indexes_in_memory(tmp_path):
    directory = tmp_path / "t-0"
    committed = write_aborted_transactions_across_segments(directory)
    for path in directory.glob("*.txnindex"):
        path.unlink()
    before = _dir_bytes(directory)
    with Log.open(directory, read_only=True) as log:
        assert [r.value for r in log.records(isolation="read_committed")] == committed
        fetched = log.read(0, isolation="read_committed")
        assert sorted((t.producer_id, t.first_offset) for t in fetched.aborted_transactions) == [
            (1, 0), (3, 6)]
        assert all(s.txn_index.in_memory for s in log.segments)
    assert _dir_bytes(directory) == before


def test_read_only_rebuilds_only_the_segments_missing_their_txn_index(tmp_path):
    directory = tmp_path / "t-0"
    committed = write_aborted_transactions_across_segments(directory)
    kept = sorted(directory.glob("*.txnindex"))
    kept[0].unlink()  # the index of producer 1's abort goes; producer 3's stays on disk
    before = _dir_bytes(directory)
    with Log.open(directory, read_only=True) as log:
        assert [r.value for r in log.records(isolation="read_committed")] == committed
        indexed = {s.base_offset: s.txn_index.in_memory for s in log.segments}
        assert indexed[int(kept[1].name[:20])] is False
    assert _dir_bytes(directory) == before


def corrupt_first_txn_index(directory):
    """Give the first `.txnindex` entry version 7; returns (path, its sound bytes)."""
    path = sorted(directory.glob("*.txnindex"))[0]
    sound = path.read_bytes()
    path.write_bytes(b"\x00\x07" + sound[2:])
    return path, sound


def test_open_recovers_a_segment_whose_txn_index_is_corrupt(tmp_path):
    directory = tmp_path / "t-0"
    committed = write_aborted_transactions_across_segments(directory)
    path, sound = corrupt_first_txn_index(directory)
    with Log.open(directory, clock=ManualClock(NOW)) as log:
        assert path.read_bytes() == sound
        assert [r.value for r in log.records(isolation="read_committed")] == committed


def test_read_only_open_of_a_corrupt_txn_index_rebuilds_it_in_memory(tmp_path):
    directory = tmp_path / "t-0"
    committed = write_aborted_transactions_across_segments(directory)
    corrupt_first_txn_index(directory)
    before = _dir_bytes(directory)
    with Log.open(directory, read_only=True) as log:
        assert [r.value for r in log.records(isolation="read_committed")] == committed
    assert _dir_bytes(directory) == before

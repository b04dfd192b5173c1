"""Log reads bounded by fetch isolation: log end, high watermark, and read_committed via PartitionState."""

import pytest

from logstore import Log, Record
from logstore.clock import ManualClock
from logstore.partition_state import PartitionState
from logstore.records import build_batch, build_control_batch

NOW = 1_700_000_000_000


def txn_batch(producer_id, sequence, values):
    records = [Record(i, NOW, b"k", v) for i, v in enumerate(values)]
    return build_batch(records, producer_id=producer_id, producer_epoch=0, base_sequence=sequence,
                       is_transactional=True)


def marker(kind, producer_id):
    return build_control_batch(kind, producer_id=producer_id, producer_epoch=0, coordinator_epoch=0,
                               timestamp=NOW)


@pytest.fixture
def log(tmp_path):
    with Log.open(tmp_path / "t-0", clock=ManualClock(NOW), hooks=[PartitionState()]) as log:
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

"""Log-level Kafka state: idempotent retries, transactions and the LSO, read_committed reads,
producer snapshots at roll and close, recovery, and the leader-epoch cache (issue 4)."""

from __future__ import annotations

import json
import shutil
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logstore import Log, Record
from logstore.clock import ManualClock
from logstore.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    UnknownProducerIdError,
)
from logstore.list_offsets import EARLIEST_TIMESTAMP
from logstore.log_files import SNAPSHOT_SUFFIX, segment_file_name
from logstore.producer_snapshot import decode_snapshot
from logstore.records import build_batch, build_control_batch, build_legacy_entry, iter_batches
from logstore.txn_index import AbortedTxn
from tests.support.clock import NOW
from tests.support.files import directory_digest
from tests.support.paths import KAFKA_SAMPLE

SAMPLE = KAFKA_SAMPLE
SAMPLE_CONFIG = {
    "segment.bytes": 16384,
    "index.interval.bytes": 4096,
    "compression.type": "producer",
    "message.timestamp.type": "CreateTime",
}
TXN_ENTRY = struct.Struct(">hqqqq")  # docs/FORMAT.md .txnindex entry


def data(pid, epoch, seq, n=1, *, txn=False, value=b"v"):
    records = [Record(i, NOW + i, b"k", value + str(seq + i).encode()) for i in range(n)]
    return build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       is_transactional=txn)


def marker(kind, pid, epoch, coordinator_epoch=0):
    return build_control_batch(kind, producer_id=pid, producer_epoch=epoch,
                               coordinator_epoch=coordinator_epoch, timestamp=NOW)


def open_log(tmp_path, clock, **config):
    return Log.open(tmp_path / "t-0", config, clock=clock)


def values(log, **kw):
    return [r.value for r in log.records(**kw)]


# ---- Kafka's own files ---------------------------------------------------------------------


def test_replaying_kafkas_appends_writes_kafkas_snapshots_and_epoch_checkpoint(tmp_path):
    calls = json.loads((SAMPLE / "inputs/plain-0.json").read_text())
    raw = (SAMPLE / "inputs/plain-0.records").read_bytes()
    clock = ManualClock(max(b.max_timestamp for b in iter_batches(raw)))
    with Log.open(tmp_path / "plain-0", SAMPLE_CONFIG, clock=clock) as log:
        for call in calls:
            log.append(raw[call["position"] : call["position"] + call["size"]], leader_epoch=call["leaderEpoch"])
    kafka = SAMPLE / "logdir/plain-0"
    names = sorted(p.name for p in kafka.iterdir() if p.name.endswith(".snapshot"))
    assert names == sorted(p.name for p in (tmp_path / "plain-0").iterdir() if p.name.endswith(".snapshot"))
    for name in [*names, "leader-epoch-checkpoint"]:
        assert (tmp_path / "plain-0" / name).read_bytes() == (kafka / name).read_bytes(), name


def test_kafka_directory_state_reads_back_read_only(tmp_path):
    shutil.copytree(SAMPLE / "logdir", tmp_path / "kafka")
    directory = tmp_path / "kafka/plain-0"
    before = directory_digest(directory)
    with Log.open(directory, SAMPLE_CONFIG, read_only=True) as log:
        assert log.producer_state.producers == {}
        assert log.producer_state.map_end_offset == 720
        assert log.producer_state.snapshot_offsets() == [105, 211, 318, 426, 531, 633, 720]
        assert log.leader_epoch_cache.entries() == [(0, 0)]
        assert log.leader_epoch_cache.end_offset_for(0, log.log_end_offset) == (0, 720)
        assert log.last_stable_offset == log.high_watermark == 720
        assert log.offset_for_timestamp(EARLIEST_TIMESTAMP).leader_epoch == 0
        assert len(list(log.records(isolation="read_committed"))) == 720
    assert directory_digest(directory) == before


# ---- idempotence ---------------------------------------------------------------------------


def test_retried_batch_returns_the_original_offsets_and_writes_nothing(tmp_path, clock):
    with open_log(tmp_path, clock) as log:
        first = log.append(data(7, 0, 0, 3))
        log.append(data(7, 0, 3, 2))
        log.append(data(8, 0, 0, 1))
        files = directory_digest(log.dir)
        retry = log.append(data(7, 0, 0, 3))
        assert (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset) == (0, 2)
        assert retry.valid_bytes == 0
        assert log.log_end_offset == 6
        assert directory_digest(log.dir) == files


def test_kafka_python_idempotent_batches_and_their_retries(tmp_path, clock):
    """Batches built by another implementation (kafka-python) carry the same producer fields."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    def kafka_python_batch(seq, n):
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=1, is_transactional=0,
                                            producer_id=42, producer_epoch=3, base_sequence=seq,
                                            batch_size=1 << 20)
        for i in range(n):
            builder.append(i, NOW + i, b"k", b"x%d" % (seq + i), [])
        return bytes(builder.build())

    with open_log(tmp_path, clock) as log:
        log.append(kafka_python_batch(0, 4))
        log.append(kafka_python_batch(4, 2))
        retry = log.append(kafka_python_batch(4, 2))
        assert (retry.first_offset, retry.last_offset, log.log_end_offset) == (4, 5, 6)
        entry = log.producer_state.last_entry(42)
        assert (entry.producer_epoch, entry.last_seq, entry.last_data_offset) == (3, 5, 5)
        with pytest.raises(OutOfOrderSequenceError):
            log.append(kafka_python_batch(7, 1))


@pytest.mark.parametrize(
    ("batch", "error"),
    [
        (data(7, 0, 5), OutOfOrderSequenceError),  # gap after sequence 2
        (data(7, 1, 3), OutOfOrderSequenceError),  # a new epoch must restart at 0
        (data(9, 0, 4), UnknownProducerIdError),  # no state for producer 9
    ],
    ids=["gap", "new-epoch", "unknown"],
)
def test_invalid_sequences_are_rejected_and_write_nothing(tmp_path, clock, batch, error):
    with open_log(tmp_path, clock) as log:
        log.append(data(7, 0, 0, 3))
        files = directory_digest(log.dir)
        with pytest.raises(error):
            log.append(batch)
        assert log.log_end_offset == 3 and directory_digest(log.dir) == files


def test_fenced_producer_epoch_is_rejected(tmp_path, clock):
    with open_log(tmp_path, clock) as log:
        log.append(data(7, 3, 0))
        with pytest.raises(InvalidProducerEpochError):
            log.append(data(7, 2, 1))


# ---- transactions, LSO, read_committed -----------------------------------------------------


def test_commit_makes_the_transaction_visible_to_read_committed(tmp_path, clock):
    with open_log(tmp_path, clock) as log:
        log.append(data(1, 0, 0, 2, txn=True))
        assert log.last_stable_offset == 0
        assert values(log, isolation="read_committed") == []
        assert log.read(0, isolation="read_committed").records == b""
        assert values(log, isolation="high_watermark") == [b"v0", b"v1"]
        log.append(marker("commit", 1, 0), origin="coordinator")
        assert log.last_stable_offset == log.log_end_offset == 3
        assert values(log, isolation="read_committed") == [b"v0", b"v1"]
        assert log.read(0, isolation="read_committed").aborted_transactions == ()


def test_abort_hides_its_records_and_is_indexed(tmp_path, clock):
    with open_log(tmp_path, clock) as log:
        log.append(data(1, 0, 0, txn=True, value=b"a"))  # 0
        log.append(data(2, 0, 0, txn=True, value=b"b"))  # 1
        log.append(data(1, 0, 1, txn=True, value=b"a"))  # 2
        log.append(marker("abort", 1, 0), origin="coordinator")  # 3
        log.append(marker("commit", 2, 0), origin="coordinator")  # 4
        log.append(data(3, 0, 0, value=b"c"))  # 5, not transactional
        assert values(log, isolation="read_committed") == [b"b0", b"c0"]
        fetched = log.read(0, isolation="read_committed")
        assert fetched.aborted_transactions == (AbortedTxn(1, 0, 3, 1),)
        assert len(list(fetched.batches())) == 6  # the consumer gets everything and filters
        txnindex = log.segments[0].txn_index.path
    assert txnindex.read_bytes() == TXN_ENTRY.pack(0, 1, 0, 3, 1)


def test_a_producers_next_transaction_after_an_abort_is_visible(tmp_path, clock):
    with open_log(tmp_path, clock) as log:
        log.append(data(1, 0, 0, txn=True, value=b"x"))
        log.append(marker("abort", 1, 0), origin="coordinator")
        log.append(data(1, 0, 1, txn=True, value=b"y"))
        log.append(marker("commit", 1, 0), origin="coordinator")
        assert values(log, isolation="read_committed") == [b"y1"]


def test_an_open_transaction_holds_the_lso_back(tmp_path, clock):
    with open_log(tmp_path, clock) as log:
        log.append(data(1, 0, 0))  # 0 committed, idempotent
        log.append(data(2, 0, 0, txn=True))  # 1 open
        log.append(data(3, 0, 0, 2))  # 2-3
        assert log.last_stable_offset == 1
        assert log.high_watermark == 4
        assert values(log, isolation="read_committed") == [b"v0"]
        assert len(values(log, isolation="high_watermark")) == 4
        log.append(marker("abort", 2, 0), origin="coordinator")
        assert log.last_stable_offset == 5
        assert values(log, isolation="read_committed") == [b"v0", b"v0", b"v1"]


def test_interleaved_transactions_across_segments(tmp_path, clock):
    with open_log(tmp_path, clock, **{"segment.bytes": 300}) as log:
        log.append(data(1, 0, 0, txn=True, value=b"a"))
        for i in range(6):
            log.append(data(2, 0, i, txn=True, value=b"b"))
            log.append(data(1, 0, i + 1, txn=True, value=b"a"))
        log.append(marker("commit", 2, 0), origin="coordinator")
        log.append(marker("abort", 1, 0), origin="coordinator")
        assert len(log.segments) > 2
        kept = values(log, isolation="read_committed")
        assert kept == [b"b" + str(i).encode() for i in range(6)]
        # A fetch from a later segment still learns of the abort indexed in the last one.
        middle = log.segments[1].base_offset
        fetched = log.read(middle, 200, isolation="read_committed")
        assert [t.producer_id for t in fetched.aborted_transactions] == [1]


def test_non_transactional_write_inside_a_transaction_is_rejected(tmp_path, clock):
    with open_log(tmp_path, clock) as log:
        log.append(data(1, 0, 0, txn=True))
        with pytest.raises(InvalidTxnStateError):
            log.append(data(1, 0, 1))


# ---- snapshots, reopen, recovery -----------------------------------------------------------


def test_roll_and_close_write_snapshots_named_by_offset(tmp_path, clock):
    with open_log(tmp_path, clock, **{"segment.bytes": 300}) as log:
        for i in range(8):
            log.append(data(1, 0, 2 * i, 2))
        bases = [s.base_offset for s in log.segments]
        end = log.log_end_offset
    snapshots = sorted(int(p.name[:20]) for p in (tmp_path / "t-0").glob("*.snapshot"))
    assert snapshots == [*bases[1:], end]
    (entry,) = decode_snapshot((tmp_path / "t-0" / segment_file_name(end, SNAPSHOT_SUFFIX)).read_bytes())
    assert (entry.producer_id, entry.last_seq, entry.last_data_offset) == (1, 15, 15)


def test_open_transaction_and_sequences_survive_reopen(tmp_path, clock):
    with open_log(tmp_path, clock) as log:
        log.append(data(1, 0, 0, 2))
        log.append(data(2, 0, 0, txn=True))
    with open_log(tmp_path, clock) as log:
        assert log.last_stable_offset == 2
        assert log.append(data(1, 0, 0, 2)).valid_bytes == 0  # still a known duplicate
        log.append(marker("commit", 2, 0), origin="coordinator")
        assert log.last_stable_offset == 4


def test_unclean_shutdown_rebuilds_producer_state_and_txn_index_from_the_log(tmp_path, clock):
    cfg = {"segment.bytes": 400}
    with open_log(tmp_path, clock, **cfg) as log:
        log.append(data(1, 0, 0, txn=True))
        for i in range(5):
            log.append(data(2, 0, 2 * i, 2))
        log.append(marker("abort", 1, 0), origin="coordinator")
        log.append(data(3, 0, 0, txn=True))
        files = directory_digest(log.dir)
        lso, end = log.last_stable_offset, log.log_end_offset
    directory = tmp_path / "t-0"
    # A crash loses what close writes and what was never flushed: snapshots, indexes' tails.
    for path in directory.iterdir():
        if path.name.endswith((".snapshot", ".txnindex")):
            path.unlink()
    (tmp_path / "recovery-point-offset-checkpoint").unlink()
    (tmp_path / ".kafka_cleanshutdown").unlink()
    with open_log(tmp_path, clock, **cfg) as log:
        assert (log.last_stable_offset, log.log_end_offset) == (lso, end)
        assert log.append(data(2, 0, 8, 2)).valid_bytes == 0  # the last batch is still known
        with pytest.raises(OutOfOrderSequenceError):  # snapshots keep only the last batch, as Kafka's
            log.append(data(2, 0, 6, 2))
        rebuilt = {k: v for k, v in directory_digest(log.dir).items() if k.endswith(".txnindex")}
    assert rebuilt and rebuilt == {k: v for k, v in files.items() if k.endswith(".txnindex")}


def test_truncation_reloads_producer_state(tmp_path, clock):
    with open_log(tmp_path, clock, **{"segment.bytes": 300}) as log:
        for i in range(6):
            log.append(data(1, 0, 2 * i, 2))
        log.truncate_to(5)  # keeps batches 0-1, 2-3 (4-5 is cut as a whole)
        assert log.log_end_offset == 4
        assert log.producer_state.last_entry(1).last_seq == 3
        with pytest.raises(OutOfOrderSequenceError):
            log.append(data(1, 0, 6, 2))
        assert log.append(data(1, 0, 4, 2)).first_offset == 4


def test_follower_append_rebuilds_the_same_state_without_validation(tmp_path, clock):
    leader = Log.open(tmp_path / "leader/t-0", clock=clock)
    follower = Log.open(tmp_path / "follower/t-0", clock=clock)
    with leader, follower:
        leader.append(data(1, 0, 0, txn=True), leader_epoch=3)
        leader.append(data(2, 0, 0), leader_epoch=3)
        leader.append(marker("abort", 1, 0), origin="coordinator", leader_epoch=4)
        follower.append_as_follower(leader.read(0).records)
        assert follower.last_stable_offset == 0  # a follower's HW comes from its leader
        follower.high_watermark = leader.high_watermark
        assert follower.leader_epoch_cache.entries() == leader.leader_epoch_cache.entries() == [(3, 0), (4, 2)]
        assert follower.last_stable_offset == leader.last_stable_offset == 3
        assert follower.segments[0].txn_index.all_aborted_txns() == [AbortedTxn(1, 0, 2, 3)]
        assert follower.producer_state.snapshot_entries() == leader.producer_state.snapshot_entries()


# ---- leader epochs -------------------------------------------------------------------------


def test_epoch_cache_follows_appends_truncation_and_log_start(tmp_path, clock):
    with open_log(tmp_path, clock, **{"segment.bytes": 300}) as log:
        for epoch in (0, 0, 2, 2, 5, 5):
            log.append(data(-1, -1, -1, 2), leader_epoch=epoch)
        checkpoint = log.dir / "leader-epoch-checkpoint"
        assert checkpoint.read_bytes() == b"0\n3\n0 0\n2 4\n5 8\n"
        log.truncate_to(8)
        assert log.leader_epoch_cache.entries() == [(0, 0), (2, 4)]
        assert checkpoint.read_bytes() == b"0\n2\n0 0\n2 4\n"
        log.append(data(-1, -1, -1, 2), leader_epoch=6)
        log.delete_records_before(5)
        assert log.leader_epoch_cache.entries() == [(2, 5), (6, 8)]
        assert log.offset_for_timestamp(EARLIEST_TIMESTAMP).leader_epoch == 2
    with open_log(tmp_path, clock) as log:
        assert log.leader_epoch_cache.entries() == [(2, 5), (6, 8)]


def test_a_legacy_follower_append_clears_the_epoch_cache(tmp_path, clock):
    with open_log(tmp_path, clock) as log:
        log.append_as_follower(build_batch([Record(0, NOW, b"k", b"v")], partition_leader_epoch=2))
        assert log.leader_epoch_cache.entries() == [(2, 0)]
        log.append_as_follower(build_legacy_entry([Record(1, NOW, b"k", b"v")], magic=1))
        assert log.leader_epoch_cache.entries() == []
        assert (log.dir / "leader-epoch-checkpoint").read_bytes() == b"0\n0\n"


# ---- model-based: random producers, transactions, retries, reopen and crashes --------------

steps = st.lists(
    st.tuples(st.sampled_from(["send", "txn", "txn", "commit", "abort", "retry", "reopen", "crash"]),
              st.integers(1, 2), st.integers(1, 3)),
    max_size=30,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps)
def test_read_committed_matches_a_model_across_reopens_and_crashes(tmp_path_factory, script):
    root = tmp_path_factory.mktemp("txn")
    clock = ManualClock(NOW)
    cfg = {"segment.bytes": 500}
    log = Log.open(root / "t-0", cfg, clock=clock)
    records: list[tuple[int, int | None, bytes]] = []  # (producer, txn id or None, value)
    outcome: dict[int, bool] = {}  # txn id -> committed?
    open_txn: dict[int, tuple[int, int]] = {}  # producer -> (txn id, first offset)
    seq: dict[int, int] = {}
    last: dict[int, bytes] = {}
    try:
        for op, pid, n in script:
            if op in ("reopen", "crash"):
                log.close()
                if op == "crash":
                    for path in (root / "t-0").iterdir():
                        if path.name.endswith((".snapshot", ".txnindex")):
                            path.unlink()
                    (root / "recovery-point-offset-checkpoint").unlink()
                    (root / ".kafka_cleanshutdown").unlink()
                log = Log.open(root / "t-0", cfg, clock=clock)
                continue
            if op == "retry":
                if pid in last:
                    end = log.log_end_offset
                    assert log.append(last[pid]).valid_bytes == 0
                    assert log.log_end_offset == end
                continue
            if op in ("commit", "abort"):
                log.append(marker(op, pid, 0), origin="coordinator")
                if pid in open_txn:
                    outcome[open_txn.pop(pid)[0]] = op == "commit"
                continue
            transactional = op == "txn"
            if not transactional and pid in open_txn:
                with pytest.raises(InvalidTxnStateError):
                    log.append(data(pid, 0, seq.get(pid, 0), n))
                continue
            s = seq.get(pid, 0)
            batch = data(pid, 0, s, n, txn=transactional, value=b"%d-" % pid)
            info = log.append(batch)
            seq[pid] = s + n
            last[pid] = batch
            txn_id = None
            if transactional:
                txn_id = open_txn.setdefault(pid, (info.first_offset, info.first_offset))[0]
            records += [(pid, txn_id, b"%d-%d" % (pid, s + i)) for i in range(n)]
        lso = min((first for _, first in open_txn.values()), default=log.log_end_offset)
        assert log.last_stable_offset == lso
        offset_of = {r.value: r.offset for r in log.records() if r.key == b"k"}
        expected = [v for _, txn, v in records
                    if offset_of[v] < lso and (txn is None or outcome.get(txn, False))]
        assert values(log, isolation="read_committed") == expected
    finally:
        log.close()

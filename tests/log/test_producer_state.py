"""ProducerStateManager: Kafka's idempotence and transaction rules, `.snapshot` bytes
(docs/FORMAT.md "Producer-state snapshot"), recovery, and a model-based test against a tiny oracle."""

from __future__ import annotations

import struct
from collections import deque

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logstore.clock import ManualClock
from logstore.errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
    UnknownProducerIdError,
)
from logstore.producer_append import (
    ORIGIN_CLIENT,
    ORIGIN_COORDINATOR,
    ORIGIN_REPLICATION,
    BatchInfo,
    CompletedTxn,
    EndTxnMarker,
    ProducerStateEntry,
)
from logstore.producer_snapshot import decode_snapshot, encode_snapshot, snapshot_path
from logstore.producer_state import ProducerStateManager
from logstore.records.control import ABORT, COMMIT
from logstore.records.header import INT32_MAX
from logstore.txn_index import AbortedTxn, TransactionIndex
from tests.support.clock import NOW
from tests.support.paths import KAFKA_LOGDIR

SAMPLE_DIR = KAFKA_LOGDIR / "plain-0"
SNAPSHOT_HEADER = struct.Struct(">hIi")
SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")  # docs/FORMAT.md field order, 46 bytes


class FakeLog:
    """Assigns offsets and feeds batches through the manager the way the Log does."""

    def __init__(self, psm: ProducerStateManager, txn_index: TransactionIndex | None = None):
        self.psm = psm
        self.txn_index = txn_index
        self.next_offset = 0
        self.batches: list[BatchInfo] = []

    def data(self, pid, epoch, seq, count=1, *, txn=False, origin=ORIGIN_CLIENT, ts=NOW):
        batch = BatchInfo(pid, epoch, seq, self.next_offset, self.next_offset + count - 1, ts, txn)
        return self._append(batch, origin)

    def marker(self, pid, epoch, kind, coordinator_epoch=0, *, origin=ORIGIN_COORDINATOR, ts=NOW):
        control = COMMIT if kind == "commit" else ABORT
        batch = BatchInfo(pid, epoch, -1, self.next_offset, self.next_offset, ts, True, True,
                          EndTxnMarker(control, coordinator_epoch))
        return self._append(batch, origin)

    def _append(self, batch: BatchInfo, origin: str):
        analysis = self.psm.analyze([batch], origin)
        if analysis.duplicate is not None:
            return analysis.duplicate
        self.batches.append(batch)
        self.next_offset = batch.last_offset + 1
        self.psm.apply(analysis, self.txn_index, self.next_offset)
        return batch


@pytest.fixture
def psm(tmp_path):
    return ProducerStateManager(tmp_path, clock=ManualClock(NOW))


@pytest.fixture
def log(psm, tmp_path):
    return FakeLog(psm, TransactionIndex.for_segment(tmp_path, 0))


# ---- snapshot bytes ------------------------------------------------------------------------


def test_kafka_sample_snapshots_decode_and_reencode_identically(tmp_path):
    samples = sorted(SAMPLE_DIR.glob("*.snapshot"))
    assert [p.name[:20] for p in samples][0] == "00000000000000000105"
    for sample in samples:
        data = sample.read_bytes()
        assert decode_snapshot(data, sample) == []
        assert encode_snapshot([]) == data


def test_replaying_the_sample_appends_writes_kafkas_snapshot_files(tmp_path):
    """plain-0 rolled at 105, 211, ... and closed at 720: same files, same bytes."""
    psm = ProducerStateManager(tmp_path, clock=ManualClock(NOW))
    offsets = sorted(int(p.name[:20]) for p in SAMPLE_DIR.glob("*.snapshot"))
    for offset in offsets:  # each roll / close: map end = new segment base / log end
        psm.update_map_end_offset(offset)
        psm.take_snapshot()
    for offset in offsets:
        assert snapshot_path(tmp_path, offset).read_bytes() == snapshot_path(SAMPLE_DIR, offset).read_bytes()
    assert psm.take_snapshot() is None  # nothing new since the last one


def test_snapshot_entry_layout_matches_format_md(log, tmp_path):
    log.data(pid=9, epoch=3, seq=0, count=4, ts=NOW + 5)
    log.data(pid=9, epoch=3, seq=4, count=2, txn=True, ts=NOW + 6)
    path = log.psm.take_snapshot()
    assert path == tmp_path / "00000000000000000006.snapshot"
    data = path.read_bytes()
    body = SNAPSHOT_ENTRY.pack(9, 3, 5, 5, 1, NOW + 6, -1, 4)
    assert SNAPSHOT_ENTRY.size == 46 and len(data) == 10 + 46
    assert data == SNAPSHOT_HEADER.pack(1, crc32c(struct.pack(">i", 1) + body), 1) + body


def test_snapshot_entries_follow_java_hashmap_iteration_order(log):
    # Orders printed by java.util.HashMap<Long, ?> (Java 17) for these insertion orders.
    pids = [5, 3, 17, 1, 33, 16, 0, 100000, 4294967296, 4294967297, 123456789012]
    for pid in pids:
        log.data(pid, 0, 0)
    assert [e.producer_id for e in log.psm.snapshot_entries()] == [
        16, 0, 4294967297, 17, 1, 33, 100000, 4294967296, 123456789012, 3, 5,
    ]


def test_java_hashmap_order_survives_growth_removal_and_collisions(tmp_path):
    big = [431130007, 392763007, 211248007, 948884007, 969970007, 87525007, 21505007, 796918007,
           255519007, 118093007, 977182007, 67502007, 955276007, 572292007, 164476007, 678032007,
           688456007, 576170007, 268743007, 572209007, 241400007, 327863007, 357226007, 462913007,
           411243007, 515241007, 146030007, 307458007, 917387007, 298246007]
    psm = ProducerStateManager(tmp_path, clock=ManualClock(NOW))
    log = FakeLog(psm)
    for pid in big:
        log.data(pid, 0, 0, ts=0)
    for pid in big[20:]:
        log.data(pid, 0, 1, ts=NOW)
    psm.remove_expired_producers(NOW)  # the first 20 are idle: a 64-bucket table, 10 keys left
    for pid in [5, 21, 37]:
        log.data(pid, 0, 0)
    assert [e.producer_id for e in psm.snapshot_entries()] == [
        146030007, 307458007, 5, 917387007, 327863007, 21, 515241007, 357226007, 241400007, 37,
        298246007, 462913007, 411243007,
    ]
    colliding = ProducerStateManager(tmp_path / "c", clock=ManualClock(NOW))
    for i in range(11):  # nine keys in one bucket force a resize before treeifying
        FakeLog(colliding).data(i << 20, 0, 0)
    assert [e.producer_id >> 20 for e in colliding.snapshot_entries()] == [0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9]


@pytest.mark.parametrize(
    "damage",
    [lambda b: b[:-1], lambda b: b[:6] + bytes([b[6] ^ 1]) + b[7:], lambda b: b"\x00\x02" + b[2:], lambda b: b[:5]],
    ids=["truncated", "bitflip", "version", "short"],
)
def test_corrupt_snapshot_raises(log, damage):
    log.data(1, 0, 0)
    data = log.psm.take_snapshot().read_bytes()
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(damage(data), "x.snapshot")


@given(st.data())
def test_engine_and_dump_read_a_snapshot_with_one_decoder(data):
    """Whatever bytes: the engine refuses every snapshot Kafka's reader (dump's) refuses, for the
    same reason; it also refuses bytes after the entries, which Kafka ignores under a good CRC."""
    from logstore import dump

    good = encode_snapshot([ProducerStateEntry(7, 1, 0, 5, None), ProducerStateEntry(9, 0, 2, 6, 3)])
    cut = data.draw(st.integers(0, len(good) + 3))
    damaged = bytearray((good + bytes(3))[:cut])
    for at in data.draw(st.lists(st.integers(0, max(len(damaged) - 1, 0)), max_size=2)):
        if damaged:
            damaged[at] ^= 0xFF
    try:
        kafka = dump.read_producer_snapshot(bytes(damaged))
    except CorruptSnapshotError as exc:
        with pytest.raises(CorruptSnapshotError) as engine:
            decode_snapshot(bytes(damaged))
        assert (engine.value.reason, engine.value.facts) == (exc.reason, exc.facts)
    else:
        assert len(kafka) == 2
        if len(damaged) != len(good):
            with pytest.raises(CorruptSnapshotError):
                decode_snapshot(bytes(damaged))


def test_load_skips_and_deletes_a_corrupt_newest_snapshot(log, tmp_path):
    log.data(1, 0, 0)
    first = log.psm.take_snapshot()
    log.data(1, 0, 1)
    second = log.psm.take_snapshot()
    second.write_bytes(second.read_bytes()[:-3])
    reopened = ProducerStateManager(tmp_path, clock=ManualClock(NOW))
    reopened.truncate_and_reload(0, 2)
    assert not second.exists() and first.exists()
    assert reopened.map_end_offset == 1
    assert reopened.last_entry(1).last_seq == 0


# ---- idempotence rules ---------------------------------------------------------------------


def test_in_order_batches_are_accepted_and_remembered(log):
    log.data(1, 0, 0, count=3)
    log.data(1, 0, 3, count=2)
    entry = log.psm.last_entry(1)
    assert (entry.producer_epoch, entry.first_seq, entry.last_seq) == (0, 0, 4)
    assert (entry.first_data_offset, entry.last_data_offset, entry.last_offset_delta) == (0, 4, 1)


def test_retry_of_any_of_the_last_five_batches_is_a_duplicate(log):
    originals = [log.data(1, 0, i * 2, count=2) for i in range(6)]
    for original in originals[1:]:
        dup = log.data(1, 0, original.base_sequence, count=2)
        assert (dup.first_offset, dup.last_offset) == (original.base_offset, original.last_offset)
    assert log.next_offset == 12  # nothing was written
    with pytest.raises(OutOfOrderSequenceError):  # the sixth-newest is forgotten
        log.data(1, 0, 0, count=2)


def test_gap_in_sequence_is_out_of_order(log):
    log.data(1, 0, 0)
    with pytest.raises(OutOfOrderSequenceError):
        log.data(1, 0, 2)


def test_new_epoch_must_start_at_sequence_zero(log):
    log.data(1, 0, 0)
    with pytest.raises(OutOfOrderSequenceError):
        log.data(1, 1, 5)
    log.data(1, 1, 0)
    assert log.psm.last_entry(1).producer_epoch == 1
    assert len(log.psm.last_entry(1).batch_metadata) == 1  # the old epoch's batches are gone


def test_older_epoch_is_fenced(log):
    log.data(1, 2, 0)
    with pytest.raises(InvalidProducerEpochError):
        log.data(1, 1, 1)


def test_unknown_producer_with_nonzero_sequence_is_rejected(log):
    with pytest.raises(UnknownProducerIdError):
        log.data(1, 0, 7)
    log.data(1, 0, 0)


def test_sequence_wraps_from_int32_max_to_zero(log):
    log.psm.update(_append_info_for(log.psm, 1, 0, INT32_MAX - 1, 2))
    log.next_offset = 2
    assert log.psm.last_entry(1).last_seq == INT32_MAX
    log.data(1, 0, 0, count=3)
    assert log.psm.last_entry(1).last_seq == 2
    batch = BatchInfo(1, 0, INT32_MAX, 10, 12, NOW)
    assert batch.last_sequence == 1


def _append_info_for(psm, pid, epoch, seq, count):
    info = psm.prepare_update(pid, ORIGIN_REPLICATION)
    info.append(BatchInfo(pid, epoch, seq, 0, count - 1, NOW))
    return info


def test_replication_origin_skips_sequence_and_epoch_errors(log):
    log.data(1, 5, 0)
    log.data(1, 3, 9, origin=ORIGIN_REPLICATION)
    assert log.psm.last_entry(1).producer_epoch == 3


def test_non_idempotent_batches_only_move_the_map_end(log):
    log.data(-1, -1, -1, count=10)
    assert log.psm.producers == {}
    assert log.psm.map_end_offset == 10


def test_analyze_does_not_change_state_until_apply(psm):
    batches = [BatchInfo(1, 0, 0, 0, 1, NOW), BatchInfo(1, 0, 2, 2, 2, NOW), BatchInfo(2, 0, 0, 3, 3, NOW)]
    analysis = psm.analyze(batches, ORIGIN_CLIENT)
    assert psm.producers == {}
    psm.apply(analysis, None, 4)
    assert psm.last_entry(1).last_seq == 2 and psm.last_entry(2).last_seq == 0
    assert psm.map_end_offset == 4


def test_expired_producers_are_removed_unless_in_a_transaction(log):
    log.data(1, 0, 0, ts=0)
    log.data(2, 0, 0, txn=True, ts=0)
    assert log.psm.remove_expired_producers(NOW) == [1]
    assert set(log.psm.producers) == {2}


# ---- transactions --------------------------------------------------------------------------


def test_commit_completes_the_transaction_and_frees_the_lso(log):
    log.data(1, 0, 0, count=2, txn=True)
    assert log.psm.first_unstable_offset() == 0
    log.marker(1, 0, "commit")
    assert log.psm.first_undecided_offset() is None
    assert log.psm.first_unstable_offset() == 0  # marker not yet below the high watermark
    log.psm.on_high_watermark_updated(3)
    assert log.psm.first_unstable_offset() is None
    assert log.txn_index.all_aborted_txns() == []


def test_abort_is_indexed_with_the_lso_of_another_open_transaction(log):
    log.data(1, 0, 0, txn=True)  # offset 0
    log.data(2, 0, 0, txn=True)  # offset 1
    log.data(1, 0, 1, txn=True)  # offset 2
    log.marker(1, 0, "abort")  # offset 3
    assert log.txn_index.all_aborted_txns() == [AbortedTxn(1, 0, 3, 1)]
    log.marker(2, 0, "abort")  # offset 4
    assert log.txn_index.all_aborted_txns()[-1] == AbortedTxn(2, 1, 4, 5)


def test_completed_txn_and_last_stable_offset(psm):
    log = FakeLog(psm)
    log.data(1, 0, 0, txn=True)
    log.data(2, 0, 0, txn=True)
    assert psm.last_stable_offset(CompletedTxn(1, 0, 5, True)) == 1
    assert psm.last_stable_offset(CompletedTxn(2, 1, 5, True)) == 0
    assert [t.first_offset for t in psm.ongoing_transactions()] == [0, 1]


def test_non_transactional_write_inside_a_transaction_is_rejected(log):
    log.data(1, 0, 0, txn=True)
    with pytest.raises(InvalidTxnStateError):
        log.data(1, 0, 1)


def test_marker_from_an_older_coordinator_is_fenced(log):
    log.data(1, 0, 0, txn=True)
    log.marker(1, 0, "commit", coordinator_epoch=5)
    log.data(1, 0, 1, txn=True)
    with pytest.raises(TransactionCoordinatorFencedError):
        log.marker(1, 0, "abort", coordinator_epoch=4)


def test_marker_without_open_transaction_completes_nothing(log):
    log.data(1, 0, 0)
    log.marker(1, 1, "abort", coordinator_epoch=2)
    entry = log.psm.last_entry(1)
    assert (entry.producer_epoch, entry.coordinator_epoch, entry.current_txn_first_offset) == (1, 2, None)
    assert log.txn_index.all_aborted_txns() == []


def test_open_transaction_survives_a_snapshot_round_trip(log, tmp_path):
    log.data(1, 0, 0, txn=True, count=3)
    log.psm.take_snapshot()
    reopened = ProducerStateManager(tmp_path, clock=ManualClock(NOW))
    reopened.truncate_and_reload(0, 3)
    assert reopened.first_unstable_offset() == 0
    assert reopened.last_entry(1).current_txn_first_offset == 0


def test_load_batch_rebuilds_txn_index_like_segment_recovery(psm, tmp_path):
    source = FakeLog(ProducerStateManager(tmp_path / "src", clock=ManualClock(NOW)))
    source.data(1, 0, 0, txn=True)
    source.data(2, 0, 0, txn=True)
    source.marker(1, 0, "abort")
    source.marker(2, 0, "commit")
    index = TransactionIndex.for_segment(tmp_path, 0)
    for batch in source.batches:
        psm.load_batch(batch, index)
    assert index.all_aborted_txns() == [AbortedTxn(1, 0, 2, 1)]
    assert psm.map_end_offset == 4


# ---- snapshots, truncation, recovery -------------------------------------------------------


def test_truncate_and_reload_drops_snapshots_out_of_range(log, tmp_path):
    for i in range(4):
        log.data(1, 0, i)
        log.psm.take_snapshot()
    assert log.psm.snapshot_offsets() == [1, 2, 3, 4]
    log.psm.truncate_and_reload(1, 3)
    assert log.psm.snapshot_offsets() == [2, 3]
    assert sorted(p.name for p in tmp_path.glob("*.snapshot")) == [
        "00000000000000000002.snapshot", "00000000000000000003.snapshot",
    ]
    assert log.psm.last_entry(1).last_seq == 2


def test_delete_snapshots_before_and_one_by_one(log, tmp_path):
    for i in range(3):
        log.data(1, 0, i)
        log.psm.take_snapshot()
    log.psm.delete_snapshots_before(2)
    assert log.psm.snapshot_offsets() == [2, 3]
    renamed = log.psm.mark_snapshot_for_deletion(2)
    assert renamed is not None and renamed.name == "00000000000000000002.snapshot.deleted"
    assert log.psm.mark_snapshot_for_deletion(2) is None
    assert log.psm.snapshot_offsets() == [3]
    assert [p.name for p in tmp_path.glob("*.snapshot")] == ["00000000000000000003.snapshot"]


def test_remove_stray_snapshots_keeps_the_clean_shutdown_one(tmp_path):
    for offset in (0, 5, 7, 10, 12):
        snapshot_path(tmp_path, offset).write_bytes(encode_snapshot([]))
    psm = ProducerStateManager(tmp_path)
    psm.remove_stray_snapshots([0, 5, 10])
    assert psm.snapshot_offsets() == [0, 5, 10, 12]
    psm.remove_stray_snapshots([0, 5, 10, 20])
    assert psm.snapshot_offsets() == [0, 5, 10]


def test_rebuild_replays_past_the_newest_snapshot(log, tmp_path):
    log.data(1, 0, 0, count=2)
    log.data(2, 0, 0, txn=True)
    log.psm.update_map_end_offset(3)
    log.psm.take_snapshot()  # a roll at 3
    log.data(1, 0, 2)
    log.data(2, 0, 1, txn=True)
    batches = list(log.batches)
    reopened = ProducerStateManager(tmp_path, clock=ManualClock(NOW))
    reopened.rebuild([(0, lambda: batches[:2]), (3, lambda: batches[2:])], 0, 5)
    assert reopened.snapshot_offsets() == [3, 5]
    assert reopened.last_entry(1).last_seq == 2 and reopened.last_entry(2).last_seq == 1
    assert reopened.first_unstable_offset() == 2
    assert snapshot_path(tmp_path, 5).read_bytes() == encode_snapshot(log.psm.snapshot_entries())


def test_rebuild_after_clean_shutdown_without_snapshots_writes_empty_ones(tmp_path):
    psm = ProducerStateManager(tmp_path)
    psm.rebuild([(0, list), (100, list), (200, list)], 0, 250, clean_shutdown=True)
    assert psm.snapshot_offsets() == [100, 200, 250]


def test_read_only_manager_never_touches_files(log, tmp_path):
    log.data(1, 0, 0)
    log.psm.take_snapshot()
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    ro = ProducerStateManager(tmp_path, clock=ManualClock(NOW), read_only=True)
    ro.truncate_and_reload(5, 10)  # would delete the snapshot at 1
    ro.update_map_end_offset(10)
    assert ro.take_snapshot() is None
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


# ---- model-based: random producers, retries, epoch bumps, snapshots, crashes, truncation ----


class Model:
    """The oracle: every accepted batch in log order; producer state derived from it."""

    def __init__(self):
        self.log: list[BatchInfo] = []
        self.snapshots: set[int] = set()
        self.visible_from = 0  # batches below the snapshot a reload used are summarised

    def state(self, pid):
        """(epoch, recent batches as (first_seq, last_seq, first_offset, last_offset))."""
        mine = [b for b in self.log if b.producer_id == pid]
        if not mine:
            return None
        before = [b for b in mine if b.last_offset < self.visible_from][-1:]
        kept = before + [b for b in mine if b.last_offset >= self.visible_from]
        epoch = mine[-1].producer_epoch
        recent = [b for b in kept if b.producer_epoch == epoch][-5:]
        return epoch, deque((b.base_sequence, b.last_sequence, b.base_offset, b.last_offset) for b in recent)

    def expected(self, pid, epoch, seq, count):
        """'dup' (with offsets), an error class, or 'ok'."""
        state = self.state(pid)
        if state is None:
            return ("ok",) if seq == 0 else (UnknownProducerIdError,)
        cur_epoch, recent = state
        if epoch == cur_epoch:
            for first, last, fo, lo in recent:
                if first == seq and last == seq + count - 1:
                    return ("dup", fo, lo)
        if epoch < cur_epoch:
            return (InvalidProducerEpochError,)
        if epoch > cur_epoch:
            return ("ok",) if seq == 0 else (OutOfOrderSequenceError,)
        return ("ok",) if seq == recent[-1][1] + 1 else (OutOfOrderSequenceError,)


ops = st.lists(
    st.tuples(
        st.sampled_from(["send", "send", "send", "retry", "bump", "stale", "gap", "snapshot", "crash", "truncate"]),
        st.integers(0, 3),  # producer
        st.integers(1, 4),  # record count / which batch
    ),
    max_size=60,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops)
def test_producer_state_matches_a_reference_model(tmp_path_factory, script):
    directory = tmp_path_factory.mktemp("psm")
    psm = ProducerStateManager(directory, clock=ManualClock(NOW))
    log, model = FakeLog(psm), Model()
    sent: dict[int, list[BatchInfo]] = {}
    epochs: dict[int, int] = {}

    def reopen():
        nonlocal psm
        end = log.next_offset
        psm = ProducerStateManager(directory, clock=ManualClock(NOW))
        psm.rebuild([(0, lambda: list(model.log))], 0, end)
        log.psm = psm
        snaps = {s for s in model.snapshots if s <= end}
        model.visible_from = max(snaps, default=0)
        model.snapshots = snaps | ({end} if end > model.visible_from else set())

    for op, pid, n in script:
        mine = sent.get(pid, [])
        epoch = epochs.get(pid, 0)
        last_seq = model.state(pid)[1][-1][1] if model.state(pid) and model.state(pid)[1] else -1
        if op == "snapshot":
            if psm.take_snapshot() is not None:
                model.snapshots.add(log.next_offset)
            continue
        if op == "crash":
            reopen()
            continue
        if op == "truncate":
            if not model.log:
                continue
            cut = model.log[len(model.log) * n // 5 if n < 5 else -1].base_offset
            model.log = [b for b in model.log if b.base_offset < cut]
            log.batches = list(model.log)
            log.next_offset = cut
            for k in sent:
                sent[k] = [b for b in sent[k] if b.base_offset < cut]
            model.snapshots = {s for s in model.snapshots if s <= cut}
            reopen()
            continue
        if op == "retry" and mine:
            b = mine[-min(n + 1, len(mine))]
            epoch, seq, count = b.producer_epoch, b.base_sequence, b.last_offset - b.base_offset + 1
        elif op == "bump":
            epoch, seq, count = epoch + 1, 0, n
        elif op == "stale" and epoch > 0:
            epoch, seq, count = epoch - 1, 0, n
        elif op == "gap":
            seq, count = last_seq + 2, n
        else:
            seq, count = (last_seq + 1 if model.state(pid) and epoch == model.state(pid)[0] else 0), n
        want = model.expected(pid, epoch, seq, count)
        if want[0] == "ok":
            batch = log.data(pid, epoch, seq, count)
            model.log.append(batch)
            sent.setdefault(pid, []).append(batch)
            epochs[pid] = epoch
        elif want[0] == "dup":
            dup = log.data(pid, epoch, seq, count)
            assert (dup.first_offset, dup.last_offset) == want[1:]
        else:
            before = log.next_offset
            with pytest.raises(want[0]):
                log.data(pid, epoch, seq, count)
            assert log.next_offset == before
        for p in range(4):
            state = model.state(p)
            entry = psm.last_entry(p)
            if state is None:
                assert entry is None
                continue
            got = deque((m.first_seq, m.last_seq, m.first_offset, m.last_offset) for m in entry.batch_metadata)
            assert (entry.producer_epoch, got) == state
        assert psm.snapshot_offsets() == sorted(model.snapshots)

"""compaction.plan: the pure decision function, checked against a record-by-record model of
Kafka's Cleaner (buildOffsetMap, shouldRetainRecord, checkBatchRetention, filterTo and
CleanedTransactionMetadata) over random logs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.offset_map import OffsetMap, hash_key
from compaction.plan import (
    ABORTED,
    CONTROL_NONE,
    COPY,
    DROP,
    DUPLICATE,
    EMPTY,
    KEPT,
    KEYLESS,
    MARKER_EXPIRED,
    REWRITE,
    TOMBSTONE_EXPIRED,
    BatchColumns,
    CleanerRecordColumns,
    ProducerLastRecord,
    active_producers_from_batches,
    plan_compaction,
)
from logstore.records.control import ABORT, COMMIT
from logstore.records.header import CONTROL_BIT, DELETE_HORIZON_BIT, NO_TIMESTAMP, TRANSACTIONAL_BIT
from logstore.txn_index import AbortedTxn


@dataclass
class B:
    base: int
    last: int
    seg: int
    records: list  # (offset, key|None, tombstone)
    pid: int = -1
    epoch: int = -1
    txn: bool = False
    control: int = CONTROL_NONE  # ABORT / COMMIT for markers
    horizon: int = NO_TIMESTAMP


def columns(batches: list[B]) -> tuple[CleanerRecordColumns, BatchColumns]:
    attrs = [(TRANSACTIONAL_BIT if b.txn else 0) | (CONTROL_BIT if b.control != CONTROL_NONE else 0)
             | (DELETE_HORIZON_BIT if b.horizon != NO_TIMESTAMP else 0) for b in batches]
    bc = BatchColumns.from_arrays(
        base_offset=[b.base for b in batches], last_offset=[b.last for b in batches], attributes=attrs,
        base_timestamp=[b.horizon if b.horizon != NO_TIMESTAMP else 0 for b in batches],
        producer_id=[b.pid for b in batches], producer_epoch=[b.epoch for b in batches],
        record_count=[len(b.records) for b in batches], control_type=[b.control for b in batches],
        segment_base=[b.seg for b in batches])
    bi, off, h1, h2, hk, tomb = [], [], [], [], [], []
    for i, b in enumerate(batches):
        for o, k, t in b.records:
            bi.append(i)
            off.append(o)
            h = hash_key(k) if k is not None else (0, 0)
            h1.append(h[0])
            h2.append(h[1])
            hk.append(k is not None)
            tomb.append(t)
    rc = CleanerRecordColumns.from_arrays(batch_index=np.array(bi, np.int64), offset=off,
                                          key_hash1=np.array(h1, np.uint64), key_hash2=np.array(h2, np.uint64),
                                          has_key=hk, is_tombstone=tomb)
    return rc, bc


class ModelTxn:
    """CleanedTransactionMetadata, written out plainly."""

    def __init__(self, aborted):
        self.pending = sorted(aborted, key=lambda t: t.first_offset)
        self.aborted = {}
        self.committed = set()

    def consume(self, off):
        while self.pending and self.pending[0].first_offset <= off:
            t = self.pending.pop(0)
            if t.producer_id not in self.aborted:
                self.aborted[t.producer_id] = [t, False]

    def data(self, b):
        self.consume(b.last)
        if not b.txn:
            return False
        if b.pid in self.aborted:
            self.aborted[b.pid][1] = True
            return True
        self.committed.add(b.pid)
        return False

    def control(self, b):
        self.consume(b.last)
        if b.control == ABORT:
            st_ = self.aborted.pop(b.pid, None)
            return not (st_ is not None and st_[1])
        if b.control == COMMIT:
            if b.pid in self.committed:
                self.committed.remove(b.pid)
                return False
            return True
        return True


def model(batches, first_dirty, first_uncleanable, now, retention, aborted, active, max_keys):
    segs = sorted({b.seg for b in batches})
    # buildOffsetMap
    dirty = [s for i, s in enumerate(segs) if s < first_uncleanable
             and (i + 1 == len(segs) or segs[i + 1] > first_dirty)] if first_dirty < first_uncleanable else []
    mp, latest, full = {}, -1, False
    txn = ModelTxn(aborted)
    for si, s in enumerate(dirty):
        nxt = dirty[si + 1] if si + 1 < len(dirty) else first_uncleanable
        for b in [b for b in batches if b.seg == s]:
            if b.control != CONTROL_NONE:
                txn.control(b)
            elif not txn.data(b):
                for o, k, _ in b.records:
                    if k is not None and o >= first_dirty:
                        if len(mp) < max_keys:
                            mp[k] = o
                            latest = o
                        else:
                            full = True
                            break
            if full:
                break
            if b.last >= first_dirty:
                latest = b.last
        if full:
            break
        latest = nxt - 1
    end = latest + 1
    # clean every segment below end
    txn = ModelTxn(aborted)
    keep, reasons, actions, horizons = [], [], [], []
    for b in [b for b in batches if b.seg < end]:
        can = txn.control(b) if b.control != CONTROL_NONE else txn.data(b)
        if b.control != CONTROL_NONE:
            discard = can and b.horizon != NO_TIMESTAMP and b.horizon <= now
        else:
            discard = can
        last = active.get(b.pid)
        is_last = last is not None and b.pid >= 0 and (
            b.last == last.last_data_offset if last.last_data_offset is not None
            else b.control != CONTROL_NONE and b.epoch == last.producer_epoch)
        retain_empty = is_last or b.last + 1 == first_uncleanable
        kept = []
        for o, k, t in b.records:
            if discard:
                keep.append(False)
                reasons.append(MARKER_EXPIRED if b.control != CONTROL_NONE else ABORTED)
                continue
            if b.control != CONTROL_NONE or o > latest:
                ok = True
            elif k is None:
                ok = False
            else:
                found = mp.get(k, -1)
                retain_del = b.horizon == NO_TIMESTAMP or now < b.horizon
                ok = o >= found and (not t or retain_del)
            keep.append(ok)
            if ok:
                kept.append((o, t))
                reasons.append(KEPT)
            elif k is None:
                reasons.append(KEYLESS)
            elif o < mp.get(k, -1):
                reasons.append(DUPLICATE)
            else:
                reasons.append(TOMBSTONE_EXPIRED)
        marker_empty = can and b.control != CONTROL_NONE
        need = (any(t for _, t in kept) or marker_empty) and b.horizon == NO_TIMESTAMP
        if kept:
            if len(kept) == len(b.records) and not need:
                actions.append(COPY)
                horizons.append(b.horizon)
            else:
                actions.append(REWRITE)
                horizons.append(now + retention if need else b.horizon)
        else:
            actions.append(EMPTY if retain_empty else DROP)
            horizons.append(NO_TIMESTAMP)
    return end, keep, reasons, actions, horizons, full


@st.composite
def logs(draw):
    n_batches = draw(st.integers(1, 25))
    nkeys = draw(st.integers(1, 8))
    batches, off, seg = [], 0, 0
    open_txn: dict[int, bool] = {}
    aborted = []
    txn_first: dict[int, int] = {}
    for _ in range(n_batches):
        if draw(st.integers(0, 5)) == 0:
            seg = off
        kind = draw(st.sampled_from(["plain", "plain", "idem", "txn", "marker"]))
        pid = draw(st.integers(1, 2))
        if kind == "marker" and pid in open_txn:
            ctype = draw(st.sampled_from([ABORT, COMMIT]))
            horizon = draw(st.sampled_from([NO_TIMESTAMP, NO_TIMESTAMP, 50, 150]))
            batches.append(B(off, off, seg, [(off, b"ctl", False)], pid, 0, True, ctype, horizon))
            if ctype == ABORT:
                aborted.append(AbortedTxn(pid, txn_first[pid], off, -1))
            del open_txn[pid]
            off += 1
            continue
        if kind == "marker":
            kind = "plain"
        if kind == "txn" and pid not in open_txn:
            open_txn[pid] = True
            txn_first[pid] = off
        n = draw(st.integers(1, 4))
        recs = []
        any_tomb = False
        for i in range(n):
            k = draw(st.one_of(st.none(), st.integers(0, nkeys - 1).map(lambda x: b"k%d" % x))) \
                if draw(st.integers(0, 9)) == 0 else b"k%d" % draw(st.integers(0, nkeys - 1))
            t = draw(st.integers(0, 3)) == 0
            any_tomb |= t
            recs.append((off + i, k, t))
        gap = draw(st.integers(0, 1))  # a cleaned batch may keep a last offset past its records
        horizon = draw(st.sampled_from([NO_TIMESTAMP, 50, 150])) if any_tomb and kind == "plain" else NO_TIMESTAMP
        batches.append(B(off, off + n - 1 + gap, seg,
                         recs, pid if kind != "plain" else -1, 0 if kind != "plain" else -1,
                         kind == "txn", CONTROL_NONE, horizon))
        off += n + gap
    # Only decided transactions are cleanable (the LSO): close the open ones with commits.
    for pid in list(open_txn):
        batches.append(B(off, off, seg, [(off, b"ctl", False)], pid, 0, True, COMMIT))
        off += 1
    first_dirty = draw(st.integers(0, off))
    segs = sorted({b.seg for b in batches})
    first_uncleanable = draw(st.sampled_from(segs[1:] + [off]))
    return batches, aborted, first_dirty, first_uncleanable


@settings(max_examples=300, deadline=None)
@given(logs(), st.integers(1, 10), st.sampled_from([0, 100, 200]))
def test_plan_matches_the_record_by_record_model(log, max_keys, now):
    batches, aborted, first_dirty, first_uncleanable = log
    if first_dirty > first_uncleanable:
        first_dirty = first_uncleanable
    rc, bc = columns(batches)
    active = active_producers_from_batches(bc)
    omap = OffsetMap(memory=20 * max_keys * 2, load_factor=0.5)
    rp = plan_compaction(rc, bc, first_dirty_offset=first_dirty, first_uncleanable_offset=first_uncleanable,
                         now_ms=now, delete_retention_ms=100, aborted_txns=aborted,
                         active_producers=active, offset_map=omap)
    end, keep, reasons, actions, horizons, full = model(batches, first_dirty, first_uncleanable, now, 100,
                                                        aborted, active, omap.max_keys)
    assert rp.end_offset == end
    assert rp.map_full == full
    assert rp.plan.keep.tolist() == keep
    assert rp.plan.reason.tolist() == reasons
    assert rp.plan.batch_action.tolist() == actions
    assert rp.plan.batch_delete_horizon.tolist() == horizons


def test_latest_value_per_key_survives_and_duplicates_go():
    batches = [B(0, 1, 0, [(0, b"a", False), (1, b"b", False)]),
               B(2, 3, 0, [(2, b"a", False), (3, None, False)]),
               B(4, 4, 4, [(4, b"c", False)])]
    rc, bc = columns(batches)
    rp = plan_compaction(rc, bc, first_dirty_offset=0, first_uncleanable_offset=4, now_ms=0,
                         delete_retention_ms=10)
    assert rp.end_offset == 4
    assert rp.plan.keep.tolist() == [False, True, True, False]
    assert rp.plan.reason.tolist() == [DUPLICATE, KEPT, KEPT, KEYLESS]
    assert rp.plan.batch_action.tolist() == [REWRITE, REWRITE]
    assert rp.plan.removed_by_reason()["duplicate"] == 1


def test_tombstone_gets_a_horizon_then_goes_after_it():
    batches = [B(0, 0, 0, [(0, b"a", False)]), B(1, 1, 0, [(1, b"a", True)]),
               B(2, 2, 2, [(2, b"z", False)])]
    rc, bc = columns(batches)
    first = plan_compaction(rc, bc, first_dirty_offset=0, first_uncleanable_offset=2, now_ms=1000,
                            delete_retention_ms=500)
    assert first.plan.batch_action.tolist() == [DROP, REWRITE]
    assert first.plan.batch_delete_horizon.tolist() == [NO_TIMESTAMP, 1500]
    batches[1].horizon = 1500
    for now, kept, action in ((1499, True, COPY), (1500, False, EMPTY)):
        rc, bc = columns(batches[1:])
        rp = plan_compaction(rc, bc, first_dirty_offset=2, first_uncleanable_offset=2, now_ms=now,
                             delete_retention_ms=500)
        assert rp.end_offset == 0  # an empty dirty range maps nothing: every record is "beyond"
        rp = plan_compaction(rc, bc, first_dirty_offset=1, first_uncleanable_offset=2, now_ms=now,
                             delete_retention_ms=500)
        assert rp.plan.keep.tolist() == [kept]
        assert rp.plan.batch_action.tolist() == [action]  # the batch ending at the bound stays


def test_aborted_data_goes_and_its_marker_outlives_it():
    batches = [B(0, 0, 0, [(0, b"a", False)], 7, 0, True),
               B(1, 1, 0, [(1, b"ctl", False)], 7, 0, True, ABORT),
               B(2, 2, 0, [(2, b"b", False)], 8, 0, False),
               B(3, 3, 3, [(3, b"c", False)])]
    aborted = [AbortedTxn(producer_id=7, first_offset=0, last_offset=1, last_stable_offset=-1)]
    rc, bc = columns(batches)
    active = {8: ProducerLastRecord(2, 0)}
    rp = plan_compaction(rc, bc, first_dirty_offset=0, first_uncleanable_offset=3, now_ms=0,
                         delete_retention_ms=100, aborted_txns=aborted, active_producers=active)
    assert rp.plan.reason.tolist() == [ABORTED, KEPT, KEPT]
    assert rp.plan.batch_action.tolist() == [DROP, COPY, COPY]
    assert rp.plan.retained_aborted_txns == aborted
    # Next rounds: the data is gone, so the marker gets a horizon, then goes.
    later = batches[1:] + [B(4, 4, 4, [(4, b"d", False)])]
    rc, bc = columns(later)
    rp = plan_compaction(rc, bc, first_dirty_offset=3, first_uncleanable_offset=4, now_ms=0,
                         delete_retention_ms=100, aborted_txns=aborted, active_producers=active)
    assert rp.plan.batch_action.tolist() == [REWRITE, COPY, COPY]
    assert rp.plan.batch_delete_horizon.tolist() == [100, NO_TIMESTAMP, NO_TIMESTAMP]
    later[0].horizon = 100
    rc, bc = columns(later)
    rp = plan_compaction(rc, bc, first_dirty_offset=3, first_uncleanable_offset=4, now_ms=100,
                         delete_retention_ms=100, aborted_txns=aborted, active_producers=active)
    assert rp.plan.reason.tolist()[0] == MARKER_EXPIRED
    assert rp.plan.batch_action.tolist() == [DROP, COPY, COPY]

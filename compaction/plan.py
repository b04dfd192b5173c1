"""The cleaner's decision as pure functions over decoded columns: which records stay and why.

Shared by `compaction.Cleaner` and `spark_tools.compaction_report` so the two cannot disagree.
Rules follow Kafka's `Cleaner` / `MemoryRecords.filterTo` / `CleanedTransactionMetadata`:

- a record is kept when its offset is past the map's latest offset, or it has a key whose
  mapped offset is not greater than its own (a key absent from the map is kept);
- a keyless record in the cleaned range is dropped (Kafka counts it as invalid);
- a tombstone (null value) is kept until its batch's delete horizon has passed; a v2 batch that
  keeps a tombstone and has no horizon yet is rewritten with horizon = now + delete.retention.ms
  (attribute bit 6, base timestamp = horizon; KIP-534); magic 0/1 batches use the legacy rule
  (segment last-modified time against the last clean segment's time - delete.retention.ms);
- records of aborted transactions are dropped; an ABORT marker stays while the cleaner still saw
  data of its transaction in this pass, a COMMIT marker while it saw any batch of its
  transaction; afterwards the marker gets a delete horizon and goes once it has passed;
- the last batch of an active producer, and the batch ending at the round's upper bound, are kept
  (as an empty header if all their records went); offsets and order never change.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from compaction import _kernels
from compaction._kernels import (  # noqa: F401 - the reason codes are part of this module's API
    ABORTED,
    DUPLICATE,
    KEPT,
    KEYLESS,
    MARKER_EXPIRED,
    TOMBSTONE_EXPIRED,
)
from compaction.offset_map import OffsetMap
from logstore.records.control import ABORT, COMMIT
from logstore.records.header import CONTROL_BIT, DELETE_HORIZON_BIT, NO_TIMESTAMP, TRANSACTIONAL_BIT
from logstore.txn_index import AbortedTxn

# Why a record was dropped (per record, int8; defined beside the kernel that decides it).
REASON_NAMES = ("kept", "duplicate", "tombstone_expired", "aborted", "marker_expired", "keyless")

# What happens to each batch (per batch, int8).
COPY = 0  # written back byte for byte
REWRITE = 1  # rebuilt from its kept records (same base offset, last offset and producer fields)
EMPTY = 2  # all records gone; a 61-byte header keeps the producer state / last offset
DROP = 3  # removed
ACTION_NAMES = ("copy", "rewrite", "empty", "drop")

# A batch's control type besides records.control's ABORT and COMMIT: not a control batch, or a
# control batch whose record was already cleaned.
CONTROL_NONE = -1


def _u64(values: Iterable[int] | np.ndarray) -> np.ndarray:
    """uint64 view of 64-bit hashes (signed int64 hashes keep their bits)."""
    arr = np.ascontiguousarray(values)
    if arr.dtype == np.int64:
        return arr.view(np.uint64)
    return np.ascontiguousarray(arr, dtype=np.uint64)


def _i64(values: Iterable[int] | np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.int64)


@dataclass(frozen=True)
class BatchColumns:
    """Per-batch columns of a range, in offset order.

    `attributes` is the v2 attribute word (compression, timestamp type, transactional bit 4,
    control bit 5, delete-horizon bit 6); `base_timestamp` holds the delete horizon when bit 6
    is set. `control_type` is ABORT/COMMIT for a control batch with its record,
    CONTROL_NONE otherwise. `segment_base` is the base offset of the segment holding the batch.
    `legacy_retain_deletes` only matters for magic 0/1 batches (Kafka's legacy tombstone rule).
    """

    base_offset: np.ndarray
    last_offset: np.ndarray
    attributes: np.ndarray
    base_timestamp: np.ndarray
    producer_id: np.ndarray
    producer_epoch: np.ndarray
    record_count: np.ndarray
    magic: np.ndarray
    control_type: np.ndarray
    segment_base: np.ndarray
    legacy_retain_deletes: np.ndarray

    @classmethod
    def from_arrays(cls, *, base_offset, last_offset, attributes, base_timestamp, producer_id,
                    producer_epoch, record_count, magic=None, control_type=None,
                    segment_base=None, legacy_retain_deletes=None) -> BatchColumns:
        """Build from array-likes, filling the optional columns (magic 2, no control, one segment)."""
        n = len(base_offset)
        return cls(
            base_offset=_i64(base_offset),
            last_offset=_i64(last_offset),
            attributes=np.ascontiguousarray(attributes, dtype=np.int32),
            base_timestamp=_i64(base_timestamp),
            producer_id=_i64(producer_id),
            producer_epoch=np.ascontiguousarray(producer_epoch, dtype=np.int32),
            record_count=np.ascontiguousarray(record_count, dtype=np.int64),
            magic=np.full(n, 2, np.int8) if magic is None else np.ascontiguousarray(magic, np.int8),
            control_type=(np.full(n, CONTROL_NONE, np.int8) if control_type is None
                          else np.ascontiguousarray(control_type, np.int8)),
            segment_base=np.zeros(n, np.int64) if segment_base is None else _i64(segment_base),
            legacy_retain_deletes=(np.ones(n, np.bool_) if legacy_retain_deletes is None
                                   else np.ascontiguousarray(legacy_retain_deletes, np.bool_)),
        )

    def __len__(self) -> int:
        return len(self.base_offset)

    @property
    def is_control(self) -> np.ndarray:
        """Bool per batch: control batch (attribute bit 5)."""
        return (self.attributes & CONTROL_BIT) != 0

    @property
    def is_transactional(self) -> np.ndarray:
        """Bool per batch: transactional batch (attribute bit 4)."""
        return (self.attributes & TRANSACTIONAL_BIT) != 0

    @property
    def delete_horizon(self) -> np.ndarray:
        """Delete horizon per batch (NO_TIMESTAMP when bit 6 is not set or magic < 2)."""
        has = ((self.attributes & DELETE_HORIZON_BIT) != 0) & (self.magic >= 2)
        return np.where(has, self.base_timestamp, NO_TIMESTAMP)

    def take(self, index: np.ndarray) -> BatchColumns:
        """The batches at `index` (a bool mask or positions), every column sliced alike."""
        return BatchColumns(**{name: getattr(self, name)[index] for name in self.__dataclass_fields__})


@dataclass(frozen=True)
class CleanerRecordColumns:
    """The records as the cleaner decides on them (keys as hashes), in offset order; `batch_index`
    points into the BatchColumns.

    `key_hash1`/`key_hash2` are the key's 128-bit MurmurHash3 words (`mmh3.hash64(key,
    signed=False)`); a caller holding only a 64-bit hash may pass zeros for `key_hash2`.
    """

    batch_index: np.ndarray
    offset: np.ndarray
    key_hash1: np.ndarray
    key_hash2: np.ndarray
    has_key: np.ndarray
    is_tombstone: np.ndarray

    @classmethod
    def from_arrays(cls, *, batch_index, offset, key_hash1, has_key, is_tombstone,
                    key_hash2=None) -> CleanerRecordColumns:
        """Build from array-likes (converting dtypes; key_hash2 defaults to zeros)."""
        h1 = _u64(key_hash1)
        h2 = np.zeros(len(h1), np.uint64) if key_hash2 is None else _u64(key_hash2)
        return cls(
            batch_index=np.ascontiguousarray(batch_index, dtype=np.int64),
            offset=_i64(offset),
            key_hash1=h1,
            key_hash2=h2,
            has_key=np.ascontiguousarray(has_key, dtype=np.bool_),
            is_tombstone=np.ascontiguousarray(is_tombstone, dtype=np.bool_),
        )

    def __len__(self) -> int:
        return len(self.offset)


@dataclass(frozen=True)
class ProducerLastRecord:
    """Kafka's LastRecord: an active producer's last data offset (None if unknown) and epoch."""

    last_data_offset: int | None
    producer_epoch: int


class TxnTracker:
    """Transaction state carried through one cleaning round (Kafka's CleanedTransactionMetadata)."""

    def __init__(self, aborted: Iterable[AbortedTxn] = ()) -> None:
        self._pending = deque(sorted(aborted, key=lambda txn: txn.first_offset))
        self._ongoing_aborted: dict[int, list] = {}  # pid -> [AbortedTxn, saw_data]
        self._ongoing_committed: set[int] = set()

    def _consume_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0].first_offset <= offset:
            txn = self._pending.popleft()
            self._ongoing_aborted.setdefault(txn.producer_id, [txn, False])

    def on_batch(self, last_offset: int, producer_id: int, transactional: bool) -> bool:
        """A data batch was read; True when it belongs to an aborted transaction."""
        self._consume_up_to(last_offset)
        if not transactional:
            return False
        state = self._ongoing_aborted.get(producer_id)
        if state is not None:
            state[1] = True
            return True
        self._ongoing_committed.add(producer_id)
        return False

    def on_control(self, last_offset: int, producer_id: int,
                   control_type: int) -> tuple[bool, AbortedTxn | None]:
        """A control batch was read; (marker may be discarded, aborted txn to keep in the index)."""
        self._consume_up_to(last_offset)
        if control_type == ABORT:
            state = self._ongoing_aborted.pop(producer_id, None)
            if state is not None and state[1]:
                return False, state[0]
            return True, None
        if control_type == COMMIT:
            if producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(producer_id)
                return False, None
            return True, None
        return True, None  # an empty control batch was already cleaned


def _aborted_batch_mask(batches: BatchColumns, tracker: TxnTracker) -> np.ndarray:
    """Bool per batch: data batch of an aborted transaction (offset-map building pass)."""
    is_control = batches.is_control
    out = np.zeros(len(batches), np.bool_)
    for b in np.flatnonzero(batches.is_transactional | is_control):
        if is_control[b]:
            tracker.on_control(int(batches.last_offset[b]), int(batches.producer_id[b]),
                               int(batches.control_type[b]))
        else:
            out[b] = tracker.on_batch(int(batches.last_offset[b]), int(batches.producer_id[b]), True)
    return out


def map_batches(offset_map: OffsetMap, records: CleanerRecordColumns, batches: BatchColumns,
                start_offset: int, tracker: TxnTracker, slots: np.ndarray | None = None) -> bool:
    """Add consecutive batches of the dirty range to the offset map (Kafka's buildOffsetMapForSegment).

    Keys of records at or past `start_offset` are put in order, skipping control batches and
    aborted transactions (`tracker` carries transaction state across calls). Returns True
    when the map filled; `offset_map.latest_offset` follows Kafka's rule (the last key put,
    or the last offset of each fully read batch at or past the start). `slots`: see
    OffsetMap.put_hashes.
    """
    aborted_batch = _aborted_batch_mask(batches, tracker)
    bi = records.batch_index
    valid = (records.has_key & (records.offset >= start_offset)
             & ~aborted_batch[bi] & ~batches.is_control[bi])
    consumed = offset_map.put_hashes(records.key_hash1, records.key_hash2, records.offset, valid, slots)
    full = consumed < len(records)
    done = len(batches) if not full else int(bi[consumed])
    reached = batches.last_offset[:done]
    reached = reached[reached >= start_offset]
    in_batch = np.flatnonzero(valid[:consumed] & (bi[:consumed] == done)) if full else ()
    if len(in_batch):
        offset_map.update_latest_offset(int(records.offset[in_batch[-1]]))
    elif reached.size:
        offset_map.update_latest_offset(max(int(reached.max()), offset_map.latest_offset))
    return full


def build_offset_map(offset_map: OffsetMap, records: CleanerRecordColumns, batches: BatchColumns,
                     start_offset: int, end_offset: int,
                     aborted_txns: Iterable[AbortedTxn] = ()) -> bool:
    """Fill `offset_map` with the latest offset per key over the dirty segments [start, end).

    `records`/`batches` are the dirty segments' columns (whole segments, `batches.segment_base`
    telling them apart; end is a segment base). Returns True when the map filled first;
    `offset_map.latest_offset` then says how far it got (the next checkpoint is
    latest_offset + 1), as Kafka computes it.
    """
    offset_map.clear(base_offset=start_offset)
    if start_offset >= end_offset or not len(batches):
        return False
    tracker = TxnTracker(aborted_txns)
    bases = np.unique(batches.segment_base)
    bounds = np.searchsorted(batches.segment_base, bases, side="left").tolist() + [len(batches)]
    rec_bounds = np.searchsorted(records.batch_index, bounds, side="left")
    for s in range(len(bases)):
        b0, b1 = bounds[s], bounds[s + 1]
        r0, r1 = rec_bounds[s], rec_bounds[s + 1]
        seg_records = CleanerRecordColumns(records.batch_index[r0:r1] - b0, records.offset[r0:r1],
                                           records.key_hash1[r0:r1], records.key_hash2[r0:r1],
                                           records.has_key[r0:r1], records.is_tombstone[r0:r1])
        if map_batches(offset_map, seg_records, batches.take(slice(b0, b1)), start_offset, tracker):
            return True
        next_base = int(bases[s + 1]) if s + 1 < len(bases) else end_offset
        offset_map.update_latest_offset(next_base - 1)
    return False


@dataclass(frozen=True)
class CompactionPlan:
    """Per-record and per-batch decisions for one cleaning round over a range of batches."""

    keep: np.ndarray  # bool per record
    reason: np.ndarray  # int8 per record (KEPT, DUPLICATE, ...)
    batch_action: np.ndarray  # int8 per batch (COPY, REWRITE, EMPTY, DROP)
    batch_delete_horizon: np.ndarray  # int64 per batch: horizon written (NO_TIMESTAMP: none)
    batch_kept: np.ndarray  # int64 per batch: records kept
    retained_aborted_txns: list[AbortedTxn] = field(default_factory=list)

    @property
    def records_removed(self) -> int:
        """Records the round drops."""
        return int((~self.keep).sum())

    def removed_by_reason(self) -> dict[str, int]:
        """Dropped records counted by reason name."""
        counts = np.bincount(self.reason, minlength=len(REASON_NAMES))
        return {name: int(counts[i]) for i, name in enumerate(REASON_NAMES) if i != KEPT}


def active_producers_from_batches(batches: BatchColumns) -> dict[int, ProducerLastRecord]:
    """Each producer's last data offset and latest epoch, derived from the batches themselves.

    What Kafka's producer state holds for producers that have not expired; for callers (the
    Spark report) that only have the segment files.
    """
    out: dict[int, ProducerLastRecord] = {}
    pids = batches.producer_id
    for b in np.flatnonzero(pids >= 0):
        pid = int(pids[b])
        prev = out.get(pid)
        last_data = prev.last_data_offset if prev else None
        if not batches.is_control[b]:
            last_data = int(batches.last_offset[b])
        out[pid] = ProducerLastRecord(last_data, int(batches.producer_epoch[b]))
    return out


def decide(records: CleanerRecordColumns, batches: BatchColumns, offset_map: OffsetMap, *, now_ms: int,
           delete_retention_ms: int, upper_bound_offset: int,
           active_producers: Mapping[int, ProducerLastRecord] | None = None,
           tracker: TxnTracker | None = None, map_slots: np.ndarray | None = None) -> CompactionPlan:
    """Decide every record and batch of the segments being cleaned, given the built offset map.

    `upper_bound_offset` is the round's first uncleanable offset (the batch ending there keeps
    at least its header). `tracker` carries transaction state across calls of one round (pass
    the same tracker, holding the round's aborted transactions, for consecutive groups).
    `map_slots`, the records' slots from map_batches this round, spares their lookups.
    """
    if tracker is None:
        tracker = TxnTracker()
    if active_producers is None:
        active_producers = {}
    nb = len(batches)
    is_control = batches.is_control
    is_txn = batches.is_transactional
    horizon = batches.delete_horizon
    can_discard = np.zeros(nb, np.bool_)
    retained_aborted: list[AbortedTxn] = []
    for b in np.flatnonzero(is_txn | is_control):
        if is_control[b]:
            ok, txn = tracker.on_control(int(batches.last_offset[b]), int(batches.producer_id[b]),
                                         int(batches.control_type[b]))
            can_discard[b] = ok
            if txn is not None:
                retained_aborted.append(txn)
        else:
            can_discard[b] = tracker.on_batch(int(batches.last_offset[b]), int(batches.producer_id[b]), True)
    discard_records = np.where(is_control, can_discard & (horizon != NO_TIMESTAMP) & (horizon <= now_ms),
                               can_discard)

    retain_empty = (batches.last_offset + 1) == upper_bound_offset
    for b in np.flatnonzero(batches.producer_id >= 0):
        last = active_producers.get(int(batches.producer_id[b]))
        if last is None:
            continue
        if last.last_data_offset is not None:
            hit = int(batches.last_offset[b]) == last.last_data_offset
        else:
            hit = bool(is_control[b]) and int(batches.producer_epoch[b]) == last.producer_epoch
        if hit:
            retain_empty[b] = True

    # Record decisions, one pass (compaction/_kernels.py).
    n = len(records)
    found = offset_map.get_hashes(records.key_hash1, records.key_hash2, map_slots)
    retain_deletes = np.where(batches.magic < 2, batches.legacy_retain_deletes,
                              (horizon == NO_TIMESTAMP) | (now_ms < horizon))
    keep = np.empty(n, np.bool_)
    reason = np.empty(n, np.int8)
    kept = np.zeros(nb, np.int64)
    kept_tomb = np.zeros(nb, np.bool_)
    total = np.zeros(nb, np.int64)
    _kernels.decide_records(records.batch_index, records.offset, records.has_key,
                            records.is_tombstone, found, offset_map.latest_offset, retain_deletes,
                            discard_records, is_control, keep, reason, kept, kept_tomb, total)
    marker_for_empty_txn = can_discard & is_control
    need_horizon = (batches.magic >= 2) & (kept_tomb | marker_for_empty_txn) & (horizon == NO_TIMESTAMP)

    action = np.full(nb, DROP, np.int8)
    has_kept = kept > 0
    action[has_kept] = REWRITE
    action[has_kept & (kept == total) & ~need_horizon] = COPY
    action[~has_kept & retain_empty] = EMPTY
    new_horizon = np.where(need_horizon, now_ms + delete_retention_ms, horizon)
    new_horizon = np.where(action == REWRITE, new_horizon, np.where(action == COPY, horizon, NO_TIMESTAMP))
    return CompactionPlan(keep=keep, reason=reason, batch_action=action,
                          batch_delete_horizon=new_horizon.astype(np.int64), batch_kept=kept,
                          retained_aborted_txns=retained_aborted)


@dataclass(frozen=True)
class RangePlan:
    """The result of `plan_compaction`: the decisions plus the map facts behind them."""

    plan: CompactionPlan
    batch_mask: np.ndarray  # bool per input batch: part of the cleaned segments
    record_mask: np.ndarray  # bool per input record: part of the cleaned segments
    end_offset: int  # the next cleaner checkpoint (offset map latest offset + 1)
    map_full: bool
    map_keys: int


def plan_compaction(records: CleanerRecordColumns, batches: BatchColumns, *, first_dirty_offset: int,
                    first_uncleanable_offset: int, now_ms: int, delete_retention_ms: int,
                    aborted_txns: Iterable[AbortedTxn] = (),
                    active_producers: Mapping[int, ProducerLastRecord] | None = None,
                    offset_map: OffsetMap | None = None) -> RangePlan:
    """One full cleaning round over a log's batches (log start to end), as the Cleaner runs it.

    Builds the offset map over the dirty segments [first_dirty, first_uncleanable), then
    decides every batch of the segments below the map's end offset. `offset_map` bounds the
    round like log.cleaner.dedupe.buffer.size does (default: room for every record's key).
    `active_producers` defaults to `active_producers_from_batches(batches)`.
    """
    aborted_txns = list(aborted_txns)
    if offset_map is None:
        offset_map = OffsetMap(memory=max(2 * len(records), 1) * 20 + 40, load_factor=0.5)
    if active_producers is None:
        active_producers = active_producers_from_batches(batches)
    seg_bases = np.unique(batches.segment_base)
    dirty_segs = seg_bases[(seg_bases < first_uncleanable_offset)]
    # Segments overlapping [first_dirty, first_uncleanable): from the one holding first_dirty.
    start_seg = dirty_segs[dirty_segs <= first_dirty_offset]
    lo = start_seg[-1] if start_seg.size else (dirty_segs[0] if dirty_segs.size else first_dirty_offset)
    dirty_b = (batches.segment_base >= lo) & (batches.segment_base < first_uncleanable_offset)
    bidx = np.flatnonzero(dirty_b)
    remap = np.full(len(batches), -1, np.int64)
    remap[bidx] = np.arange(len(bidx))
    rmask = dirty_b[records.batch_index]
    dirty_records = CleanerRecordColumns(remap[records.batch_index[rmask]], records.offset[rmask],
                                         records.key_hash1[rmask], records.key_hash2[rmask],
                                         records.has_key[rmask], records.is_tombstone[rmask])
    full = build_offset_map(offset_map, dirty_records, batches.take(bidx), first_dirty_offset,
                            first_uncleanable_offset, aborted_txns)
    end_offset = offset_map.latest_offset + 1
    clean_b = batches.segment_base < end_offset
    cidx = np.flatnonzero(clean_b)
    remap = np.full(len(batches), -1, np.int64)
    remap[cidx] = np.arange(len(cidx))
    cmask = clean_b[records.batch_index]
    clean_records = CleanerRecordColumns(remap[records.batch_index[cmask]], records.offset[cmask],
                                         records.key_hash1[cmask], records.key_hash2[cmask],
                                         records.has_key[cmask], records.is_tombstone[cmask])
    plan = decide(clean_records, batches.take(cidx), offset_map, now_ms=now_ms,
                  delete_retention_ms=delete_retention_ms, upper_bound_offset=first_uncleanable_offset,
                  active_producers=active_producers, tracker=TxnTracker(aborted_txns))
    return RangePlan(plan=plan, batch_mask=clean_b, record_mask=cmask, end_offset=end_offset,
                     map_full=full, map_keys=offset_map.size)

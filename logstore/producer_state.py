"""Producer state: idempotent-producer sequences, producer epochs and open transactions, as
Kafka's ProducerStateManager keeps them, with `.snapshot` files in Kafka's format
(logstore.producer_snapshot).

The Log drives it per batch, never per record:

    analysis = psm.analyze([BatchInfo.from_header(h, marker) ...], origin)  # validates, no mutation
    if analysis.duplicate: answer with its offsets, write nothing
    ... write the batches ...
    psm.apply(analysis, txn_index, next_offset)   # commit producer state, index aborted txns

Recovery replays batches with `load_batch` (per segment) or `rebuild` (past the newest snapshot).
The validation of one producer's batches is logstore.producer_append.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from logstore.clock import SystemClock
from logstore.errors import CorruptSnapshotError
from logstore.log_files import DELETED_SUFFIX
from logstore.producer_append import (
    ORIGIN_CLIENT,
    ORIGIN_REPLICATION,
    AppendAnalysis,
    BatchInfo,
    BatchMetadata,
    CompletedTxn,
    ProducerAppendInfo,
    ProducerStateEntry,
    TxnMetadata,
)
from logstore.producer_snapshot import (
    JavaHashMapOrder,
    decode_snapshot,
    encode_snapshot,
    list_snapshot_names,
    snapshot_path,
    write_snapshot_file,
)
from logstore.records.header import NO_PRODUCER_ID
from logstore.txn_index import AbortedTxn, TransactionIndex

log = logging.getLogger(__name__)

DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # broker's producer.id.expiration.ms


class ProducerStateManager:
    """The producer state of one partition directory, its snapshots and its transactions.

    `read_only=True` never writes, renames or deletes a file (state changes stay in memory).
    """

    def __init__(
        self,
        log_dir: Path | str,
        *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        clock: object | None = None,
        read_only: bool = False,
    ):
        self.log_dir = log_dir if isinstance(log_dir, Path) else Path(log_dir)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.clock = clock if clock is not None else SystemClock()
        self.read_only = read_only
        self._producers: dict[int, ProducerStateEntry] = {}
        self._table = JavaHashMapOrder()
        self._ongoing: dict[int, TxnMetadata] = {}  # by first offset
        self._unreplicated: dict[int, TxnMetadata] = {}  # completed, marker above the HW
        self._snapshots: dict[int, str] = list_snapshot_names(self.log_dir)  # file names by offset
        self._last_map_offset = 0
        self._last_snap_offset = 0

    # ---- producers -----------------------------------------------------------------------

    @property
    def producers(self) -> Mapping[int, ProducerStateEntry]:
        """The active producers by id (do not mutate the entries)."""
        return self._producers

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        """The state of `producer_id`, or None."""
        return self._producers.get(producer_id)

    def is_empty(self) -> bool:
        """No producers and no unreplicated transactions."""
        return not self._producers and not self._unreplicated

    def _add_producer(self, entry: ProducerStateEntry) -> None:
        pid = entry.producer_id
        if pid not in self._producers:
            self._table.on_insert(pid, self._producers.keys(), len(self._producers) + 1)
        self._producers[pid] = entry

    def _load_producer_entry(self, entry: ProducerStateEntry) -> None:
        self._add_producer(entry)
        if entry.current_txn_first_offset is not None:
            first = entry.current_txn_first_offset
            self._ongoing[first] = TxnMetadata(entry.producer_id, first)

    def _is_expired(self, now_ms: int, entry: ProducerStateEntry) -> bool:
        return (
            entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        )

    def remove_expired_producers(self, now_ms: int | None = None) -> list[int]:
        """Forget producers idle for `producer.id.expiration.ms` with no open transaction."""
        now = self.clock.time_ms() if now_ms is None else now_ms
        expired = [pid for pid, e in self._producers.items() if self._is_expired(now, e)]
        for pid in expired:
            del self._producers[pid]
        return expired

    # ---- appends -------------------------------------------------------------------------

    def prepare_update(self, producer_id: int, origin: str) -> ProducerAppendInfo:
        """A validator for `producer_id`'s next batches, starting from its current state."""
        current = self._producers.get(producer_id) or ProducerStateEntry(producer_id)
        return ProducerAppendInfo(producer_id, current, origin)

    def find_duplicate_batch(self, batch: BatchInfo) -> BatchMetadata | None:
        """The earlier batch this one retries (same producer, epoch and sequences), if any."""
        entry = self._producers.get(batch.producer_id)
        if entry is None:
            return None
        return entry.find_duplicate_batch(
            batch.producer_epoch, batch.base_sequence, batch.last_sequence
        )

    def analyze(self, batches: Iterable[BatchInfo], origin: str) -> AppendAnalysis:
        """Validate an append's batches (offsets already assigned) without changing any state.

        For client appends, a batch that duplicates one of its producer's last five stops the
        analysis: the result's `duplicate` holds the original batch. Raises the producer errors.
        """
        updated: dict[int, ProducerAppendInfo] = {}
        completed: list[CompletedTxn] = []
        for batch in batches:
            if not batch.has_producer_id:
                continue
            if origin == ORIGIN_CLIENT:
                duplicate = self.find_duplicate_batch(batch)
                if duplicate is not None:
                    return AppendAnalysis(updated, completed, duplicate)
            info = updated.get(batch.producer_id)
            if info is None:
                info = updated[batch.producer_id] = self.prepare_update(batch.producer_id, origin)
            txn = info.append(batch)
            if txn is not None:
                completed.append(txn)
        return AppendAnalysis(updated, completed, None)

    def update(self, append_info: ProducerAppendInfo) -> None:
        """Commit one producer's validated append."""
        if append_info.producer_id == NO_PRODUCER_ID:
            raise ValueError("cannot update the state of producer id -1")
        current = self._producers.get(append_info.producer_id)
        if current is not None:
            current.update(append_info.updated_entry)
        else:
            self._add_producer(append_info.updated_entry)
        for txn in append_info.started_transactions:
            self._ongoing[txn.first_offset] = txn

    def apply(
        self, analysis: AppendAnalysis, txn_index: TransactionIndex | None, next_offset: int
    ) -> None:
        """Commit an analysed append written to the log: update producers, index every aborted
        transaction in `txn_index` (the active segment's), and move the map end to `next_offset`."""
        for info in analysis.updated_producers.values():
            self.update(info)
        self._complete_all(analysis.completed_txns, txn_index)
        self.update_map_end_offset(next_offset)

    def _complete_all(
        self, completed: Iterable[CompletedTxn], txn_index: TransactionIndex | None
    ) -> None:
        for txn in completed:
            lso = self.last_stable_offset(txn)
            # A read-only manager fills only an index kept in memory, never a file.
            if txn.is_aborted and txn_index is not None and (
                txn_index.in_memory or not self.read_only
            ):
                txn_index.append(
                    AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso)
                )
            self.complete_txn(txn)

    def load_batch(self, batch: BatchInfo, txn_index: TransactionIndex | None = None) -> None:
        """Replay one batch during segment recovery (replication origin, no sequence checks),
        indexing an aborted transaction it completes; moves the map end past the batch."""
        if batch.has_producer_id:
            info = self.prepare_update(batch.producer_id, ORIGIN_REPLICATION)
            txn = info.append(batch)
            self.update(info)
            if txn is not None:
                self._complete_all([txn], txn_index)
        self.update_map_end_offset(batch.last_offset + 1)

    def load_batches(self, batches: Iterable[BatchInfo]) -> None:
        """Replay batches past the newest snapshot (Kafka's loadProducersFromRecords):
        replication origin, producers updated together, transaction index untouched."""
        loaded: dict[int, ProducerAppendInfo] = {}
        completed: list[CompletedTxn] = []
        for batch in batches:
            if not batch.has_producer_id:
                continue
            info = loaded.get(batch.producer_id)
            if info is None:
                info = loaded[batch.producer_id] = self.prepare_update(
                    batch.producer_id, ORIGIN_REPLICATION
                )
            txn = info.append(batch)
            if txn is not None:
                completed.append(txn)
        for info in loaded.values():
            self.update(info)
        for txn in completed:
            self.complete_txn(txn)

    # ---- transactions and the last stable offset -----------------------------------------

    def last_stable_offset(self, completed_txn: CompletedTxn) -> int:
        """The LSO to store with `completed_txn` in the transaction index: the first offset of
        the earliest other producer's open transaction, else just past the marker."""
        for first in sorted(self._ongoing):
            txn = self._ongoing[first]
            if txn.producer_id != completed_txn.producer_id:
                return first
        return completed_txn.last_offset + 1

    def complete_txn(self, completed_txn: CompletedTxn) -> None:
        """Move a transaction from ongoing to completed-awaiting-replication."""
        txn = self._ongoing.pop(completed_txn.first_offset, None)
        if txn is None:
            raise ValueError(
                f"attempted to complete transaction {completed_txn} which was not started"
            )
        txn.last_offset = completed_txn.last_offset
        self._unreplicated[completed_txn.first_offset] = txn

    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest undecided transaction or decided-but-unreplicated one."""
        firsts = list(self._ongoing) + list(self._unreplicated)
        return min(firsts) if firsts else None

    def first_undecided_offset(self) -> int | None:
        """The first offset of the earliest open transaction, or None."""
        return min(self._ongoing) if self._ongoing else None

    def ongoing_transactions(self) -> list[TxnMetadata]:
        """Open transactions by first offset."""
        return [self._ongoing[k] for k in sorted(self._ongoing)]

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Forget completed transactions whose marker is now below the high watermark."""
        self._remove_unreplicated(high_watermark)

    def _remove_unreplicated(self, offset: int) -> None:
        for first, txn in list(self._unreplicated.items()):
            if txn.last_offset is not None and txn.last_offset < offset:
                del self._unreplicated[first]

    # ---- offsets, snapshots, truncation ---------------------------------------------------

    @property
    def map_end_offset(self) -> int:
        """The offset up to which the state reflects the log (exclusive)."""
        return self._last_map_offset

    def update_map_end_offset(self, offset: int) -> None:
        """Declare the state complete up to `offset` (exclusive)."""
        self._last_map_offset = offset

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the known snapshot files, ascending."""
        return sorted(self._snapshots)

    def latest_snapshot_offset(self) -> int | None:
        return max(self._snapshots) if self._snapshots else None

    def oldest_snapshot_offset(self) -> int | None:
        return min(self._snapshots) if self._snapshots else None

    def snapshot_entries(self) -> list[ProducerStateEntry]:
        """The producers in the order Kafka would write them to a snapshot."""
        return [self._producers[pid] for pid in self._table.order(self._producers)]

    def take_snapshot(self, *, sync: bool = True) -> Path | None:
        """Write `<map end offset>.snapshot` unless one at that offset or later exists; returns it.
        `sync=False` skips the fsyncs (Kafka's roll-time snapshot, flushed with the segments)."""
        if self._last_map_offset <= self._last_snap_offset or self.read_only:
            return None
        path = snapshot_path(self.log_dir, self._last_map_offset)
        write_snapshot_file(path, encode_snapshot(self.snapshot_entries()), sync=sync)
        self._snapshots[self._last_map_offset] = path.name
        self._last_snap_offset = self._last_map_offset
        return path

    def _remove_snapshot(self, offset: int) -> None:
        name = self._snapshots.pop(offset, None)
        if name is not None and not self.read_only:
            (self.log_dir / name).unlink(missing_ok=True)

    def delete_snapshots_before(self, offset: int) -> None:
        """Delete snapshot files below `offset`."""
        for snap in [o for o in self._snapshots if o < offset]:
            self._remove_snapshot(snap)

    def mark_snapshot_for_deletion(self, offset: int) -> Path | None:
        """Forget the snapshot at `offset` (its segment left the log) and rename its file
        `.snapshot.deleted`, to be removed with the segment's files (Kafka's
        removeAndMarkSnapshotForDeletion). Returns the renamed file, or None when there was
        no snapshot (or its file was already gone)."""
        name = self._snapshots.pop(offset, None)
        if name is None or self.read_only:
            return None
        path = self.log_dir / name
        target = path.with_name(name + DELETED_SUFFIX)
        try:
            os.replace(path, target)
        except FileNotFoundError:
            return None
        return target

    def remove_stray_snapshots(self, segment_base_offsets: Iterable[int]) -> None:
        """Delete snapshots that match no segment, except the largest stray one when it lies
        past the last segment's base (the one written at clean shutdown)."""
        bases = set(segment_base_offsets)
        stray: int | None = None
        for offset in sorted(self._snapshots):
            if offset not in bases:
                if stray is not None:
                    self._remove_snapshot(stray)
                stray = offset
        if stray is not None and bases and stray < max(bases):
            self._remove_snapshot(stray)

    def _clear(self) -> None:
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()

    def _load_from_snapshot(self, log_start_offset: int, now_ms: int) -> None:
        while self._snapshots:
            offset = max(self._snapshots)
            path = self.log_dir / self._snapshots[offset]
            try:
                entries = decode_snapshot(path.read_bytes(), path)
            except CorruptSnapshotError as exc:
                log.warning("failed to load producer snapshot %s: %s", path, exc)
                self._remove_snapshot(offset)
                continue
            for entry in entries:
                if not self._is_expired(now_ms, entry):
                    self._load_producer_entry(entry)
            self._last_snap_offset = self._last_map_offset = offset
            return
        self._last_snap_offset = self._last_map_offset = log_start_offset

    def truncate_and_reload(
        self, log_start_offset: int, log_end_offset: int, now_ms: int | None = None
    ) -> None:
        """Drop snapshots outside (log_start_offset, log_end_offset] and, unless the state
        already ends at `log_end_offset`, reload it from the newest snapshot left."""
        now = self.clock.time_ms() if now_ms is None else now_ms
        for offset in list(self._snapshots):
            if offset > log_end_offset or offset <= log_start_offset:
                self._remove_snapshot(offset)
        if log_end_offset != self._last_map_offset:
            self._clear()
            self._load_from_snapshot(log_start_offset, now)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """Forget unreplicated transactions below the new log start and move the map end up."""
        self._remove_unreplicated(log_start_offset)
        if self._last_map_offset < log_start_offset:
            self._last_map_offset = log_start_offset
        latest = self.latest_snapshot_offset()
        self._last_snap_offset = latest if latest is not None else log_start_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget everything, delete every snapshot, and restart the map at `offset`."""
        self._clear()
        for snap in list(self._snapshots):
            self._remove_snapshot(snap)
        self._last_snap_offset = 0
        self._last_map_offset = offset

    def rebuild(
        self,
        segments: list[tuple[int, Callable[[], Iterable[BatchInfo]]]],
        log_start_offset: int,
        last_offset: int,
        *,
        clean_shutdown: bool = False,
    ) -> None:
        """Bring the state to `last_offset` from the newest usable snapshot plus a replay of the
        log after it (Kafka's rebuildProducerState), snapshotting at the last two segment bases.

        `segments` are (base offset, batches-of-that-segment) pairs, ascending. After a clean
        shutdown with no snapshot at all, empty snapshots are written instead of a full scan.
        """
        bases = [base for base, _ in segments]
        to_snapshot = set(bases[-2:]) | {last_offset}
        if self.latest_snapshot_offset() is None and clean_shutdown:
            for offset in sorted(to_snapshot):
                self.update_map_end_offset(offset)
                self.take_snapshot()
            return
        empty_before = self.is_empty() and self._last_map_offset >= last_offset
        self.truncate_and_reload(log_start_offset, last_offset)
        if last_offset > self._last_map_offset and not empty_before:
            for i, (base, batches) in enumerate(segments):
                end = bases[i + 1] if i + 1 < len(bases) else None
                if base >= last_offset or (end is not None and end <= self._last_map_offset):
                    continue
                start = max(base, self._last_map_offset, log_start_offset)
                self.update_map_end_offset(start)
                if base in to_snapshot:
                    self.take_snapshot()
                self.load_batches(
                    b for b in batches() if b.last_offset >= start and b.base_offset < last_offset
                )
        self.update_map_end_offset(last_offset)
        self.take_snapshot()

    def update_parent_dir(self, log_dir: Path | str) -> None:
        """Follow a renamed partition directory."""
        self.log_dir = Path(log_dir)  # the snapshots keep their names

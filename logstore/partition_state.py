"""PartitionState: the Kafka state a partition keeps beside its segments -- producer state and
its `.snapshot` files, the leader-epoch cache, the segments' `.txnindex` files. A part of Log:
Log and LogLoader call it at each step, as Kafka's UnifiedLog and LogLoader drive
ProducerStateManager and LeaderEpochFileCache. It owns the epoch cache.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from logstore.clock import Clock
from logstore.epoch import LeaderEpochFileCache
from logstore.errors import CorruptRecordError, InvalidTxnStateError
from logstore.log_validator import ValidatedBatches
from logstore.producer_append import AppendAnalysis, BatchInfo, batch_info
from logstore.producer_state import ProducerStateManager
from logstore.records import RecordBatch, read_batch
from logstore.records.header import CONTROL_BIT, NO_PRODUCER_ID
from logstore.segment import LogSegment
from logstore.txn_index import AbortedTxn, collect_aborted_txns


def segment_sources(
    segments: Sequence[LogSegment],
) -> list[tuple[int, Callable[[], Iterable[BatchInfo]]]]:
    """(base offset, batches) pairs for `ProducerStateManager.rebuild`; batches are read lazily."""

    def reader(segment: LogSegment) -> Callable[[], Iterable[BatchInfo]]:
        def infos() -> Iterator[BatchInfo]:
            # Headers only: the body is read just for a producer's control batch (its marker).
            for position, header in segment.batch_headers():
                info = BatchInfo.from_header(header)
                if info.is_control and info.has_producer_id:
                    try:
                        info = batch_info(read_batch(segment.read_bytes(position, header.size_in_bytes), 0))
                    except CorruptRecordError as exc:  # name the segment and the file position
                        raise CorruptRecordError(exc.detail, position=position + (exc.position or 0),
                                                 path=str(segment.log_path)) from exc
                yield info

        return infos

    return [(s.base_offset, reader(s)) for s in segments]


# What the producer state manager answers for an append without a producer's batch (read only).
_NO_PRODUCER_BATCHES = AppendAnalysis({}, [], None)


class PartitionState:
    """Producer state, leader epochs and transaction indexes of one partition directory."""

    def __init__(self, directory: Path, *, clock: Clock, read_only: bool, producer_id_expiration_ms: int):
        self._dir = directory
        self._clock = clock
        self._read_only = read_only
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.epochs = LeaderEpochFileCache.in_dir(directory, read_only=read_only)
        self._producer_state: ProducerStateManager | None = None
        self._recovering: tuple[ProducerStateManager, LogSegment] | None = None
        self._sound_txn_indexes: set[int] = set()  # base offsets checked by _index_aborts_in_memory

    @property
    def producer_state(self) -> ProducerStateManager:
        """The partition's ProducerStateManager (available once the log is loaded)."""
        if self._producer_state is None:
            raise RuntimeError("producer state is available once the log has been loaded")
        return self._producer_state

    def _new_manager(self) -> ProducerStateManager:
        return ProducerStateManager(self._dir, producer_id_expiration_ms=self.producer_id_expiration_ms,
                                    clock=self._clock, read_only=self._read_only)

    # ---- loading and recovery (called by LogLoader) --------------------------------------

    def recovering_segment(self, segments: Sequence[LogSegment], segment: LogSegment) -> None:
        """Before `segment` (one of the live `segments`) is recovered: state as of its base
        offset, and an empty `.txnindex` that the recovered batches refill (Kafka's
        LogLoader.recoverSegment)."""
        self._finish_segment_recovery()
        if segment not in segments:
            return  # opening a segment with a corrupt index: its .log is sound, keep the index
        psm = self._new_manager()
        psm.rebuild(segment_sources([s for s in segments if s.base_offset < segment.base_offset]),
                    0, segment.base_offset)
        segment.txn_index.reset()
        self._recovering = (psm, segment)

    def recovered_batch(self, batch: RecordBatch) -> None:
        """Each valid batch re-read while recovering a segment, in offset order. Raises
        CorruptRecordError, before changing any state, for a control batch whose marker does
        not decode and for a batch no leader could have written (a plain batch from a producer
        whose transaction is open: Kafka's InvalidTxnStateException)."""
        if self._recovering is not None:
            psm, segment = self._recovering
            try:
                psm.load_batch(batch_info(batch), segment.txn_index)  # validates before it updates
            except InvalidTxnStateError as exc:
                raise CorruptRecordError(str(exc)) from exc
        if batch.magic >= 2 and batch.partition_leader_epoch >= 0:
            latest = self.epochs.latest_epoch()
            if latest is None or batch.partition_leader_epoch > latest:
                self.epochs.assign(batch.partition_leader_epoch, batch.base_offset)

    def _finish_segment_recovery(self) -> None:
        if self._recovering is not None:
            self._recovering[0].take_snapshot()  # spares the next segment's recovery a rescan
            self._recovering = None

    def loaded(self, segments: Sequence[LogSegment], log_start_offset: int, log_end_offset: int,
               *, clean_shutdown: bool) -> None:
        """After the segments are loaded and recovered: trim the epochs to the log's range and
        rebuild producer state from the snapshots and the segments past them."""
        self._finish_segment_recovery()
        self.epochs.truncate_from_end(log_end_offset)
        self.epochs.truncate_from_start(log_start_offset)
        psm = self._new_manager()
        psm.remove_stray_snapshots([s.base_offset for s in segments])
        psm.rebuild(segment_sources(segments), log_start_offset, log_end_offset,
                    clean_shutdown=clean_shutdown)
        self._producer_state = psm

    # ---- append, roll, close (called by Log) ---------------------------------------------

    def analyze(self, validated: ValidatedBatches, origin: str) -> AppendAnalysis:
        """Validate an append's producer state (raises the producer errors); the result names
        the earlier batch a client append retries, if it is one. Batches without a producer
        id are no part of it; only a control batch is read past its header (its marker)."""
        if not validated.has_producer_ids:
            return _NO_PRODUCER_BATCHES
        infos = [
            batch_info(read_batch(validated.data, position)) if header.attributes & CONTROL_BIT
            else BatchInfo.from_header(header)
            for header, position in zip(validated.headers, validated.positions, strict=True)
            if header.producer_id > NO_PRODUCER_ID
        ]
        return self.producer_state.analyze(infos, origin)

    def assign_epochs(self, validated: ValidatedBatches) -> None:
        """Record the leader epochs stamped on appended batches (Kafka's maybeAssignEpochStartOffset)."""
        epoch = validated.leader_epoch
        if epoch is not None:
            # A leader stamped one epoch on every batch: only the first can start it.
            if epoch >= 0:
                self.epochs.assign(epoch, validated.first_offset)
            return
        for batch in validated.headers:
            if batch.magic < 2:
                # A format regression: forget the epochs so the next leader election falls back
                # to truncating by high watermark (as Kafka does).
                if len(self.epochs):
                    self.epochs.clear_and_flush()
            elif batch.partition_leader_epoch >= 0:
                self.epochs.assign(batch.partition_leader_epoch, batch.base_offset)

    def appended(self, analysis: AppendAnalysis, active: LogSegment, log_end_offset: int) -> None:
        """Commit an analysed append just written to `active`."""
        if analysis.updated_producers or analysis.completed_txns:
            self._producer_state.apply(analysis, active.txn_index, log_end_offset)
        else:
            self.appended_without_producers(log_end_offset)

    def appended_without_producers(self, log_end_offset: int) -> None:
        """Commit an append with no producer batches (all apply() does with nothing to commit)."""
        self._producer_state.update_map_end_offset(log_end_offset)

    def rolled(self, new_segment: LogSegment) -> None:
        """A new active segment was created: snapshot producer state at its base offset."""
        psm = self.producer_state
        psm.update_map_end_offset(new_segment.base_offset)
        # Unsynced, as Kafka's roll: the log's flush after a roll makes the rename durable.
        psm.take_snapshot(sync=False)

    def closing(self, log_end_offset: int) -> None:
        """The log is about to close cleanly: snapshot producer state at the log end."""
        psm = self.producer_state
        psm.update_map_end_offset(log_end_offset)
        psm.take_snapshot()

    # ---- truncation, log start, deletion (called by Log) ---------------------------------

    def truncated(self, segments: Sequence[LogSegment], log_start_offset: int, end_offset: int) -> None:
        """Everything at and above `end_offset` was removed from the log of `segments`."""
        psm = self.producer_state
        if len(segments) == 1 and segments[0].size == 0 and log_start_offset == end_offset:
            self.epochs.clear_and_flush()
            psm.truncate_fully_and_start_at(end_offset)
            return
        self.epochs.truncate_from_end(end_offset)
        psm.rebuild(segment_sources(segments), log_start_offset, end_offset)

    def start_offset_changed(self, log_start_offset: int) -> None:
        """The log start offset moved up (or was reset by a full truncation)."""
        self.epochs.truncate_from_start(log_start_offset)
        self.producer_state.on_log_start_offset_incremented(log_start_offset)

    def segments_deleted(self, deleted: Iterable[LogSegment], live_base_offsets: set[int]) -> list[Path]:
        """Rename the snapshots of segments that left the log `.snapshot.deleted` and return
        them, for deletion with the segments' files after file.delete.delay.ms (as Kafka)."""
        renamed = []
        for segment in deleted:
            if segment.base_offset not in live_base_offsets:
                path = self.producer_state.mark_snapshot_for_deletion(segment.base_offset)
                if path is not None:
                    renamed.append(path)
        return renamed

    # ---- read committed ------------------------------------------------------------------

    def last_stable_offset(self, high_watermark: int, log_start_offset: int) -> int:
        """The LSO: the first offset of the earliest undecided or unreplicated transaction,
        bounded by the log start offset, if it is below the high watermark; else the HW."""
        psm = self.producer_state
        psm.on_high_watermark_updated(high_watermark)
        first = psm.first_unstable_offset()
        if first is None:
            return high_watermark
        first = max(first, log_start_offset)
        return first if first < high_watermark else high_watermark

    def aborted_transactions(self, segments: Sequence[LogSegment], offset: int, limit: int) -> tuple[AbortedTxn, ...]:
        """The aborted transactions a read_committed fetch of [offset, limit) must drop; a
        read-only log first rebuilds missing or corrupt `.txnindex` files in memory."""
        if self._read_only:
            first = max(bisect.bisect_right([s.base_offset for s in segments], offset) - 1, 0)
            self._index_aborts_in_memory(segments, segments[first:])
        return tuple(collect_aborted_txns(segments, offset, limit))

    def _index_aborts_in_memory(self, all_segments: Sequence[LogSegment], segments: Sequence[LogSegment]) -> None:
        """Read-only logs: rebuild in memory the `.txnindex` of each of `segments` whose file is
        missing or corrupt, replaying batches (not records) from the first such segment as
        recovery would, from the producer state at its base offset. Writes no byte; each
        segment is rebuilt once."""
        todo = []
        for segment in segments:
            if segment.txn_index.in_memory or segment.base_offset in self._sound_txn_indexes:
                continue
            if segment.txn_index.is_sound():
                self._sound_txn_indexes.add(segment.base_offset)
            else:
                todo.append(segment)
        if not todo:
            return
        first, last = todo[0].base_offset, todo[-1].base_offset
        psm = self._new_manager()
        psm.rebuild(segment_sources([s for s in all_segments if s.base_offset < first]), 0, first)
        for segment in todo:
            segment.txn_index.keep_in_memory()
        for segment in all_segments:
            if first <= segment.base_offset <= last:
                index = segment.txn_index if segment.txn_index.in_memory else None
                for batch in segment.iter_batches():
                    psm.load_batch(batch_info(batch), index)

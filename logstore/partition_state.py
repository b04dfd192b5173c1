"""PartitionState: the Kafka state a partition keeps beside its segments -- producer state and
its `.snapshot` files, the leader-epoch cache, the segments' `.txnindex` files -- kept in step
with a Log through LogHooks, the way Kafka's UnifiedLog and LogLoader drive
ProducerStateManager and LeaderEpochFileCache.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from logstore.epoch import LeaderEpochFileCache
from logstore.log import LogHooks
from logstore.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    AppendAnalysis,
    BatchInfo,
    BatchMetadata,
    ProducerStateManager,
    batch_info,
)
from logstore.records import RecordBatch

if TYPE_CHECKING:
    from logstore.log import Log
    from logstore.segment import LogSegment


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
                    info = batch_info(RecordBatch(segment.read_bytes(position, header.size_in_bytes), 0))
                yield info

        return infos

    return [(s.base_offset, reader(s)) for s in segments]


class PartitionState(LogHooks):
    """Producer state, leader epochs and transaction indexes of one Log (install as a hook)."""

    def __init__(self, *, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS):
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._producer_state: ProducerStateManager | None = None
        self._epochs: LeaderEpochFileCache | None = None
        self._recovering: tuple[ProducerStateManager, LogSegment] | None = None
        self._pending: tuple[list[RecordBatch], AppendAnalysis] | None = None
        self._sound_txn_indexes: set[int] = set()  # base offsets checked by index_aborts_in_memory

    # ---- state objects -------------------------------------------------------------------

    @property
    def producer_state(self) -> ProducerStateManager:
        """The partition's ProducerStateManager (available once the log is loaded)."""
        if self._producer_state is None:
            raise RuntimeError("producer state is available once the log has been loaded")
        return self._producer_state

    def leader_epoch_cache(self, log: Log) -> LeaderEpochFileCache:
        """The partition's leader-epoch cache (`leader-epoch-checkpoint`)."""
        if self._epochs is None:
            self._epochs = LeaderEpochFileCache.in_dir(log.dir, read_only=log.read_only)
        return self._epochs

    def _new_manager(self, log: Log) -> ProducerStateManager:
        return ProducerStateManager(
            log.dir,
            producer_id_expiration_ms=self.producer_id_expiration_ms,
            clock=log.clock,
            read_only=log.read_only,
        )

    # ---- read committed ------------------------------------------------------------------

    def last_stable_offset(self, log: Log) -> int:
        """The LSO: the first offset of the earliest undecided or unreplicated transaction,
        bounded by the log start offset, if it is below the high watermark; else the HW."""
        hw = log.high_watermark
        psm = self.producer_state
        psm.on_high_watermark_updated(hw)
        first = psm.first_unstable_offset()
        if first is None:
            return hw
        first = max(first, log.log_start_offset)
        return first if first < hw else hw

    def index_aborts_in_memory(self, log: Log, segments: Sequence[LogSegment]) -> None:
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
        psm = self._new_manager(log)
        psm.rebuild(segment_sources([s for s in log.segments if s.base_offset < first]), 0, first)
        for segment in todo:
            segment.txn_index.keep_in_memory()
        for segment in log.segments:
            if first <= segment.base_offset <= last:
                index = segment.txn_index if segment.txn_index.in_memory else None
                for batch in segment.iter_batches():
                    psm.load_batch(batch_info(batch), index)

    # ---- append --------------------------------------------------------------------------

    def _analyze(self, batches: list[RecordBatch], origin: str) -> AppendAnalysis:
        pending = self._pending
        if pending is not None and pending[0] is batches:
            return pending[1]
        analysis = self.producer_state.analyze([batch_info(b) for b in batches], origin)
        self._pending = (batches, analysis)
        return analysis

    def duplicate_of(
        self, log: Log, batches: list[RecordBatch], origin: str
    ) -> BatchMetadata | None:
        """The earlier batch a client append retries (answer with its offsets, write nothing).
        Also validates the append's producer state; raises the producer errors."""
        return self._analyze(batches, origin).duplicate

    def before_append(self, log: Log, batches: list[RecordBatch], origin: str) -> None:
        self._analyze(batches, origin)

    def appended(self, log: Log, batches: list[RecordBatch], origin: str) -> None:
        analysis = self._analyze(batches, origin)
        self._pending = None
        epochs = self.leader_epoch_cache(log)
        for batch in batches:
            if batch.magic < 2:
                # A format regression: forget the epochs so the next leader election falls back
                # to truncating by high watermark (as Kafka does).
                if len(epochs):
                    epochs.clear_and_flush()
            elif batch.partition_leader_epoch >= 0:
                epochs.assign(batch.partition_leader_epoch, batch.base_offset)
        self.producer_state.apply(analysis, log.active_segment.txn_index, log.log_end_offset)

    def rolled(self, log: Log, new_segment: LogSegment) -> None:
        psm = self.producer_state
        psm.update_map_end_offset(new_segment.base_offset)
        # Unsynced, as Kafka's roll: the log's flush after a roll makes the rename durable.
        psm.take_snapshot(sync=False)

    def closing(self, log: Log) -> None:
        psm = self.producer_state
        psm.update_map_end_offset(log.log_end_offset)
        psm.take_snapshot()

    # ---- loading and recovery ------------------------------------------------------------

    def recovering_segment(self, log: Log, segment: LogSegment) -> None:
        """Before a segment is recovered: state as of its base offset, and an empty `.txnindex`
        that the recovered batches refill (Kafka's LogLoader.recoverSegment)."""
        self._finish_segment_recovery()
        if segment not in log.segments:
            return  # opening a segment with a corrupt index: its .log is sound, keep the index
        psm = self._new_manager(log)
        earlier = [s for s in log.segments if s.base_offset < segment.base_offset]
        psm.rebuild(segment_sources(earlier), 0, segment.base_offset)
        segment.txn_index.reset()
        self._recovering = (psm, segment)

    def recovered_batch(self, log: Log, batch: RecordBatch) -> None:
        epochs = self.leader_epoch_cache(log)
        if batch.magic >= 2 and batch.partition_leader_epoch >= 0:
            latest = epochs.latest_epoch()
            if latest is None or batch.partition_leader_epoch > latest:
                epochs.assign(batch.partition_leader_epoch, batch.base_offset)
        if self._recovering is not None:
            psm, segment = self._recovering
            psm.load_batch(batch_info(batch), segment.txn_index)

    def _finish_segment_recovery(self) -> None:
        if self._recovering is not None:
            self._recovering[0].take_snapshot()  # spares the next segment's recovery a rescan
            self._recovering = None

    def loaded(self, log: Log) -> None:
        self._finish_segment_recovery()
        epochs = self.leader_epoch_cache(log)
        epochs.truncate_from_end(log.log_end_offset)
        epochs.truncate_from_start(log.log_start_offset)
        psm = self._new_manager(log)
        psm.remove_stray_snapshots([s.base_offset for s in log.segments])
        psm.rebuild(
            segment_sources(log.segments),
            log.log_start_offset,
            log.log_end_offset,
            clean_shutdown=log.had_clean_shutdown,
        )
        self._producer_state = psm

    # ---- truncation and deletion ---------------------------------------------------------

    def truncated(self, log: Log, end_offset: int) -> None:
        epochs = self.leader_epoch_cache(log)
        psm = self.producer_state
        segments = log.segments
        if len(segments) == 1 and segments[0].size == 0 and log.log_start_offset == end_offset:
            epochs.clear_and_flush()
            psm.truncate_fully_and_start_at(end_offset)
            return
        epochs.truncate_from_end(end_offset)
        psm.rebuild(segment_sources(segments), log.log_start_offset, end_offset)

    def start_offset_changed(self, log: Log, log_start_offset: int) -> None:
        self.leader_epoch_cache(log).truncate_from_start(log_start_offset)
        self.producer_state.on_log_start_offset_incremented(log_start_offset)

    def segments_deleted(self, log: Log, segments: list[LogSegment]) -> None:
        # As Kafka: a deleted segment's snapshot is renamed `.snapshot.deleted` now and
        # removed with the segment's files once file.delete.delay.ms has passed.
        live = {s.base_offset for s in log.segments}
        for segment in segments:
            if segment.base_offset not in live:
                renamed = self.producer_state.mark_snapshot_for_deletion(segment.base_offset)
                if renamed is not None:
                    log.delete_file_later(renamed)

    # ---- epochs --------------------------------------------------------------------------

    def epoch_for_offset(self, log: Log, offset: int) -> int | None:
        return self.leader_epoch_cache(log).epoch_for_offset(offset)

    def latest_epoch(self, log: Log) -> int | None:
        return self.leader_epoch_cache(log).latest_epoch()

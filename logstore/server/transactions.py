"""The transaction coordinator as a state machine: InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn and TxnOffsetCommit as typed calls (transaction_api.py speaks the
wire), as Kafka's TransactionCoordinator on one node. Each transaction's state is a typed
TransactionLog record in `__transaction_state` (coordinator_records); COMMIT/ABORT markers go
through the engine's control-batch path, so read_committed fetches stop at the last stable
offset. Timeouts read the injected clock."""

from __future__ import annotations

import asyncio
import logging

from logstore.errors import LogstoreError
from logstore.server import error_codes as ec
from logstore.server.context import ServerContext
from logstore.server.coordinator_partitions import CoordinatorPartitions
from logstore.server.coordinator_records import (
    OFFSETS_TOPIC,
    TRANSACTION_TOPIC,
    TxnMetadata,
    partition_for,
    replay_transactions,
    transaction_record,
)
from logstore.server.group_coordinator import GroupCoordinator
from logstore.server.group_metadata import group_id_fits
from logstore.server.group_results import OffsetCommitEntry
from logstore.server.producer_ids import ProducerIdManager
from logstore.server.txn_markers import MarkerSender, mark_led, write_marker

EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT = 0, 1, 2, 3, 4, 5
MAX_EPOCH = 32_766  # Short.MAX_VALUE - 1: past it a producer gets a new id
TIMEOUT_CHECK_S = 1.0

logger = logging.getLogger("logstore.server")


class TransactionCoordinator:
    """Every transactional id of the node; also hands out ids to idempotent producers."""

    def __init__(self, ctx: ServerContext, groups: GroupCoordinator, producer_ids: ProducerIdManager):
        self._ctx = ctx
        self._groups = groups
        self._ids = producer_ids
        self._txns: dict[str, TxnMetadata] = {}
        config = ctx.config
        # a single node coordinates every partition; a cluster's node those it leads (load on election)
        self.coordinated = CoordinatorPartitions(ctx, TRANSACTION_TOPIC, config.transaction_state_log_num_partitions,
                                                 config.transaction_state_log_replication_factor,
                                                 replay_transactions, self._install, self._unload,
                                                 {"min.insync.replicas": str(config.transaction_state_log_min_isr)})
        self._markers = MarkerSender(ctx)
        self._sending: dict[str, asyncio.Task] = {}  # markers on their way to other nodes' partitions
        self._timeouts: asyncio.Task | None = None
        self.coordinated.load_standalone()

    def _install(self, partition: int, txns: dict[str, TxnMetadata]) -> None:
        """Take on the transactions replayed from one __transaction_state partition: one
        decided but not completed (its coordinator stopped between prepare and complete) goes on
        to its markers now; an Ongoing one is aborted once it times out."""
        self._txns.update(txns)
        for txn in txns.values():
            self._ids.observe(txn.producer_id)
            if txn.state in (PREPARE_COMMIT, PREPARE_ABORT):
                self._try_markers(txn)

    def _unload(self, partition: int) -> None:
        """Forget the transactional ids of a partition another node now leads."""
        count = self.coordinated.count()
        for txn_id in [t for t in self._txns if partition_for(t, count) == partition]:
            del self._txns[txn_id]
            task = self._sending.pop(txn_id, None)
            if task is not None:
                task.cancel()

    def transactions(self) -> list[TxnMetadata]:
        """Every transactional id's metadata, for the describing APIs (to read, not change)."""
        return list(self._txns.values())

    def coordinator_error(self, transactional_id: str) -> int:
        """NONE where this node coordinates `transactional_id`, else NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS (what a transaction request is answered then)."""
        return self.coordinated.error(transactional_id)

    async def replicated(self, transactional_id: str) -> int:
        """After a write for `transactional_id`: wait until the ISR of its partition holds it."""
        return await self.coordinated.replicated(transactional_id)

    # ------------------------------------------------------------------ storage

    def _store(self, txn: TxnMetadata) -> None:
        txn.update_ms = self._ctx.clock.time_ms()
        self.coordinated.append(txn.transactional_id, [transaction_record(txn)], txn.update_ms)

    def _complete(self, txn: TxnMetadata, commit: bool) -> None:
        """Prepare, write the markers, apply transactional offsets, then complete."""
        txn.state = PREPARE_COMMIT if commit else PREPARE_ABORT
        self._store(txn)
        self._write_markers(txn)

    def _try_markers(self, txn: TxnMetadata) -> None:
        """`_write_markers`, a failure only warned of: the timeout task tries again each second."""
        try:
            self._write_markers(txn)
        except LogstoreError as exc:
            logger.warning("the markers of transaction %r failed, tried again in %ss: %s",
                           txn.transactional_id, TIMEOUT_CHECK_S, exc)

    def _write_markers(self, txn: TxnMetadata) -> None:
        """Write a prepared transaction's markers, apply its offsets and complete it. A failed
        marker leaves it prepared, for check_timers to try again (Kafka retries markers
        until they are written): its partitions' last stable offset waits for them. On a single
        node this happens now; in a cluster in a task (`_send_markers`)."""
        if txn.transactional_id in self._sending:
            return
        commit = txn.state == PREPARE_COMMIT
        coordinator_epoch = self.coordinated.epoch(self.coordinated.partition_of(txn.transactional_id))
        if not self.coordinated.standalone:
            task = asyncio.get_running_loop().create_task(self._send_markers(txn, commit, coordinator_epoch))
            self._sending[txn.transactional_id] = task
            return
        now = self._ctx.clock.time_ms()
        for topic, partition in list(txn.partitions):
            log = self._ctx.topics.log(topic, partition)
            if log is not None:
                write_marker(log, commit, txn.producer_id, txn.producer_epoch, coordinator_epoch, 0, now)
            txn.partitions.discard((topic, partition))
        self._completed(txn, commit)

    async def _send_markers(self, txn: TxnMetadata, commit: bool, coordinator_epoch: int) -> None:
        """A cluster coordinator's marker phase, in Kafka's order: once the ISR holds the
        PREPARE record (else the transaction stays prepared, for check_timers or the next
        coordinator), the markers of the partitions led here and, by WriteTxnMarkers, of those
        other nodes lead, all at once. A partition is done once its leader's ISR holds the
        marker; once none is left the transaction completes (else check_timers tries again)."""
        try:
            error = await self.coordinated.replicated(txn.transactional_id)
            if error != ec.NONE:
                logger.info("transaction %r prepared but not replicated (error %d): markers later",
                            txn.transactional_id, error)
                return
            by_leader = self._markers.leaders(txn.partitions)
            here = by_leader.pop(self._ctx.node_id, [])
            by_leader.pop(-1, None)  # no leader now: tried again later
            marked_here, *sent = await asyncio.gather(
                mark_led(self._ctx, here, commit, txn.producer_id, txn.producer_epoch, coordinator_epoch),
                *(self._markers.send(leader, partitions, commit, txn.producer_id, txn.producer_epoch,
                                     coordinator_epoch) for leader, partitions in by_leader.items()))
        finally:
            self._sending.pop(txn.transactional_id, None)
        txn.partitions.difference_update(tp for tp, error in marked_here.items() if error == ec.NONE)
        for done in sent:
            txn.partitions.difference_update(done)
        if txn.partitions or self._txns.get(txn.transactional_id) is not txn:
            return
        try:
            self._completed(txn, commit)
        except LogstoreError as exc:
            logger.warning("completing transaction %r failed, tried again in %ss: %s",
                           txn.transactional_id, TIMEOUT_CHECK_S, exc)

    def _completed(self, txn: TxnMetadata, commit: bool) -> None:
        self._groups.complete_transaction(txn.producer_id, commit)
        txn.state = COMPLETE_COMMIT if commit else COMPLETE_ABORT
        txn.partitions = set()
        self._store(txn)
        self._ctx.data.notify()

    # ------------------------------------------------------------------ timeouts

    def start(self) -> None:
        """Start aborting timed-out transactions (call inside the server's event loop): one
        left open before a restart is aborted too, so the last stable offset moves on."""
        if self._timeouts is None or self._timeouts.done():
            self._timeouts = asyncio.get_running_loop().create_task(self._timer_loop())

    async def _timer_loop(self) -> None:
        while True:
            await asyncio.sleep(TIMEOUT_CHECK_S)
            self.check_timers()

    def check_timers(self) -> None:
        """Abort the transactions the clock says have timed out, and write the markers of
        prepared ones whose markers failed."""
        now = self._ctx.clock.time_ms()
        for txn in list(self._txns.values()):
            try:
                if txn.state == ONGOING and now - txn.start_ms > txn.timeout_ms:
                    self._bump_epoch(txn)  # fences the producer, as Kafka's abort on timeout does
                    self._complete(txn, commit=False)
                elif txn.state in (PREPARE_COMMIT, PREPARE_ABORT):
                    self._write_markers(txn)
            except LogstoreError as exc:
                logger.warning("completing transaction %r failed, tried again in %ss: %s",
                               txn.transactional_id, TIMEOUT_CHECK_S, exc)

    def _bump_epoch(self, txn: TxnMetadata) -> None:
        if txn.producer_epoch >= MAX_EPOCH:
            txn.producer_id, txn.producer_epoch = self._ids.allocate(), 0
        else:
            txn.producer_epoch += 1

    # ------------------------------------------------------------------ requests

    def _validate(self, txn_id: str, producer_id: int, producer_epoch: int) -> tuple[TxnMetadata | None, int]:
        if self.coordinator_error(txn_id) != ec.NONE:
            return None, self.coordinator_error(txn_id)
        txn = self._txns.get(txn_id)
        if txn is None or txn.producer_id != producer_id:
            return None, ec.INVALID_PRODUCER_ID_MAPPING
        if txn.producer_epoch != producer_epoch:
            return None, ec.PRODUCER_FENCED if producer_epoch < txn.producer_epoch else ec.INVALID_PRODUCER_EPOCH
        if txn.state in (PREPARE_COMMIT, PREPARE_ABORT):
            return None, ec.CONCURRENT_TRANSACTIONS
        return txn, ec.NONE

    def init_producer_id(self, transactional_id: str | None, timeout_ms: int, producer_id: int,
                         producer_epoch: int) -> tuple[int, int, int]:
        """InitProducerId: (error, producer id, epoch). Without a transactional id, a fresh id for
        an idempotent producer; with one, its producer fenced to the next epoch, a transaction
        left open aborted first."""
        if transactional_id is None:
            try:
                return ec.NONE, self._ids.allocate(), 0
            except LogstoreError as exc:  # a cluster's broker waiting for its block of ids
                return ec.for_exception(exc), -1, -1
        if not transactional_id:
            return ec.INVALID_REQUEST, -1, -1
        if self.coordinator_error(transactional_id) != ec.NONE:
            return self.coordinator_error(transactional_id), -1, -1
        if not 0 < timeout_ms <= self._ctx.config.transaction_max_timeout_ms:
            return ec.INVALID_TRANSACTION_TIMEOUT, -1, -1
        txn = self._txns.get(transactional_id)
        try:
            if txn is None:
                txn = TxnMetadata(transactional_id, self._ids.allocate(), 0, timeout_ms)
            else:
                if producer_id >= 0 and (producer_id, producer_epoch) != (txn.producer_id, txn.producer_epoch):
                    return ec.PRODUCER_FENCED, -1, -1
                if txn.state in (PREPARE_COMMIT, PREPARE_ABORT):  # its markers first, as in Kafka
                    return ec.CONCURRENT_TRANSACTIONS, -1, -1
                if txn.state == ONGOING:
                    self._bump_epoch(txn)
                    self._complete(txn, commit=False)
                    if txn.state == PREPARE_ABORT:  # markers on their way to other nodes
                        return ec.CONCURRENT_TRANSACTIONS, -1, -1
                self._bump_epoch(txn)
                txn.timeout_ms = timeout_ms
            txn.state, txn.partitions, txn.start_ms = EMPTY, set(), -1
            self._store(txn)
        except LogstoreError as exc:
            return ec.for_exception(exc), -1, -1
        self._txns[txn.transactional_id] = txn
        return ec.NONE, txn.producer_id, txn.producer_epoch

    def _add(self, txn: TxnMetadata, partitions: set[tuple[str, int]]) -> int:
        if txn.state != ONGOING:
            txn.state, txn.start_ms = ONGOING, self._ctx.clock.time_ms()
        txn.partitions |= partitions
        try:
            self._store(txn)
        except LogstoreError as exc:
            return ec.for_exception(exc)
        return ec.NONE

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       wanted: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """AddPartitionsToTxn: each partition's error; none is added if one is unknown."""
        txn, error = self._validate(transactional_id, producer_id, producer_epoch)
        if txn is None:
            return {tp: error for tp in wanted}
        unknown = {tp for tp in wanted if not self._ctx.partition_exists(*tp)}
        if unknown:
            return {tp: ec.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ec.OPERATION_NOT_ATTEMPTED for tp in wanted}
        error = self._add(txn, set(wanted))
        return {tp: error for tp in wanted}

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> int:
        """AddOffsetsToTxn: the group's __consumer_offsets partition joins the transaction."""
        txn, error = self._validate(transactional_id, producer_id, producer_epoch)
        if txn is not None:
            error = self._add(txn, {(OFFSETS_TOPIC, self._groups.offsets_partition(group_id))})
        return error

    def end(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool) -> int:
        """EndTxn: decide, then write the markers (the answer does not wait for them, as in Kafka)."""
        txn, error = self._validate(transactional_id, producer_id, producer_epoch)
        if txn is None:
            return error
        done = COMPLETE_COMMIT if committed else COMPLETE_ABORT
        if txn.state == ONGOING:
            try:
                txn.state = PREPARE_COMMIT if committed else PREPARE_ABORT
                self._store(txn)
            except LogstoreError as exc:
                txn.state = ONGOING
                return ec.for_exception(exc)
            self._try_markers(txn)
        elif txn.state != done:
            return ec.INVALID_TXN_STATE
        return ec.NONE

    def commit_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str,
                       member_id: str, generation: int, instance_id: str | None,
                       entries: list[OffsetCommitEntry]) -> tuple[int, dict[tuple[str, int], int]]:
        """TxnOffsetCommit: the error of the whole commit and those of single partitions; the
        offsets become visible with the transaction's COMMIT marker."""
        offsets, errors = self._groups.offsets_to_commit(entries)
        if not group_id or not group_id_fits(group_id):
            txn, error = None, ec.INVALID_GROUP_ID
        elif self._groups.coordinator_error(group_id) != ec.NONE:  # sent to the group's coordinator
            txn, error = None, self._groups.coordinator_error(group_id)
        elif not self.coordinated.owns(transactional_id):  # another node's transaction: the log checks the epoch
            txn, error = None, ec.NONE
        else:
            txn, error = self._validate(transactional_id, producer_id, producer_epoch)
        if txn is not None and (OFFSETS_TOPIC, self._groups.offsets_partition(group_id)) not in txn.partitions:
            error = ec.INVALID_TXN_STATE
        if error == ec.NONE and member_id:
            error = self._groups.check_member(group_id, member_id, generation, instance_id)
        if error == ec.NONE and offsets:
            error = self._groups.commit(group_id, offsets, producer_id=producer_id, producer_epoch=producer_epoch)
        return error, errors

    async def close(self) -> None:
        """Stop the timeout task, the loads and the markers under way."""
        for task in [self._timeouts, *self._sending.values()]:
            if task is not None:
                task.cancel()
        self.coordinated.close()
        await self._markers.close()

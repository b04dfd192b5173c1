"""The transaction coordinator: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn
and TxnOffsetCommit, as Kafka's TransactionCoordinator on one node. Each transaction's state
is a TransactionLog record in `__transaction_state`; COMMIT/ABORT markers go through the
engine's control-batch path, so read_committed fetches stop at the last stable offset."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from logstore.errors import LogstoreError
from logstore.internal_topics.coordinator_schemas import OFFSETS_TOPIC, TRANSACTION_TOPIC
from logstore.internal_topics.records import (
    decode_transaction_log_record,
    encode_transaction_log_record,
)
from logstore.log import Log
from logstore.records.control import build_control_batch
from logstore.server import error_codes as ec
from logstore.server.context import ServerContext
from logstore.server.group_log import append_records, partition_for
from logstore.server.groups import GroupCoordinator, group_id_fits
from logstore.server.producer_ids import ProducerIdManager
from logstore.server.protocol import Request

EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT = 0, 1, 2, 3, 4, 5
TXN_LOG_VERSION = 0
COORDINATOR_EPOCH = 0
MAX_EPOCH = 32_766  # Short.MAX_VALUE - 1: past it a producer gets a new id
TIMEOUT_CHECK_S = 1.0
READ_CHUNK_BYTES = 8 * 1024 * 1024

logger = logging.getLogger("logstore.server")


@dataclass
class TxnMetadata:
    """One transactional id's producer and its current transaction."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int = EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    update_ms: int = -1


class TransactionCoordinator:
    """Every transactional id of the node; also hands out ids to idempotent producers."""

    def __init__(self, ctx: ServerContext, groups: GroupCoordinator, producer_ids: ProducerIdManager):
        self._ctx = ctx
        self._groups = groups
        self._ids = producer_ids
        self._txns: dict[str, TxnMetadata] = {}
        self._partitions = ctx.topics.coordinator_partition_count(TRANSACTION_TOPIC,
                                                                  ctx.config.transaction_state_log_num_partitions)
        self._timeouts: asyncio.Task | None = None
        for p in range(self._partitions):
            log = ctx.manager.get(TRANSACTION_TOPIC, p)
            if log is not None:
                self._load(log)
        for txn in self._txns.values():
            self._ids.observe(txn.producer_id)
            if txn.state in (PREPARE_COMMIT, PREPARE_ABORT):  # a crash between prepare and complete
                self._try_markers(txn)

    # ------------------------------------------------------------------ storage

    def _load(self, log: Log) -> None:
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            batches = list(log.read(offset, READ_CHUNK_BYTES).batches())
            if not batches:
                break
            for batch in batches:
                offset = batch.next_offset
                if batch.is_control:
                    continue
                for r in batch.records():
                    record = decode_transaction_log_record(r.key, r.value)
                    txn_id = record.key["transactionalId"]
                    if record.value is None:
                        self._txns.pop(txn_id, None)
                        continue
                    v = record.value
                    parts = {(t["topic"], p) for t in v["transactionPartitions"] or [] for p in t["partitionIds"]}
                    self._txns[txn_id] = TxnMetadata(txn_id, v["producerId"], v["producerEpoch"],
                                                     v["transactionTimeoutMs"], v["transactionStatus"], parts,
                                                     v["transactionStartTimestampMs"],
                                                     v["transactionLastUpdateTimestampMs"])

    def _store(self, txn: TxnMetadata) -> None:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(txn.partitions):
            by_topic.setdefault(topic, []).append(partition)
        txn.update_ms = self._ctx.clock.time_ms()
        record = encode_transaction_log_record({"transactionalId": txn.transactional_id}, TXN_LOG_VERSION, {
            "producerId": txn.producer_id, "producerEpoch": txn.producer_epoch,
            "transactionTimeoutMs": txn.timeout_ms, "transactionStatus": txn.state,
            "transactionPartitions": [{"topic": t, "partitionIds": ps} for t, ps in by_topic.items()],
            "transactionLastUpdateTimestampMs": txn.update_ms, "transactionStartTimestampMs": txn.start_ms})
        self._ctx.topics.ensure_internal(TRANSACTION_TOPIC, self._partitions)
        log = self._ctx.topics.log(TRANSACTION_TOPIC, partition_for(txn.transactional_id, self._partitions))
        append_records(log, [record], txn.update_ms)

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
        marker leaves it prepared, for _abort_timed_out to try again (Kafka retries markers
        until they are written): its partitions' last stable offset waits for them."""
        commit = txn.state == PREPARE_COMMIT
        now = self._ctx.clock.time_ms()
        for topic, partition in sorted(txn.partitions):
            log = self._ctx.topics.log(topic, partition)
            if log is None:
                continue
            marker = build_control_batch("commit" if commit else "abort", producer_id=txn.producer_id,
                                         producer_epoch=txn.producer_epoch, coordinator_epoch=COORDINATOR_EPOCH,
                                         timestamp=now)
            log.append(bytearray(marker), origin="coordinator")
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
            self._timeouts = asyncio.get_running_loop().create_task(self._abort_timed_out())

    async def _abort_timed_out(self) -> None:
        while True:
            await asyncio.sleep(TIMEOUT_CHECK_S)
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

    # ------------------------------------------------------------------ APIs

    def _validate(self, txn_id: str, producer_id: int, producer_epoch: int) -> tuple[TxnMetadata | None, int]:
        txn = self._txns.get(txn_id)
        if txn is None or txn.producer_id != producer_id:
            return None, ec.INVALID_PRODUCER_ID_MAPPING
        if txn.producer_epoch != producer_epoch:
            return None, ec.PRODUCER_FENCED if producer_epoch < txn.producer_epoch else ec.INVALID_PRODUCER_EPOCH
        if txn.state in (PREPARE_COMMIT, PREPARE_ABORT):
            return None, ec.CONCURRENT_TRANSACTIONS
        return txn, ec.NONE

    async def init_producer_id(self, req: Request) -> Any:
        body = req.body

        def answer(error: int, producer_id: int = -1, epoch: int = -1) -> Any:
            return req.response(throttle_time_ms=0, error_code=error, producer_id=producer_id, producer_epoch=epoch)

        if body.transactional_id is None:
            return answer(ec.NONE, self._ids.allocate(), 0)
        if not body.transactional_id:
            return answer(ec.INVALID_REQUEST)
        if not 0 < body.transaction_timeout_ms <= self._ctx.config.transaction_max_timeout_ms:
            return answer(ec.INVALID_TRANSACTION_TIMEOUT)
        txn = self._txns.get(body.transactional_id)
        try:
            if txn is None:
                txn = TxnMetadata(body.transactional_id, self._ids.allocate(), 0, body.transaction_timeout_ms)
            else:
                if body.producer_id >= 0 and (body.producer_id, body.producer_epoch) != (txn.producer_id,
                                                                                         txn.producer_epoch):
                    return answer(ec.PRODUCER_FENCED)
                if txn.state in (PREPARE_COMMIT, PREPARE_ABORT):  # its markers first, as in Kafka
                    return answer(ec.CONCURRENT_TRANSACTIONS)
                if txn.state == ONGOING:
                    self._bump_epoch(txn)
                    self._complete(txn, commit=False)
                self._bump_epoch(txn)
                txn.timeout_ms = body.transaction_timeout_ms
            txn.state, txn.partitions, txn.start_ms = EMPTY, set(), -1
            self._store(txn)
        except LogstoreError as exc:
            return answer(ec.for_exception(exc))
        self._txns[txn.transactional_id] = txn
        return answer(ec.NONE, txn.producer_id, txn.producer_epoch)

    def _add(self, txn: TxnMetadata, partitions: set[tuple[str, int]]) -> int:
        if txn.state != ONGOING:
            txn.state, txn.start_ms = ONGOING, self._ctx.clock.time_ms()
        txn.partitions |= partitions
        try:
            self._store(txn)
        except LogstoreError as exc:
            return ec.for_exception(exc)
        return ec.NONE

    async def add_partitions_to_txn(self, req: Request) -> Any:
        body = req.body
        wanted = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
        txn, error = self._validate(body.v3_and_below_transactional_id, body.v3_and_below_producer_id,
                                    body.v3_and_below_producer_epoch)
        errors = {tp: error for tp in wanted}
        if txn is not None:
            unknown = {tp for tp in wanted if self._ctx.partition(*tp) is None}
            if unknown:
                errors = {tp: ec.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ec.OPERATION_NOT_ATTEMPTED for tp in wanted}
            else:
                error = self._add(txn, set(wanted))
                errors = {tp: error for tp in wanted}
        cls = req.spec.response.AddPartitionsToTxnTopicResult
        by_topic: dict[str, list] = {}
        for (topic, partition), err in errors.items():
            by_topic.setdefault(topic, []).append(cls.AddPartitionsToTxnPartitionResult(
                partition_index=partition, partition_error_code=err))
        return req.response(throttle_time_ms=0, results_by_topic_v3_and_below=[
            cls(name=t, results_by_partition=rs) for t, rs in by_topic.items()])

    async def add_offsets_to_txn(self, req: Request) -> Any:
        body = req.body
        txn, error = self._validate(body.transactional_id, body.producer_id, body.producer_epoch)
        if txn is not None:
            error = self._add(txn, {(OFFSETS_TOPIC, self._groups.offsets_partition(body.group_id))})
        return req.response(throttle_time_ms=0, error_code=error)

    async def end_txn(self, req: Request) -> Any:
        body = req.body
        txn, error = self._validate(body.transactional_id, body.producer_id, body.producer_epoch)
        if txn is not None:
            done = COMPLETE_COMMIT if body.committed else COMPLETE_ABORT
            if txn.state == ONGOING:
                try:
                    txn.state = PREPARE_COMMIT if body.committed else PREPARE_ABORT
                    self._store(txn)
                except LogstoreError as exc:
                    txn.state, error = ONGOING, ec.for_exception(exc)
                else:  # decided: as in Kafka, the answer does not wait for the markers
                    self._try_markers(txn)
            elif txn.state != done:
                error = ec.INVALID_TXN_STATE
        return req.response(throttle_time_ms=0, error_code=error)

    async def txn_offset_commit(self, req: Request) -> Any:
        body = req.body
        offsets, errors = self._groups.offsets_to_commit(body.topics)
        if not body.group_id or not group_id_fits(body.group_id):
            txn, error = None, ec.INVALID_GROUP_ID
        else:
            txn, error = self._validate(body.transactional_id, body.producer_id, body.producer_epoch)
        if txn is not None and (OFFSETS_TOPIC, self._groups.offsets_partition(body.group_id)) not in txn.partitions:
            error = ec.INVALID_TXN_STATE
        if error == ec.NONE and body.member_id:
            error = self._groups.check_member(body.group_id, body.member_id, body.generation_id,
                                              body.group_instance_id)
        if error == ec.NONE and offsets:
            error = self._groups.commit(body.group_id, offsets, producer_id=body.producer_id,
                                        producer_epoch=body.producer_epoch)
        cls = req.spec.response.TxnOffsetCommitResponseTopic
        return req.response(throttle_time_ms=0, topics=[cls(name=t.name, partitions=[
            cls.TxnOffsetCommitResponsePartition(partition_index=p.partition_index,
                                                 error_code=errors.get((t.name, p.partition_index), error))
            for p in t.partitions]) for t in body.topics])

    def close(self) -> None:
        """Stop the timeout task."""
        if self._timeouts is not None:
            self._timeouts.cancel()

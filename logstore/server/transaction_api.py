"""The transaction APIs on the wire: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
EndTxn and TxnOffsetCommit, each a translation between a request's version and the
TransactionCoordinator's typed calls (Kafka's KafkaApis)."""

from __future__ import annotations

from typing import Any

from logstore.server import error_codes as ec
from logstore.server.group_api import commit_entries
from logstore.server.group_coordinator import GroupCoordinator
from logstore.server.producer_ids import ProducerIdManager
from logstore.server.protocol import Request
from logstore.server.transactions import TransactionCoordinator


class TransactionApi:
    """The transaction APIs over the node's TransactionCoordinator."""

    def __init__(self, txns: TransactionCoordinator, groups: GroupCoordinator, producer_ids: ProducerIdManager):
        self._txns = txns
        self._groups = groups  # TxnOffsetCommit waits for the ISR of the group's partition
        self._producer_ids = producer_ids

    async def init_producer_id(self, req: Request) -> Any:
        body = req.body
        await self._producer_ids.ready()  # a single node's first reads the logs' producer ids, off the loop
        error, producer_id, epoch = self._txns.init_producer_id(body.transactional_id, body.transaction_timeout_ms,
                                                                body.producer_id, body.producer_epoch)
        if error == ec.NONE and body.transactional_id is not None:
            error = await self._txns.replicated(body.transactional_id)
            if error != ec.NONE:
                producer_id, epoch = -1, -1
        return req.response(throttle_time_ms=0, error_code=error, producer_id=producer_id, producer_epoch=epoch)

    async def add_partitions_to_txn(self, req: Request) -> Any:
        body = req.body
        wanted = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
        errors = self._txns.add_partitions(body.v3_and_below_transactional_id, body.v3_and_below_producer_id,
                                           body.v3_and_below_producer_epoch, wanted)
        if all(error == ec.NONE for error in errors.values()):
            error = await self._txns.replicated(body.v3_and_below_transactional_id)
            errors = dict.fromkeys(errors, error)
        cls = req.spec.response.AddPartitionsToTxnTopicResult
        by_topic: dict[str, list] = {}
        for (topic, partition), err in errors.items():
            by_topic.setdefault(topic, []).append(cls.AddPartitionsToTxnPartitionResult(
                partition_index=partition, partition_error_code=err))
        return req.response(throttle_time_ms=0, results_by_topic_v3_and_below=[
            cls(name=t, results_by_partition=rs) for t, rs in by_topic.items()])

    async def add_offsets_to_txn(self, req: Request) -> Any:
        body = req.body
        error = self._txns.add_offsets(body.transactional_id, body.producer_id, body.producer_epoch, body.group_id)
        if error == ec.NONE:
            error = await self._txns.replicated(body.transactional_id)
        return req.response(throttle_time_ms=0, error_code=error)

    async def end_txn(self, req: Request) -> Any:
        body = req.body
        error = self._txns.end(body.transactional_id, body.producer_id, body.producer_epoch, body.committed)
        if error == ec.NONE:  # the decision held by the ISR: a successor completes it
            error = await self._txns.replicated(body.transactional_id)
        return req.response(throttle_time_ms=0, error_code=error)

    async def txn_offset_commit(self, req: Request) -> Any:
        body = req.body
        error, errors = self._txns.commit_offsets(body.transactional_id, body.producer_id, body.producer_epoch,
                                                  body.group_id, body.member_id, body.generation_id,
                                                  body.group_instance_id, commit_entries(body.topics))
        if error == ec.NONE:
            error = await self._groups.replicated(body.group_id)
        cls = req.spec.response.TxnOffsetCommitResponseTopic
        return req.response(throttle_time_ms=0, topics=[cls(name=t.name, partitions=[
            cls.TxnOffsetCommitResponsePartition(partition_index=p.partition_index,
                                                 error_code=errors.get((t.name, p.partition_index), error))
            for p in t.partitions]) for t in body.topics])

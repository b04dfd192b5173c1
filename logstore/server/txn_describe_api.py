"""The APIs `kafka-transactions.sh` reads, the way to find a hanging transaction:
DescribeProducers (a partition's active producers and their open transactions),
ListTransactions and DescribeTransactions (the coordinator's transactional ids)."""

from __future__ import annotations

from typing import Any

from logstore.server import error_codes as ec
from logstore.server.context import ServerContext
from logstore.server.coordinator_records import TxnMetadata
from logstore.server.protocol import Request
from logstore.server.transactions import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    EMPTY,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    TransactionCoordinator,
)

# Kafka's TransactionState names, as the tools print and filter them
STATE_NAMES = {EMPTY: "Empty", ONGOING: "Ongoing", PREPARE_COMMIT: "PrepareCommit", PREPARE_ABORT: "PrepareAbort",
               COMPLETE_COMMIT: "CompleteCommit", COMPLETE_ABORT: "CompleteAbort"}
KNOWN_STATES = frozenset({*STATE_NAMES.values(), "Dead", "PrepareEpochFence"})


class TxnDescribeApi:
    """Read-only views of producers and transactions."""

    def __init__(self, ctx: ServerContext, txns: TransactionCoordinator):
        self._ctx = ctx
        self._txns = txns

    async def describe_producers(self, req: Request) -> Any:
        cls = req.spec.response.TopicResponse
        entry = cls.PartitionResponse
        topics = []
        for topic in req.body.topics:
            partitions = []
            for index in topic.partition_indexes:
                log = self._ctx.topics.log(topic.name, index)
                if log is None:
                    partitions.append(entry(partition_index=index, error_code=ec.UNKNOWN_TOPIC_OR_PARTITION,
                                            error_message=None, active_producers=[]))
                    continue
                producers = [entry.ProducerState(
                    producer_id=pid, producer_epoch=state.producer_epoch, last_sequence=state.last_seq,
                    last_timestamp=state.last_timestamp, coordinator_epoch=state.coordinator_epoch,
                    current_txn_start_offset=-1 if state.current_txn_first_offset is None
                    else state.current_txn_first_offset)
                    for pid, state in log.producer_state.producers.items()]
                partitions.append(entry(partition_index=index, error_code=ec.NONE, error_message=None,
                                        active_producers=producers))
            topics.append(cls(name=topic.name, partitions=partitions))
        return req.response(throttle_time_ms=0, topics=topics)

    async def list_transactions(self, req: Request) -> Any:
        body = req.body
        states = set(body.state_filters)
        producer_ids = set(body.producer_id_filters)
        duration = body.duration_filter if req.version >= 1 else -1
        now = self._ctx.clock.time_ms()

        def listed(txn: TxnMetadata) -> bool:
            return ((not states or STATE_NAMES[txn.state] in states)
                    and (not producer_ids or txn.producer_id in producer_ids)
                    and (duration < 0 or now - txn.start_ms > duration))

        entry = req.spec.response.TransactionState
        return req.response(throttle_time_ms=0, error_code=ec.NONE,
                            unknown_state_filters=sorted(states - KNOWN_STATES),
                            transaction_states=[entry(transactional_id=t.transactional_id, producer_id=t.producer_id,
                                                      transaction_state=STATE_NAMES[t.state])
                                                for t in self._txns.transactions() if listed(t)])

    async def describe_transactions(self, req: Request) -> Any:
        cls = req.spec.response.TransactionState
        known = {t.transactional_id: t for t in self._txns.transactions()}
        states = []
        for transactional_id in req.body.transactional_ids:
            txn = known.get(transactional_id)
            if txn is None:
                error = self._txns.coordinator_error(transactional_id)
                states.append(cls(error_code=ec.TRANSACTIONAL_ID_NOT_FOUND if error == ec.NONE else error,
                                  transactional_id=transactional_id,
                                  transaction_state="", transaction_timeout_ms=0, transaction_start_time_ms=-1,
                                  producer_id=-1, producer_epoch=-1, topics=[]))
                continue
            by_topic: dict[str, list[int]] = {}
            for topic, partition in sorted(txn.partitions):
                by_topic.setdefault(topic, []).append(partition)
            states.append(cls(error_code=ec.NONE, transactional_id=transactional_id,
                              transaction_state=STATE_NAMES[txn.state], transaction_timeout_ms=txn.timeout_ms,
                              transaction_start_time_ms=txn.start_ms, producer_id=txn.producer_id,
                              producer_epoch=txn.producer_epoch,
                              topics=[cls.TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()]))
        return req.response(throttle_time_ms=0, transaction_states=states)

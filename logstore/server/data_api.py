"""The data APIs: Produce, Fetch (sessions included), ListOffsets, OffsetForLeaderEpoch and
DeleteRecords, each a thin translation between the wire and a partition (PartitionAccess)."""

from __future__ import annotations

import asyncio
import time
from typing import Any, NamedTuple

from logstore.errors import (
    LogstoreError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    RecordValidationError,
)
from logstore.file_slice import FileSlice
from logstore.server import error_codes as ec
from logstore.server.context import ServerContext
from logstore.server.fetch_request import by_topic_id, error_entry, read_fetch
from logstore.server.fetch_sessions import FetchSessionCache, FetchSessionError, SessionPartition
from logstore.server.protocol import Request

READ_COMMITTED = 1
ACKS_ALL = -1
NO_OFFSET = -1
NO_EPOCHS = (-1, -1)  # a fetch's (current leader epoch, last fetched epoch) when it sends none


class AppendOutcome(NamedTuple):
    """One partition's answer to a Produce: its error, where the records went, and with KIP-467
    the message and the (batch index, why) of each record refused."""

    error: int
    base_offset: int = NO_OFFSET
    log_append_time: int = -1
    log_start: int = -1
    message: str | None = None
    record_errors: tuple[tuple[int, str], ...] = ()


def _epoch_end_offset(entry: Any, diverging: tuple[int, int] | None) -> Any:
    """Fetch's DivergingEpoch field: None (not written) when the logs agree."""
    return None if diverging is None else entry.EpochEndOffset(epoch=diverging[0], end_offset=diverging[1])


class DataApi:
    """Produce and the reading APIs over the node's logs."""

    def __init__(self, ctx: ServerContext):
        self._ctx = ctx
        self._sessions = FetchSessionCache()

    # ------------------------------------------------------------------ produce

    async def _append(self, topic: str, partition: int, records: Any, acks: int, timeout_s: float) -> AppendOutcome:
        """One partition's append, as its Produce response reports it."""
        if topic in self._ctx.topics and self._ctx.topics.is_internal(topic):
            return AppendOutcome(ec.INVALID_TOPIC_EXCEPTION)
        target = self._ctx.partition(topic, partition)
        if target is None:
            return AppendOutcome(ec.UNKNOWN_TOPIC_OR_PARTITION)
        if acks not in (0, 1, -1):  # Kafka's ReplicaManager: the client is broken, nothing is appended
            return AppendOutcome(ec.INVALID_REQUIRED_ACKS)
        if records is None or len(records) == 0:
            return AppendOutcome(ec.INVALID_RECORD, log_start=target.log_start_offset)
        try:
            if acks == ACKS_ALL:
                target.check_acks_all()
            info = await target.append(records)
        except LogstoreError as exc:
            record_errors = exc.record_errors if isinstance(exc, RecordValidationError) else ()
            return AppendOutcome(ec.for_exception(exc), log_start=target.log_start_offset, message=str(exc),
                                 record_errors=record_errors)
        self._ctx.data.notify()  # followers' fetches waiting for data return it now, so acks=all waits one round trip
        try:
            if acks == ACKS_ALL and not await target.acknowledged(info.last_offset + 1, timeout_s):
                return AppendOutcome(ec.REQUEST_TIMED_OUT, info.first_offset, info.log_append_time,
                                     target.log_start_offset)
        except NotLeaderOrFollowerError as exc:  # the leadership moved on: the records may be truncated
            return AppendOutcome(ec.NOT_LEADER_OR_FOLLOWER, message=str(exc))
        return AppendOutcome(ec.NONE, info.first_offset, info.log_append_time, target.log_start_offset)

    async def produce(self, req: Request) -> Any:
        body = req.body
        cls = req.spec.response
        entry = cls.TopicProduceResponse.PartitionProduceResponse
        timeout_s = max(body.timeout_ms, 0) / 1000
        appends = [self._append(topic.name, p.index, p.records, body.acks, timeout_s)
                   for topic in body.topic_data for p in topic.partition_data]
        # every partition is appended before any waits for its acks=all, as Kafka's ReplicaManager does;
        # a request for one partition (a producer's usual one) is awaited without a task to gather it
        outcomes = iter([await appends[0]] if len(appends) == 1 else await asyncio.gather(*appends))
        topics = []
        for topic in body.topic_data:
            partitions = []
            for p in topic.partition_data:
                out = next(outcomes)
                partitions.append(entry(
                    index=p.index, error_code=out.error, base_offset=out.base_offset,
                    log_append_time_ms=out.log_append_time, log_start_offset=out.log_start, error_message=out.message,
                    record_errors=[entry.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=why)
                                   for i, why in out.record_errors]))
            topics.append(cls.TopicProduceResponse(name=topic.name, partition_responses=partitions))
        self._ctx.data.notify()
        if body.acks == 0:
            return None
        return req.response(responses=topics, throttle_time_ms=0)

    # ------------------------------------------------------------------ fetch

    async def _fetch_partition(self, cls: Any, topic: str, partition: int, offset: int, max_bytes: int,
                         isolation: str, min_one_batch: bool, epochs: tuple[int, int] = NO_EPOCHS) -> tuple[Any, int]:
        """The response entry of one partition and the bytes it carries (past `max_bytes` only
        for one whole first batch, with `min_one_batch`). `epochs`: the fetch's current leader
        epoch, checked first, and last fetched epoch, answered with a diverging epoch (KIP-320)."""
        entry = cls.FetchableTopicResponse.PartitionData
        target = self._ctx.partition(topic, partition)
        if target is None:
            return error_entry(cls, partition, ec.UNKNOWN_TOPIC_OR_PARTITION), 0
        diverging = None
        try:
            result = None
            target.check_leader_epoch(epochs[0])
            diverging = target.diverging_epoch(offset, epochs[1])  # then no records: the follower truncates
            if diverging is None and (max_bytes > 0 or min_one_batch):
                result = await target.read(offset, max_bytes, min_one_batch=min_one_batch,
                                           isolation=isolation)
            error = ec.NONE
        except OffsetOutOfRangeError:
            result, error = None, ec.OFFSET_OUT_OF_RANGE
        except LogstoreError as exc:
            result, error = None, ec.for_exception(exc)
        records = b"" if result is None else result.records
        aborted = None
        if isolation == "read_committed" and result is not None:
            aborted = [entry.AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
                       for a in result.aborted_transactions]
        return entry(partition_index=partition, error_code=error, high_watermark=target.high_watermark,
                     last_stable_offset=target.last_stable_offset, log_start_offset=target.log_start_offset,
                     aborted_transactions=aborted, preferred_read_replica=-1, records=records,
                     diverging_epoch=_epoch_end_offset(entry, diverging)), len(records)

    async def fetch(self, req: Request) -> Any:
        body = req.body
        cls = req.spec.response
        asked = read_fetch(req, self._ctx.topics.name_of)
        replica, epochs = asked.replica_id, asked.epochs
        # a follower (ReplicaId >= 0) reads up to the log end, a consumer up to the high watermark
        isolation = "log_end" if replica >= 0 else \
            "read_committed" if body.isolation_level == READ_COMMITTED else "high_watermark"
        try:
            session, full = self._sessions.resolve(body.session_id, body.session_epoch, asked.wanted, asked.forgotten)
        except FetchSessionError as exc:
            return req.response(throttle_time_ms=0, error_code=exc.code, session_id=0, responses=[])
        if session is None:
            targets = [(t, p, SessionPartition(o, m)) for t, p, o, m in asked.wanted]
        else:
            targets = [(t, p, s) for (t, p), s in session.partitions.items()]
        refused: set[tuple[str, int]] = set()
        if replica >= 0 and self._ctx.cluster is not None:
            # KIP-903: a fetch from an earlier incarnation of the follower is refused; what the
            # others fetched says what they hold: the high watermark may move, waking consumers
            refused = self._ctx.cluster.stale_replica_fetch(replica, asked.replica_epoch, [(t, p) for t, p, _ in targets])
            fetched = [(t, p, s.fetch_offset) for t, p, s in targets if (t, p) not in refused]
            if self._ctx.cluster.replica_fetched(replica, fetched, asked.replica_epoch):
                self._ctx.data.notify()
        deadline = time.monotonic() + max(body.max_wait_ms, 0) / 1000
        while True:
            watched = self._ctx.data.watch()
            topics, total, errors = await self._fetch_round(cls, targets, body.max_bytes, isolation, full, epochs,
                                                            refused)
            remaining = deadline - time.monotonic()
            # Kafka's ReplicaManager answers at once when no partition is asked for or min_bytes
            # (zero or negative included) is met; otherwise it waits up to max_wait_ms
            if not targets or total >= body.min_bytes or errors or remaining <= 0:
                break
            _close_records(topics)
            await self._ctx.data.wait(remaining, watched)
        if session is not None:
            _remember(targets, topics)
        topics = by_topic_id(req, topics, asked.unknown, self._ctx.topics.topic_id)
        return req.response(throttle_time_ms=0, error_code=ec.NONE,
                            session_id=session.session_id if session else 0, responses=topics)

    async def _fetch_round(self, cls: Any, targets: list, max_bytes: int, isolation: str,
                     full: bool, epochs: dict[tuple[str, int], tuple[int, int]],
                     refused: set[tuple[str, int]] = frozenset()) -> tuple[list, int, bool]:
        by_topic: dict[str, list] = {}
        total = 0
        errors = False
        budget = max(max_bytes, 0)
        for topic, partition, state in targets:
            # KIP-74, as Kafka's ReplicaManager reads: every partition, the first included, is read
            # up to min(partition_max_bytes, what the response has left); only until one partition
            # has returned data may a read go past that, by one whole batch
            limit = min(state.max_bytes, budget) if state.max_bytes > 0 else 0
            if (topic, partition) in refused:  # a stale follower incarnation (Kafka's Replica state check)
                data, size = error_entry(cls, partition, ec.NOT_LEADER_OR_FOLLOWER), 0
            else:
                data, size = await self._fetch_partition(cls, topic, partition, state.fetch_offset, limit, isolation,
                                                   min_one_batch=total == 0 and state.max_bytes > 0,
                                                   epochs=epochs.get((topic, partition), NO_EPOCHS))
            changed = (size > 0 or data.error_code != ec.NONE or data.high_watermark != state.high_watermark
                       or data.last_stable_offset != state.last_stable_offset
                       or data.log_start_offset != state.log_start_offset)
            if full or changed:
                by_topic.setdefault(topic, []).append(data)
            total += size
            budget = max(budget - size, 0)
            # as Kafka's ReplicaManager, an error or a diverging epoch is answered at once
            errors = errors or data.error_code != ec.NONE or data.diverging_epoch is not None
        return [cls.FetchableTopicResponse(topic=t, partitions=ps) for t, ps in by_topic.items()], total, errors

    # ------------------------------------------------------------------ offsets

    async def list_offsets(self, req: Request) -> Any:
        body = req.body
        cls = req.spec.response
        topics = []
        for topic in body.topics:
            partitions = []
            for p in topic.partitions:
                entry = cls.ListOffsetsTopicResponse.ListOffsetsPartitionResponse
                target = self._ctx.partition(topic.name, p.partition_index)
                if target is None:
                    partitions.append(entry(partition_index=p.partition_index,
                                            error_code=ec.UNKNOWN_TOPIC_OR_PARTITION, timestamp=-1, offset=-1))
                    continue
                error, timestamp, offset, epoch = ec.NONE, -1, -1, -1
                try:
                    found = target.offset_for_timestamp(p.timestamp)
                except ValueError:
                    found, error = None, ec.UNSUPPORTED_VERSION
                except LogstoreError as exc:  # NOT_LEADER_OR_FOLLOWER where another broker leads
                    found, error = None, ec.for_exception(exc)
                if found is not None:
                    timestamp, offset = found.timestamp, found.offset
                    epoch = -1 if found.leader_epoch is None else found.leader_epoch
                    if p.timestamp == -1:
                        committed = body.isolation_level == READ_COMMITTED
                        bound = target.last_stable_offset if committed else target.high_watermark
                        offset = min(offset, bound)
                partitions.append(entry(partition_index=p.partition_index, error_code=error, timestamp=timestamp,
                                        offset=offset, leader_epoch=epoch, old_style_offsets=[]))
            topics.append(cls.ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
        return req.response(throttle_time_ms=0, topics=topics)

    async def offset_for_leader_epoch(self, req: Request) -> Any:
        cls = req.spec.response
        topics = []
        for topic in req.body.topics:
            partitions = []
            for p in topic.partitions:
                entry = cls.OffsetForLeaderTopicResult.EpochEndOffset
                target = self._ctx.partition(topic.topic, p.partition)
                if target is None:
                    partitions.append(entry(error_code=ec.UNKNOWN_TOPIC_OR_PARTITION, partition=p.partition))
                    continue
                try:
                    epoch, end = target.end_offset_for_epoch(p.leader_epoch)
                except LogstoreError as exc:  # NOT_LEADER_OR_FOLLOWER where another broker leads
                    partitions.append(entry(error_code=ec.for_exception(exc), partition=p.partition))
                    continue
                partitions.append(entry(error_code=ec.NONE, partition=p.partition, leader_epoch=epoch,
                                        end_offset=end))
            topics.append(cls.OffsetForLeaderTopicResult(topic=topic.topic, partitions=partitions))
        return req.response(throttle_time_ms=0, topics=topics)

    async def delete_records(self, req: Request) -> Any:
        cls = req.spec.response
        topics = []
        for topic in req.body.topics:
            partitions = []
            for p in topic.partitions:
                entry = cls.DeleteRecordsTopicResult.DeleteRecordsPartitionResult
                target = self._ctx.partition(topic.name, p.partition_index)
                if target is None:
                    partitions.append(entry(partition_index=p.partition_index, low_watermark=-1,
                                            error_code=ec.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                offset = target.high_watermark if p.offset == -1 else p.offset
                try:
                    low = target.delete_records_before(offset)
                    error = ec.NONE
                except LogstoreError as exc:
                    low, error = -1, ec.for_exception(exc)
                partitions.append(entry(partition_index=p.partition_index, low_watermark=low, error_code=error))
            topics.append(cls.DeleteRecordsTopicResult(name=topic.name, partitions=partitions))
        self._ctx.data.notify()
        return req.response(throttle_time_ms=0, topics=topics)


def _close_records(topics: list) -> None:
    """Give back the descriptors of a round's FileSlices that will not be sent."""
    for topic in topics:
        for data in topic.partitions:
            if isinstance(data.records, FileSlice):
                data.records.close()


def _remember(targets: list, topics: list) -> None:
    """Keep what a session's consumer was told, so the next incremental answer holds only changes."""
    told = {(t.topic, p.partition_index): p for t in topics for p in t.partitions}
    for topic, partition, state in targets:
        data = told.get((topic, partition))
        if data is not None:
            state.high_watermark = data.high_watermark
            state.last_stable_offset = data.last_stable_offset
            state.log_start_offset = data.log_start_offset

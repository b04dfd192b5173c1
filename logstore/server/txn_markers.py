"""Transaction markers, as Kafka's TransactionMarkerChannelManager writes them: a COMMIT or
ABORT control batch on every partition of a decided transaction, at the coordinator epoch.
Partitions this node leads (every one on a single node) are marked here; in a KRaft cluster
those another node leads are sent to it by WriteTxnMarkers (API 27), which `TxnMarkerApi`
answers on the leader's side."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Collection
from typing import Any

from logstore.errors import LogstoreError, NotLeaderOrFollowerError
from logstore.log import Log
from logstore.records.control import build_control_batch
from logstore.server import error_codes as ec
from logstore.server.context import ServerContext
from logstore.server.coordinator_records import OFFSETS_TOPIC
from logstore.server.group_store import GroupStore
from logstore.server.kraft.node_channel import NodeChannel, NodeUnreachableError
from logstore.server.protocol import Request, producer

WRITE_TXN_MARKERS_VERSION = 1
MARKER_TIMEOUT_S = 30.0  # request.timeout.ms: how long a leader waits for its ISR to hold a marker

logger = logging.getLogger("logstore.server")


def leader_epoch(ctx: ServerContext, topic: str, partition: int) -> int:
    """The leader epoch a marker written here is stamped with (0 on a single node)."""
    if ctx.cluster is None:
        return 0
    info = ctx.cluster.image.topic(topic)
    state = None if info is None else info.partitions.get(partition)
    return 0 if state is None else state.leader_epoch


def write_marker(log: Log, commit: bool, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                 epoch: int, now_ms: int) -> None:
    """Append one COMMIT or ABORT marker of `producer_id`'s transaction to `log` (its leader's)."""
    marker = build_control_batch("commit" if commit else "abort", producer_id=producer_id,
                                 producer_epoch=producer_epoch, coordinator_epoch=coordinator_epoch, timestamp=now_ms)
    log.append(bytearray(marker), origin="coordinator", leader_epoch=epoch)


class MarkerSender:
    """The coordinator's side: which of a transaction's partitions are marked here and which
    go to their leaders by WriteTxnMarkers, and the sending (one connection per leader)."""

    def __init__(self, ctx: ServerContext):
        self._ctx = ctx
        self._channels: dict[int, NodeChannel] = {}

    def leaders(self, partitions: Collection[tuple[str, int]]) -> dict[int, list[tuple[str, int]]]:
        """The partitions by the node leading them (this node's id for those held here on a
        single node; -1 for those without a leader now, to try again later)."""
        ctx = self._ctx
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for topic, partition in sorted(partitions):
            if ctx.cluster is None:
                leader = ctx.node_id
            else:
                info = ctx.cluster.image.topic(topic)
                state = None if info is None else info.partitions.get(partition)
                leader = -1 if state is None else state.leader
            by_leader.setdefault(leader, []).append((topic, partition))
        return by_leader

    async def send(self, leader: int, partitions: list[tuple[str, int]], commit: bool, producer_id: int,
                   producer_epoch: int, coordinator_epoch: int) -> list[tuple[str, int]]:
        """WriteTxnMarkers to `leader` for `partitions`: those it marked (none if unreachable)."""
        address = next(((host, port) for node, host, port, _rack in self._ctx.cluster.brokers() if node == leader), None)
        if address is None:
            return []
        channel = self._channels.get(leader)
        if channel is None or (channel.host, channel.port) != address:
            if channel is not None:
                await channel.close()
            channel = self._channels[leader] = NodeChannel(*address, f"txn-coordinator-{self._ctx.node_id}")
        cls = producer.WriteTxnMarkersRequest
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        request = cls(version=WRITE_TXN_MARKERS_VERSION, markers=[cls.WritableTxnMarker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
            topics=[cls.WritableTxnMarker.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                    for t, ps in by_topic.items()], coordinator_epoch=coordinator_epoch)])
        try:
            response = await channel.send(request, WRITE_TXN_MARKERS_VERSION, producer.WriteTxnMarkersResponse)
        except NodeUnreachableError as exc:
            logger.info("markers to node %d not sent, tried again later: %s", leader, exc)
            return []
        done = []
        for marker in response.markers:
            for topic in marker.topics:
                for p in topic.partitions:
                    if p.error_code == ec.NONE:
                        done.append((topic.name, p.partition_index))
                    else:
                        logger.info("marker of %s-%d refused by node %d: %d", topic.name, p.partition_index,
                                    leader, p.error_code)
        return done

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()


class TxnMarkerApi:
    """WriteTxnMarkers on a partition's leader: each marker appended on the disk thread at the
    partition's leader epoch and answered once the ISR holds it; a marker on a
    `__consumer_offsets` partition also applies or drops the transaction's offsets."""

    def __init__(self, ctx: ServerContext, groups: GroupStore):
        self._ctx = ctx
        self._groups = groups

    async def write_txn_markers(self, req: Request) -> Any:
        cls = req.spec.response.WritableTxnMarkerResult
        results = []
        for marker in req.body.markers:
            topics = []
            for topic in marker.topics:
                partitions = [cls.WritableTxnMarkerTopicResult.WritableTxnMarkerPartitionResult(
                    partition_index=p, error_code=await self._mark(marker, topic.name, p))
                    for p in topic.partition_indexes]
                topics.append(cls.WritableTxnMarkerTopicResult(name=topic.name, partitions=partitions))
            results.append(cls(producer_id=marker.producer_id, topics=topics))
        self._ctx.data.notify()
        return req.response(markers=results)

    async def _mark(self, marker: Any, topic: str, partition: int) -> int:
        ctx = self._ctx
        access = ctx.partition(topic, partition)
        log = ctx.topics.log(topic, partition)
        if access is None or log is None:
            return ec.UNKNOWN_TOPIC_OR_PARTITION
        if access.log_end_offset < 0:  # another node leads it
            return ec.NOT_LEADER_OR_FOLLOWER
        write = functools.partial(write_marker, log, marker.transaction_result, marker.producer_id,
                                  marker.producer_epoch, marker.coordinator_epoch, leader_epoch(ctx, topic, partition),
                                  ctx.clock.time_ms())
        try:
            await asyncio.get_running_loop().run_in_executor(ctx.disk, write)
        except LogstoreError as exc:
            return ec.for_exception(exc)
        if topic == OFFSETS_TOPIC:
            self._groups.complete_transaction(marker.producer_id, marker.transaction_result)
        ctx.data.notify()
        try:
            if not await access.acknowledged(access.log_end_offset, MARKER_TIMEOUT_S):
                return ec.REQUEST_TIMED_OUT
        except NotLeaderOrFollowerError:  # the leadership moved on: the marker may be truncated
            return ec.NOT_LEADER_OR_FOLLOWER
        return ec.NONE

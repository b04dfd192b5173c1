"""Transaction markers, as Kafka's TransactionMarkerChannelManager writes them: a COMMIT or
ABORT control batch on every partition of a decided transaction, at the coordinator epoch.
Partitions this node leads (every one on a single node) are marked here; in a KRaft cluster
those another node leads are sent to it by WriteTxnMarkers (API 27), which `TxnMarkerApi`
answers on the leader's side."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Collection
from typing import Any

from logstore.errors import LogstoreError, NotLeaderOrFollowerError
from logstore.log import Log
from logstore.records.control import build_control_batch
from logstore.server import error_codes as ec
from logstore.server.context import ServerContext
from logstore.server.coordinator_records import OFFSETS_TOPIC
from logstore.server.disk_calls import on_disk
from logstore.server.group_store import GroupStore
from logstore.server.kraft.node_channel import NodeChannel, NodeUnreachableError
from logstore.server.protocol import Request, producer

WRITE_TXN_MARKERS_VERSION = 1
MARKER_TIMEOUT_S = 30.0  # request.timeout.ms: how long a leader waits for its ISR to hold a marker
SEND_TIMEOUT_S = MARKER_TIMEOUT_S + 5.0  # how long the coordinator waits for a leader's answer

logger = logging.getLogger("logstore.server")


def leader_epoch(ctx: ServerContext, topic: str, partition: int) -> int:
    """The leader epoch a marker written here is stamped with (0 on a single node)."""
    if ctx.cluster is None:
        return 0
    info = ctx.cluster.image.topic(topic)
    state = None if info is None else info.partitions.get(partition)
    return 0 if state is None else state.leader_epoch


def write_marker(log: Log, commit: bool, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                 epoch: int, now_ms: int) -> int:
    """Append one COMMIT or ABORT marker of `producer_id`'s transaction to `log` (its leader's):
    the log end offset after it."""
    marker = build_control_batch("commit" if commit else "abort", producer_id=producer_id,
                                 producer_epoch=producer_epoch, coordinator_epoch=coordinator_epoch, timestamp=now_ms)
    log.append(bytearray(marker), origin="coordinator", leader_epoch=epoch)
    return log.log_end_offset


async def mark_led(ctx: ServerContext, partitions: Collection[tuple[str, int]], commit: bool, producer_id: int,
                   producer_epoch: int, coordinator_epoch: int,
                   written: Callable[[str], None] | None = None) -> dict[tuple[str, int], int]:
    """Markers on `partitions` as their leader, as Kafka's WriteTxnMarkers handler writes them:
    each appended on the disk thread where this node leads it, then the ISR waits of all at once.
    Each partition's error: NONE only once its ISR holds the marker (`written(topic)` then),
    NOT_LEADER_OR_FOLLOWER where another node leads it."""
    errors: dict[tuple[str, int], int] = {}
    waits = {}
    now = ctx.clock.time_ms()
    for topic, partition in partitions:
        access = ctx.partition(topic, partition)
        log = ctx.topics.log(topic, partition)
        if access is None or log is None:
            errors[topic, partition] = ec.UNKNOWN_TOPIC_OR_PARTITION
            continue
        if access.log_end_offset < 0:  # another node leads it
            errors[topic, partition] = ec.NOT_LEADER_OR_FOLLOWER
            continue
        write = functools.partial(write_marker, log, commit, producer_id, producer_epoch, coordinator_epoch,
                                  leader_epoch(ctx, topic, partition), now)
        try:
            end = await on_disk(ctx.disk, write)
        except LogstoreError as exc:
            errors[topic, partition] = ec.for_exception(exc)
            continue
        waits[topic, partition] = access, end  # awaited together below, once every marker is written
    if waits:
        ctx.data.notify()
        for (topic, partition), error in zip(waits, await asyncio.gather(*(_held(*wait) for wait in waits.values())), strict=True):
            errors[topic, partition] = error
            if error == ec.NONE and written is not None:
                written(topic)
    return errors


async def _held(access: Any, end: int) -> int:
    """NONE once the ISR holds a marker ending at `end`, REQUEST_TIMED_OUT when it does not in
    time, NOT_LEADER_OR_FOLLOWER once the leadership moved on (the marker may be truncated)."""
    try:
        return ec.NONE if await access.acknowledged(end, MARKER_TIMEOUT_S) else ec.REQUEST_TIMED_OUT
    except NotLeaderOrFollowerError:
        return ec.NOT_LEADER_OR_FOLLOWER


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
            # named as node channels are (node_channel.sender_node): a cut link drops the markers too
            channel = self._channels[leader] = NodeChannel(*address, f"broker-{self._ctx.node_id}-txn-markers")
        cls = producer.WriteTxnMarkersRequest
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        request = cls(version=WRITE_TXN_MARKERS_VERSION, markers=[cls.WritableTxnMarker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
            topics=[cls.WritableTxnMarker.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                    for t, ps in by_topic.items()], coordinator_epoch=coordinator_epoch)])
        try:
            response = await asyncio.wait_for(
                channel.send(request, WRITE_TXN_MARKERS_VERSION, producer.WriteTxnMarkersResponse), SEND_TIMEOUT_S)
        except (NodeUnreachableError, TimeoutError) as exc:
            if isinstance(exc, TimeoutError):  # an answer still on its way would be read as the next one's
                await channel.close()
            logger.info("markers to node %d not sent, tried again later: %r", leader, exc)
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
        """Close the connections to the leaders (the next send opens them again)."""
        channels, self._channels = self._channels, {}
        for channel in channels.values():
            await channel.close()


class TxnMarkerApi:
    """WriteTxnMarkers on a partition's leader: each marker appended on the disk thread at the
    partition's leader epoch and answered once the ISR holds it; a marker on a
    `__consumer_offsets` partition then also applies or drops the transaction's offsets (Kafka's
    onTransactionCompleted, after the replicated append)."""

    def __init__(self, ctx: ServerContext, groups: GroupStore):
        self._ctx = ctx
        self._groups = groups

    async def write_txn_markers(self, req: Request) -> Any:
        cls = req.spec.response.WritableTxnMarkerResult
        markers = req.body.markers
        marked = await asyncio.gather(*(self._mark(marker) for marker in markers))
        results = []
        for marker, errors in zip(markers, marked, strict=True):
            topics = [cls.WritableTxnMarkerTopicResult(name=topic.name, partitions=[
                cls.WritableTxnMarkerTopicResult.WritableTxnMarkerPartitionResult(
                    partition_index=p, error_code=errors[topic.name, p]) for p in topic.partition_indexes])
                for topic in marker.topics]
            results.append(cls(producer_id=marker.producer_id, topics=topics))
        self._ctx.data.notify()
        return req.response(markers=results)

    async def _mark(self, marker: Any) -> dict[tuple[str, int], int]:
        def written(topic: str) -> None:
            if topic == OFFSETS_TOPIC:
                self._groups.complete_transaction(marker.producer_id, marker.transaction_result)

        partitions = [(topic.name, p) for topic in marker.topics for p in topic.partition_indexes]
        return await mark_led(self._ctx, partitions, marker.transaction_result, marker.producer_id,
                              marker.producer_epoch, marker.coordinator_epoch, written)

"""Followers copy their leaders' records over Kafka's protocol (Kafka's ReplicaFetcherThread,
reduced): for every partition placed on this broker and led by another, Fetch (v17: topics by id)
from the leader as replica `node_id` at its broker epoch (ReplicaState, KIP-903), with the
current leader epoch and the last fetched epoch, and append what comes
keeping its offsets and epochs. Where the leader answers that the follower's log diverges from
its own (DivergingEpoch, KIP-320) the follower truncates there and fetches again, as Kafka's
followers do; a log without epochs first asks the leader (OffsetForLeaderEpoch), which cuts it
back to its high watermark.

One task per leader broker, each fetching all of that leader's partitions in one request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from concurrent.futures import Executor
from typing import NamedTuple

from logstore.clean_shutdown import NO_BROKER_EPOCH
from logstore.epoch import UNDEFINED_EPOCH
from logstore.errors import CorruptRecordError, InvalidRecordError
from logstore.log import Log
from logstore.replication.follower import truncation_offset
from logstore.replication.partition import EpochEndOffset
from logstore.server import error_codes as ec
from logstore.server.disk_calls import on_disk
from logstore.server.kraft.metadata_image import MetadataImage
from logstore.server.kraft.node_channel import NodeChannel, NodeUnreachableError
from logstore.server.protocol import consumer

log = logging.getLogger("logstore.server")
FETCH_VERSION, EPOCH_VERSION = 17, 4  # Kafka 4.0's: topics by id, the broker epoch in ReplicaState
FETCH_MAX_WAIT_MS = 500
FETCH_MAX_BYTES = 8 * 1024 * 1024
PARTITION_MAX_BYTES = 1024 * 1024
RETRY_S = 0.1


class Followed(NamedTuple):
    """A partition this broker follows: its local log and the leadership it follows."""

    topic: str
    partition: int
    log: Log
    leader_epoch: int


class _Epochs(NamedTuple):
    """What replication.follower.truncation_offset reads of a partition: its log and epochs."""

    log: Log
    epochs: object


def _last_fetched_epoch(log: Log) -> int:
    """The epoch of the follower's last batch, which the leader checks its own log against."""
    latest = log.leader_epoch_cache.latest_epoch()
    return UNDEFINED_EPOCH if latest is None else latest


class ReplicaFetcher:
    """The follower side of broker `node_id`: `image` says who leads what; `local_log(topic,
    partition)` gives this broker's log of a partition (None when not placed here); `listener`
    is the listener name leaders are reached on; `disk` runs appends and truncations."""

    def __init__(self, node_id: int, image: MetadataImage, local_log: Callable[[str, int], Log | None],
                 listener: str, disk: Executor, broker_epoch: Callable[[], int] = lambda: NO_BROKER_EPOCH):
        self.node_id = node_id
        self._broker_epoch = broker_epoch
        self._image = image
        self._local_log = local_log
        self._listener = listener
        self._disk = disk
        self._tasks: dict[int, asyncio.Task] = {}
        self._channels: dict[int, NodeChannel] = {}
        self._truncated: dict[tuple[str, int], int] = {}  # partition -> leader epoch reconciled with
        self._closed = False

    def followed(self, leader: int) -> list[Followed]:
        """The partitions placed here that `leader` leads now."""
        out = []
        for info in list(self._image.topics.values()):
            for index, p in sorted(info.partitions.items()):
                if p.leader == leader and leader != self.node_id and self.node_id in p.replicas:
                    local = self._local_log(info.name, index)
                    if local is not None:
                        out.append(Followed(info.name, index, local, p.leader_epoch))
        return out

    def update(self) -> None:
        """Start fetching from every leader of a partition placed here (after each metadata
        replay); nothing once closed (a broker shutting down still replays the metadata)."""
        if self._closed:
            return
        leaders = {p.leader for info in list(self._image.topics.values()) for p in info.partitions.values()
                   if p.leader >= 0 and p.leader != self.node_id and self.node_id in p.replicas}
        loop = asyncio.get_running_loop()
        for leader in leaders:
            task = self._tasks.get(leader)
            if task is None or task.done():
                self._tasks[leader] = loop.create_task(self._follow(leader))

    async def _follow(self, leader: int) -> None:
        while True:
            followed = self.followed(leader)
            if not followed:
                return
            channel = self._channel(leader)
            if channel is None:
                await asyncio.sleep(RETRY_S)
                continue
            try:
                unreconciled = [f for f in followed if f.log.leader_epoch_cache.latest_epoch() is None
                                and self._truncated.get((f.topic, f.partition)) != f.leader_epoch]
                if unreconciled:
                    await self._truncate(channel, unreconciled)
                elif not await self._fetch(channel, followed):
                    await asyncio.sleep(RETRY_S)  # a leader epoch the leader does not share: metadata first
            except NodeUnreachableError as exc:
                log.info("broker %d: fetching from broker %d failed: %s", self.node_id, leader, exc)
                await asyncio.sleep(RETRY_S)

    def _channel(self, leader: int) -> NodeChannel | None:
        info = self._image.brokers.get(leader)
        endpoint = None if info is None else next((e for e in info.endpoints if e["name"] == self._listener), None)
        if endpoint is None:
            return None
        channel = self._channels.get(leader)
        if channel is None or (channel.host, channel.port) != (endpoint["host"], endpoint["port"]):
            channel = self._channels[leader] = NodeChannel(endpoint["host"], endpoint["port"],
                                                           f"replica-fetcher-{self.node_id}")
        return channel

    async def _truncate(self, channel: NodeChannel, followed: list[Followed]) -> None:
        """Reconcile logs without epochs with their leader (OffsetForLeaderEpoch), cutting what diverged."""
        cls = consumer.OffsetForLeaderEpochRequest
        topics: dict[str, list] = {}
        for f in followed:
            topics.setdefault(f.topic, []).append(cls.OffsetForLeaderTopic.OffsetForLeaderPartition(
                partition=f.partition, current_leader_epoch=f.leader_epoch, leader_epoch=UNDEFINED_EPOCH))
        request = cls(version=EPOCH_VERSION, replica_id=self.node_id, topics=[
            cls.OffsetForLeaderTopic(topic=t, partitions=ps) for t, ps in topics.items()])
        response = await channel.send(request, EPOCH_VERSION, consumer.OffsetForLeaderEpochResponse)
        answers = {(t.topic, p.partition): p for t in response.topics for p in t.partitions}
        for f in followed:
            answer = answers.get((f.topic, f.partition))
            if answer is None or answer.error_code != ec.NONE:
                continue
            await self._truncate_by(f, EpochEndOffset(answer.leader_epoch, answer.end_offset))
            self._truncated[(f.topic, f.partition)] = f.leader_epoch

    async def _truncate_by(self, f: Followed, leader: EpochEndOffset) -> None:
        """Cut `f`'s log where it parts from the leader's (epoch, end offset) (Kafka's
        getOffsetTruncationState; an incomplete cut is finished by the next fetch's answer)."""
        offset, _done = truncation_offset(leader, _Epochs(f.log, f.log.leader_epoch_cache))
        await on_disk(self._disk, f.log.truncate_to, offset)

    async def _fetch(self, channel: NodeChannel, followed: list[Followed]) -> bool:
        """One Fetch of every followed partition of one leader, appended as follower; False when
        the leader refused a partition's leader epoch (fenced or not known there yet), does not
        know the partition yet, or took this fetch for an earlier incarnation's."""
        cls = consumer.FetchRequest
        topics: dict[uuid.UUID, list] = {}
        names: dict[uuid.UUID, str] = {}
        for f in followed:
            info = self._image.topic(f.topic)
            if info is None:
                continue
            names[info.topic_id] = f.topic
            topics.setdefault(info.topic_id, []).append(cls.FetchTopic.FetchPartition(
                partition=f.partition, current_leader_epoch=f.leader_epoch, fetch_offset=f.log.log_end_offset,
                last_fetched_epoch=_last_fetched_epoch(f.log),
                log_start_offset=f.log.log_start_offset, partition_max_bytes=PARTITION_MAX_BYTES))
        request = cls(version=FETCH_VERSION, max_wait_ms=FETCH_MAX_WAIT_MS, min_bytes=1,
                      replica_state=cls.ReplicaState(replica_id=self.node_id, replica_epoch=self._broker_epoch()),
                      max_bytes=FETCH_MAX_BYTES, isolation_level=0, session_id=0, session_epoch=-1,
                      topics=[cls.FetchTopic(topic_id=t, partitions=ps) for t, ps in topics.items()],
                      forgotten_topics_data=[], rack_id="")
        response = await channel.send(request, FETCH_VERSION, consumer.FetchResponse)
        by_key = {(f.topic, f.partition): f for f in followed}
        agreed = True
        for topic in response.responses:
            for p in topic.partitions:
                f = by_key.get((names.get(topic.topic_id), p.partition_index))
                if f is None:
                    continue
                if p.error_code == ec.OFFSET_OUT_OF_RANGE:
                    self._truncated.pop((f.topic, f.partition), None)  # reconcile again with the leader
                elif p.error_code in (ec.FENCED_LEADER_EPOCH, ec.UNKNOWN_LEADER_EPOCH, ec.NOT_LEADER_OR_FOLLOWER,
                                      ec.UNKNOWN_TOPIC_ID, ec.UNKNOWN_TOPIC_OR_PARTITION):
                    agreed = False
                elif p.error_code == ec.NONE and p.diverging_epoch is not None:
                    await self._truncate_by(f, EpochEndOffset(p.diverging_epoch.epoch, p.diverging_epoch.end_offset))
                elif p.error_code == ec.NONE:
                    if p.records:
                        await self._append(f, bytes(p.records))
                    # a follower's high watermark is the leader's, as far as it has the records
                    f.log.high_watermark_follows_log_end = False
                    f.log.high_watermark = min(p.high_watermark, f.log.log_end_offset)
        return agreed

    async def _append(self, f: Followed, records: bytes) -> None:
        try:
            await on_disk(self._disk, f.log.append_as_follower, records)
        except (InvalidRecordError, CorruptRecordError) as exc:
            log.error("broker %d: records fetched for %s-%d refused: %s", self.node_id, f.topic, f.partition, exc)
            self._truncated.pop((f.topic, f.partition), None)

    async def close(self) -> None:
        """Stop every fetch and close the connections to the leaders."""
        self._closed = True
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        for channel in self._channels.values():
            with contextlib.suppress(Exception):
                await channel.close()

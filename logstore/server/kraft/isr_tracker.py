"""A leader's view of its followers and the ISR changes it asks for (Kafka's Partition
maybeShrinkIsr / maybeExpandIsr / maybeIncrementLeaderHW with its AlterPartitionManager,
reduced): a follower that has not caught up with the leader's log end for
`replica.lag.time.max.ms` (on the node's clock) leaves the ISR, one that reaches the high
watermark joins it again, each change sent to the controller as AlterPartition. The ISR in force
is the metadata's once the controller has recorded the change; meanwhile a pending addition
already counts for the high watermark (KIP-497's maximal ISR), a pending removal not yet."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from logstore.clean_shutdown import NO_BROKER_EPOCH
from logstore.clock import Clock
from logstore.log import Log
from logstore.server import error_codes as ec
from logstore.server.kraft.metadata_image import MetadataImage, PartitionInfo, TopicInfo
from logstore.server.kraft.node_channel import NodeChannel, NodeUnreachableError
from logstore.server.messages.controller_apis import AlterPartitionRequest, AlterPartitionResponse

log = logging.getLogger("logstore.server")
ALTER_PARTITION_VERSION = 3
Key = tuple[str, int]  # (topic, partition)


@dataclass
class FollowerProgress:
    """Kafka's Replica state, as the leader sees one follower: what it fetched and when it was last caught up."""

    last_caught_up_ms: int
    log_end_offset: int = -1
    last_fetch_leader_end: int = -1
    last_fetch_ms: int = -1
    broker_epoch: int = NO_BROKER_EPOCH  # the follower's registration its latest Fetch named (v15+)

    def fetched(self, offset: int, leader_end: int, now: int) -> None:
        """Kafka's Replica.updateFetchState: caught up when it fetched at the leader's log end, or
        at least at the log end of its previous fetch (caught up as of that fetch)."""
        if offset >= leader_end:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now)
        elif offset >= self.last_fetch_leader_end:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset, self.last_fetch_leader_end, self.last_fetch_ms = offset, leader_end, now


def under_min_isr(image: MetadataImage, state: PartitionInfo, log_: Log) -> bool:
    """Whether KIP-966 holds the high watermark back: ELR on and the ISR below min.insync.replicas
    (what is committed then stays on enough replicas for the ELR to hold it)."""
    return image.eligible_leader_replicas_enabled and len(state.isr) < log_.config.min_insync_replicas


class IsrTracker:
    """Followers' progress and ISR changes of the partitions broker `node_id` leads; `logs`
    gives its logs, `broker_epoch()` its registration, AlterPartition goes to `controller`."""

    def __init__(self, node_id: int, image: MetadataImage, logs: Callable[[str, int], Log | None], clock: Clock,
                 controller: tuple[str, int], broker_epoch: Callable[[], int]):
        self.node_id = node_id
        self._image = image
        self._logs = logs
        self._clock = clock
        self._broker_epoch = broker_epoch
        self._channel = NodeChannel(*controller, f"broker-{node_id}-alter-partition")
        self._progress: dict[Key, tuple[int, dict[int, FollowerProgress]]] = {}  # by leader epoch
        self._pending: dict[Key, tuple[int, frozenset[int]]] = {}  # partition epoch sent at, ISR asked
        self._sending: set[asyncio.Task] = set()

    def _led(self, topic: str, partition: int) -> tuple[TopicInfo, PartitionInfo, Log] | None:
        info = self._image.topic(topic)
        state = None if info is None else info.partitions.get(partition)
        log_ = self._logs(topic, partition)
        if state is None or log_ is None or state.leader != self.node_id:
            return None
        return info, state, log_

    def _followers(self, key: Key, state: PartitionInfo) -> dict[int, FollowerProgress]:
        """The progress of the partition's followers in this leadership (reset with each epoch:
        ISR members count as caught up when it began, as Kafka's makeLeader sets them)."""
        epoch, followers = self._progress.get(key, (None, {}))
        if epoch != state.leader_epoch:
            followers = {}
            self._progress[key] = (state.leader_epoch, followers)
        now = self._clock.time_ms()
        for replica in state.replicas:
            if replica != self.node_id and replica not in followers:
                followers[replica] = FollowerProgress(now if replica in state.isr else 0)
        return followers

    def fetched_offsets(self, topic: str, partition: int) -> dict[int, int]:
        """Where each follower of a partition led here fetched from last (-1: not yet)."""
        led = self._led(topic, partition)
        if led is None:
            return {}
        return {r: p.log_end_offset for r, p in self._followers((topic, partition), led[1]).items()}

    def _asked(self, key: Key, state: PartitionInfo) -> frozenset[int] | None:
        """The ISR an AlterPartition in flight asks for (until the metadata moves past it)."""
        pending = self._pending.get(key)
        if pending is None or pending[0] != state.partition_epoch:
            self._pending.pop(key, None)
            return None
        return pending[1]

    def stale(self, replica: int, broker_epoch: int, partitions: list[Key]) -> set[Key]:
        """The partitions led here whose follower `replica` fetched from a later registration
        than `broker_epoch` (Kafka's Replica check: a stale incarnation's fetch is refused)."""
        out = set()
        for topic, partition in partitions:
            led = self._led(topic, partition)
            progress = None if led is None else self._followers((topic, partition), led[1]).get(replica)
            if progress is not None and broker_epoch != NO_BROKER_EPOCH and progress.broker_epoch > broker_epoch:
                out.add((topic, partition))
        return out

    def fetched(self, replica: int, fetched: list[tuple[str, int, int]], broker_epoch: int = NO_BROKER_EPOCH) -> bool:
        """Follower `replica` (at `broker_epoch`, if its Fetch named one) fetched these (topic,
        partition, offset)s: it holds everything below each offset. Moves high watermarks, asks
        to add a follower that caught up; True when a high watermark moved."""
        moved = False
        now = self._clock.time_ms()
        for topic, partition, offset in fetched:
            led = self._led(topic, partition)
            if led is None:
                continue
            info, state, log_ = led
            progress = self._followers((topic, partition), state).get(replica)
            if progress is None:
                continue  # not a replica of this partition
            progress.fetched(offset, log_.log_end_offset, now)
            if broker_epoch != NO_BROKER_EPOCH:
                progress.broker_epoch = broker_epoch
            asked = self._asked((topic, partition), state)
            if replica not in state.isr and asked is None and offset >= log_.high_watermark and \
                    self._eligible(replica, progress):
                self._alter(info, partition, state, frozenset(state.isr) | {replica})
            moved = self._advance(topic, partition, state, log_) or moved
        return moved

    def _eligible(self, replica: int, progress: FollowerProgress) -> bool:
        """Kafka's isReplicaIsrEligible: unfenced, not shutting down and, when its fetches name a
        broker epoch, fetching from its current registration (KIP-903)."""
        info = self._image.brokers.get(replica)
        if info is None or self._image.registry.is_fenced(replica) or info.in_controlled_shutdown:
            return False
        return progress.broker_epoch in (NO_BROKER_EPOCH, info.broker_epoch)

    def _advance(self, topic: str, partition: int, state: PartitionInfo, log_: Log) -> bool:
        """Kafka's maybeIncrementLeaderHW: up to the smallest offset the (maximal) ISR holds;
        with KIP-966's ELR on, not while the ISR is below min.insync.replicas."""
        if under_min_isr(self._image, state, log_):
            return False
        members = set(state.isr) | (self._asked((topic, partition), state) or set())
        followers = self._followers((topic, partition), state)
        high = min([log_.log_end_offset] + [followers[r].log_end_offset for r in members if r in followers])
        if high > log_.high_watermark:
            log_.high_watermark = high
            return True
        return False

    async def check(self) -> bool:
        """Kafka's maybeShrinkIsr over every partition led here: followers in the ISR that have
        not caught up within `replica.lag.time.max.ms` are dropped (AlterPartition, awaited).
        True when a high watermark moved (one that the ISR as recorded now allows)."""
        now = self._clock.time_ms()
        moved, sends = False, []
        for info in list(self._image.topics.values()):
            for partition, state in list(info.partitions.items()):
                led = self._led(info.name, partition)
                if led is None:
                    continue
                log_ = led[2]
                moved = self._advance(info.name, partition, state, log_) or moved
                if self._asked((info.name, partition), state) is not None:
                    continue
                lag = log_.config.replica_lag_time_max_ms
                followers = self._followers((info.name, partition), state)
                out = {r for r in state.isr if r in followers and followers[r].log_end_offset < log_.log_end_offset
                       and now - followers[r].last_caught_up_ms > lag}
                if out:
                    sends.append(self._alter(info, partition, state, frozenset(state.isr) - out))
        await asyncio.gather(*sends)
        return moved

    def _alter(self, info: TopicInfo, partition: int, state: PartitionInfo, isr: frozenset[int]) -> asyncio.Task:
        """Send AlterPartition for `isr` (one in flight per partition)."""
        self._pending[(info.name, partition)] = (state.partition_epoch, isr)
        cls = AlterPartitionRequest
        member = cls.TopicData.PartitionData.BrokerState
        request = cls(version=ALTER_PARTITION_VERSION, broker_id=self.node_id, broker_epoch=self._broker_epoch(),
                      topics=[cls.TopicData(topic_id=info.topic_id, partitions=[cls.TopicData.PartitionData(
                          partition_index=partition, leader_epoch=state.leader_epoch,
                          partition_epoch=state.partition_epoch, leader_recovery_state=state.leader_recovery_state,
                          new_isr_with_epochs=[member(broker_id=b, broker_epoch=self._epoch_of(info.name, partition, b))
                                               for b in sorted(isr)])])])
        task = asyncio.get_running_loop().create_task(self._send(info.name, partition, request))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)
        return task

    def _epoch_of(self, topic: str, partition: int, broker: int) -> int:
        """The broker epoch AlterPartition names for an ISR member (KIP-903): this broker's own,
        a follower's as its latest Fetch named it (NO_BROKER_EPOCH before Fetch v15)."""
        if broker == self.node_id:
            return self._broker_epoch()
        _epoch, followers = self._progress.get((topic, partition), (None, {}))
        progress = followers.get(broker)
        return NO_BROKER_EPOCH if progress is None else progress.broker_epoch

    async def _send(self, topic: str, partition: int, request: AlterPartitionRequest) -> None:
        try:
            response = await self._channel.send(request, ALTER_PARTITION_VERSION, AlterPartitionResponse)
        except NodeUnreachableError as exc:
            log.info("broker %d: AlterPartition for %s-%d failed: %s", self.node_id, topic, partition, exc)
            self._pending.pop((topic, partition), None)
            return
        errors = [p.error_code for t in response.topics for p in t.partitions] or [response.error_code]
        if any(e != ec.NONE for e in errors):  # the metadata will say what holds; ask again later
            log.info("broker %d: AlterPartition for %s-%d refused (error %s)", self.node_id, topic, partition, errors)
            self._pending.pop((topic, partition), None)

    async def close(self) -> None:
        for task in list(self._sending):
            task.cancel()
        await asyncio.gather(*self._sending, return_exceptions=True)
        await self._channel.close()

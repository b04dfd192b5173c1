"""What a broker of a KRaft cluster tells its clients, read from the metadata image it
replays: Metadata lists every unfenced registered broker and each partition's leader, replicas
and ISR; CreateTopics is forwarded to the active controller (as Kafka's brokers forward it); the
partitions the metadata places on this broker are opened in its data directory, and served
only where this broker leads them (at the controller's leader epoch)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from logstore.clean_shutdown import NO_BROKER_EPOCH
from logstore.epoch import check_current_leader_epoch
from logstore.errors import InvalidTopicError, NotEnoughReplicasError, NotLeaderOrFollowerError
from logstore.kafka_uuid import ZERO_UUID
from logstore.log import Log
from logstore.log_files import validate_topic
from logstore.log_results import AppendInfo, FetchResult
from logstore.server import error_codes as ec
from logstore.server.kraft.isr_tracker import IsrTracker, under_min_isr
from logstore.server.kraft.metadata_image import TOPIC_RESOURCE, MetadataImage, TopicInfo
from logstore.server.kraft.metadata_records import SUPPORTED_FEATURES
from logstore.server.kraft.node_channel import NodeChannel, NodeUnreachableError
from logstore.server.partition_access import LocalPartition, PartitionAccess
from logstore.server.protocol import Request, admin
from logstore.server.topics import INTERNAL_TOPICS, Topics

log = logging.getLogger("logstore.server")
CREATE_TOPICS_VERSION = 7


class ClusterView:
    """Broker `node_id`'s view of the cluster through `image`; `listener` is the listener name
    clients use, `controller` the address CreateTopics is forwarded to, `logs` this broker's
    log of a partition (None when it holds none)."""

    def __init__(self, image: MetadataImage, node_id: int, listener: str, controller: tuple[str, int],
                 logs: Callable[[str, int], Log | None] = lambda _topic, _partition: None, data: Any = None,
                 isr: IsrTracker | None = None, metadata_offset: Callable[[], int] = lambda: 0):
        self.image = image
        self._metadata_offset = metadata_offset  # how far this node has replayed the metadata log
        self._logs = logs
        self._data = data  # the node's DataSignal: notified, among others, when a high watermark moves
        self.node_id = node_id
        self._listener = listener
        self._channel = NodeChannel(*controller, f"broker-{node_id}-forwarding")
        self._creating: set[asyncio.Task] = set()
        self._creating_names: set[str] = set()
        self.isr = isr  # the followers and ISR changes of the partitions led here (a broker's)

    def brokers(self) -> list[tuple[int, str, int, str | None]]:
        """(id, host, port, rack) of every unfenced broker on the clients' listener."""
        out = []
        for broker_id in self.image.unfenced_brokers():
            info = self.image.brokers[broker_id]
            endpoint = next((e for e in info.endpoints if e["name"] == self._listener), None)
            if endpoint is not None:
                out.append((broker_id, endpoint["host"], endpoint["port"], info.rack))
        return out

    def feature_fields(self, cls: Any) -> dict[str, Any]:
        """ApiVersions v3's features: what this broker supports, and the levels finalized in the
        metadata it has replayed (the epoch: its metadata offset), as `kafka-features describe` reads them."""
        return {"supported_features": [cls.SupportedFeatureKey(name=name, min_version=low, max_version=high)
                                       for name, (low, high) in sorted(SUPPORTED_FEATURES.items())],
                "finalized_features_epoch": self._metadata_offset(),
                "finalized_features": [cls.FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
                                       for name, level in sorted(self.image.features.items())]}

    def metadata(self, req: Request, topic_operations: frozenset[int] | None, auto_create: bool) -> Any:
        """The Metadata response from the image (topics missing and auto-created are asked of
        the controller and answered LEADER_NOT_AVAILABLE meanwhile, as Kafka answers)."""
        cls, body = req.spec.response, req.body
        entries = []
        if body.topics is None or (req.version == 0 and not body.topics):
            entries = [self._topic(cls, info, topic_operations) for info in
                       sorted(self.image.topics.values(), key=lambda t: t.name)]
        else:
            for requested in body.topics:
                info = self._lookup(requested.name, getattr(requested, "topic_id", None))
                if info is not None:
                    entries.append(self._topic(cls, info, topic_operations))
                    continue
                error = self._missing(requested.name, auto_create)
                entries.append(cls.MetadataResponseTopic(error_code=error, name=requested.name,
                                                         topic_id=getattr(requested, "topic_id", None) or ZERO_UUID,
                                                         partitions=[]))
        brokers = [cls.MetadataResponseBroker(node_id=b, host=h, port=p, rack=r) for b, h, p, r in self.brokers()]
        return brokers, entries

    def _lookup(self, name: str | None, topic_id: uuid.UUID | None) -> TopicInfo | None:
        if name is None:
            return self.image.topics.get(topic_id) if topic_id else None
        return self.image.topic(name)

    def _missing(self, name: str | None, auto_create: bool) -> int:
        if name is None:
            return ec.UNKNOWN_TOPIC_ID
        try:
            validate_topic(name)
        except InvalidTopicError:
            return ec.INVALID_TOPIC_EXCEPTION
        if not auto_create or name in INTERNAL_TOPICS:
            return ec.UNKNOWN_TOPIC_OR_PARTITION
        self.create_in_background(name)
        return ec.LEADER_NOT_AVAILABLE

    def create_in_background(self, name: str, partitions: int = -1, replication_factor: int = -1,
                             configs: dict[str, str] | None = None) -> None:
        """Ask the controller to create `name` (-1: its defaults) with config overrides `configs`,
        unless already asking; a topic auto-created, or a coordinator topic on first FindCoordinator."""
        if name in self._creating_names:
            return
        task = asyncio.get_running_loop().create_task(self._create(name, partitions, replication_factor,
                                                                   configs or {}))
        self._creating.add(task)
        self._creating_names.add(name)
        task.add_done_callback(lambda done: (self._creating.discard(done), self._creating_names.discard(name)))

    async def _create(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]) -> None:
        cls = admin.CreateTopicsRequest
        entries = [cls.CreatableTopic.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()]
        request = cls(version=CREATE_TOPICS_VERSION, topics=[cls.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=replication_factor, assignments=[],
            configs=entries)],
            timeout_ms=30_000, validate_only=False)
        try:
            response = await self._channel.send(request, CREATE_TOPICS_VERSION, admin.CreateTopicsResponse)
        except NodeUnreachableError as exc:  # the client's next Metadata asks again
            log.info("auto-creation of %s not forwarded: %s", name, exc)
            return
        for result in response.topics:
            if result.error_code not in (ec.NONE, ec.TOPIC_ALREADY_EXISTS):
                log.info("creating %s refused: %s", name, result.error_message or result.error_code)

    def _topic(self, cls: Any, info: TopicInfo, operations: frozenset[int] | None) -> Any:
        entry = cls.MetadataResponseTopic
        registry = self.image.registry
        partitions = [entry.MetadataResponsePartition(
            error_code=ec.NONE if p.leader >= 0 else ec.LEADER_NOT_AVAILABLE, partition_index=index,
            leader_id=p.leader, leader_epoch=p.leader_epoch, replica_nodes=list(p.replicas), isr_nodes=list(p.isr),
            offline_replicas=[r for r in p.replicas if registry.is_fenced(r)])
            for index, p in sorted(info.partitions.items())]
        return entry(error_code=ec.NONE, name=info.name, topic_id=info.topic_id, is_internal=info.name in INTERNAL_TOPICS,
                     partitions=partitions, authorized_operations=operations)

    def partition_access(self, log: Log, disk: Executor) -> PartitionAccess:
        """How clients reach a partition held here: led at the epoch the controller gave, or,
        where another broker leads, refused with NOT_LEADER_OR_FOLLOWER. A partition the
        metadata does not know (a coordinator topic this node keeps alone) is led here."""
        info = self.image.topic(log.topic)
        state = None if info is None else info.partitions.get(log.partition)
        if state is None:
            return LocalPartition(log, disk)
        if state.leader != self.node_id:
            return FollowerPartition(log.topic, log.partition, state.leader, state.leader_epoch)
        # no follower to wait for: committed once appended (with KIP-966's ELR on, only while
        # one replica is all min.insync.replicas asks for)
        alone = state.isr == [self.node_id] and not under_min_isr(self.image, state, log)
        if log.high_watermark_follows_log_end != alone:
            log.high_watermark_follows_log_end = alone
            if alone:
                log.high_watermark = log.log_end_offset
        return LeaderPartition(log, disk, state.leader_epoch, len(state.isr), self._data, self.leads)

    def leads(self, topic: str, partition: int, leader_epoch: int) -> bool:
        """Whether the metadata still makes this broker the partition's leader at `leader_epoch`
        (what an append there was made at: past it, the append may have been truncated)."""
        info = self.image.topic(topic)
        state = None if info is None else info.partitions.get(partition)
        return state is not None and state.leader == self.node_id and state.leader_epoch == leader_epoch

    def replica_fetched(self, replica: int, fetched: list[tuple[str, int, int]],
                        broker_epoch: int = NO_BROKER_EPOCH) -> bool:
        """A follower (at `broker_epoch`, when its Fetch says) fetched these (topic, partition,
        offset)s: it holds everything below each offset. Where this broker leads, the high
        watermark moves up to the smallest offset the ISR holds and a follower that caught up
        rejoins the ISR (IsrTracker); True when one moved."""
        return self.isr is not None and self.isr.fetched(replica, fetched, broker_epoch)

    def stale_replica_fetch(self, replica: int, broker_epoch: int,
                            partitions: list[tuple[str, int]]) -> set[tuple[str, int]]:
        """The partitions led here that a follower fetched from a later incarnation than
        `broker_epoch` (KIP-903: this fetch comes from an earlier one, refused)."""
        return set() if self.isr is None else self.isr.stale(replica, broker_epoch, partitions)

    async def forward(self, req: Request) -> Any:
        """Send a client's request to the active controller and return its answer."""
        return await self._channel.send(req.body, req.version, req.spec.response)

    def open_hosted_partitions(self, topics: Topics) -> None:
        """Open, with the cluster's topic id and configs, every partition placed on this broker."""
        for info in list(self.image.topics.values()):
            hosted = [index for index, p in info.partitions.items() if self.node_id in p.replicas]
            if hosted:
                configs = self.image.configs.get((TOPIC_RESOURCE, info.name), {})
                topics.adopt(info.name, info.topic_id, hosted, len(info.partitions), configs)

    async def close(self) -> None:
        for task in list(self._creating):
            task.cancel()
        await asyncio.gather(*self._creating, return_exceptions=True)
        await self._channel.close()


class FollowerPartition:
    """A partition this broker holds but does not lead: every client request for it is
    answered NOT_LEADER_OR_FOLLOWER (its offsets unknown, -1), sending the client to the leader;
    one at another leader epoch than `leader_epoch` is fenced or early first, as in Kafka."""

    __slots__ = ("leader", "leader_epoch", "partition", "topic")
    log_start_offset = log_end_offset = high_watermark = last_stable_offset = -1

    def __init__(self, topic: str, partition: int, leader: int, leader_epoch: int):
        self.topic, self.partition, self.leader, self.leader_epoch = topic, partition, leader, leader_epoch

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        check_current_leader_epoch(current_leader_epoch, self.leader_epoch, f"{self.topic}-{self.partition}")

    def _refuse(self, *_args: Any, **_kwargs: Any) -> Any:
        raise NotLeaderOrFollowerError(f"{self.topic}-{self.partition} is led by broker {self.leader}, not this one")

    async def append(self, records: Any) -> AppendInfo:
        return self._refuse()

    async def read(self, offset: int, max_bytes: int, *, isolation: str, min_one_batch: bool) -> FetchResult:
        return self._refuse()

    offset_for_timestamp = end_offset_for_epoch = delete_records_before = diverging_epoch = _refuse


class LeaderPartition(LocalPartition):
    """A partition this broker leads in a cluster: acks=all appends need `min.insync.replicas`
    in the ISR (of `isr_size` now) and are answered once the high watermark passes them, which
    the node's `data` signal announces (followers' fetches move it), while `leads(topic,
    partition, epoch)` says this broker still leads at the epoch they were appended at."""

    __slots__ = ("_data", "_isr_size", "_leads")

    def __init__(self, log: Log, disk: Executor, leader_epoch: int, isr_size: int, data: Any,
                 leads: Callable[[str, int, int], bool]):
        super().__init__(log, disk, leader_epoch)
        self._isr_size = isr_size
        self._data = data
        self._leads = leads

    def check_acks_all(self) -> None:
        required = self._log.config.min_insync_replicas
        if self._isr_size < required:
            raise NotEnoughReplicasError(f"{self.topic}-{self.partition} has {self._isr_size} in-sync replicas, "
                                         f"min.insync.replicas is {required}")

    async def acknowledged(self, end_offset: int, timeout_s: float) -> bool:
        """Raises NotLeaderOrFollowerError once the leadership moved past the epoch of the
        append: a high watermark reached then may cover other records at the same offsets."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            watched = self._data.watch()
            if not self._leads(self.topic, self.partition, self._leader_epoch):
                raise NotLeaderOrFollowerError(f"{self.topic}-{self.partition} is no longer led here at leader "
                                               f"epoch {self._leader_epoch}: the append may have been truncated")
            if self._log.high_watermark >= end_offset:
                return True
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                return False
            await self._data.wait(remaining, watched)

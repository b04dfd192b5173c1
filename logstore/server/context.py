"""What every request handler shares: the node's identity and settings, its logs and topics,
and the signal that wakes fetches waiting for data."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field

from logstore.clock import Clock
from logstore.manager import LogManager
from logstore.meta_properties import MetaProperties
from logstore.server.broker_config import BrokerConfig
from logstore.server.kraft.cluster_view import ClusterView
from logstore.server.partition_access import LocalPartition, PartitionAccess
from logstore.server.protocol import ApiSpec
from logstore.server.topics import Topics


class DataSignal:
    """Wakes every waiter when new data or new offsets appear (Kafka's delayed-fetch purgatory,
    reduced to one event for one node)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        """Wake every current waiter."""
        self._event.set()
        self._event = asyncio.Event()

    def watch(self) -> asyncio.Event:
        """What the next notify sets: taken before looking for data, it also catches data that
        lands while the look (a read on the disk thread) is under way."""
        return self._event

    async def wait(self, timeout_s: float, watched: asyncio.Event | None = None) -> None:
        """Return after the next notify (or the one since `watched` was taken) or `timeout_s`,
        whichever comes first."""
        event = self._event if watched is None else watched
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), max(timeout_s, 0.0))


@dataclass
class ServerContext:
    """The node: identity, settings, logs, topics, the address clients are told to use."""

    config: BrokerConfig
    meta: MetaProperties
    manager: LogManager
    topics: Topics
    clock: Clock
    host: str = "127.0.0.1"
    port: int = 9092
    data: DataSignal = field(default_factory=DataSignal)
    # the data directory's disk thread: appends and reads leave the event loop, in order
    disk: Executor = field(default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="logstore-disk"))
    implemented: Mapping[int, ApiSpec] = field(default_factory=dict)  # the APIs served, by key
    cluster: ClusterView | None = None  # in a KRaft cluster (process.roles set): the metadata it replays

    @property
    def node_id(self) -> int:
        return self.meta.node_id

    def partition_exists(self, topic: str, partition: int) -> bool:
        """Whether the partition exists: held here, or (in a cluster) anywhere the metadata places it."""
        if self.cluster is not None:
            info = self.cluster.image.topic(topic)
            if info is not None:
                return partition in info.partitions
        return self.topics.log(topic, partition) is not None

    def partition(self, topic: str, partition: int) -> PartitionAccess | None:
        """The partition the handlers read and write, if the node has it: the one way they reach data."""
        log = self.topics.log(topic, partition)
        if log is None:
            return None
        if self.cluster is not None:  # led here at the cluster's epoch, or NOT_LEADER_OR_FOLLOWER
            return self.cluster.partition_access(log, self.disk)
        return LocalPartition(log, self.disk)

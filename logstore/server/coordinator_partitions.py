"""The partitions of one coordinator topic (`__consumer_offsets`, `__transaction_state`) and
which of them this node coordinates, as Kafka's coordinator runtime tracks them: on a single
node all of them (the topic created on first use); in a KRaft cluster those it leads, each once
its state is loaded from the log, writing at the partition's leader epoch (the coordinator
epoch) and answering only once the ISR holds a write. FindCoordinator asks it which node leads
a key's partition; in a cluster the topic is created through the controller."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TypeVar

from logstore.errors import (
    CoordinatorNotAvailableError,
    LogstoreError,
    NotCoordinatorError,
    NotEnoughReplicasError,
)
from logstore.log import Log
from logstore.server import error_codes as ec
from logstore.server.context import ServerContext
from logstore.server.coordinator_records import append_records, partition_for
from logstore.server.disk_calls import on_disk

LOAD_RETRY_S = 0.5  # how long a coordinator waits to load a partition again after a failed load

logger = logging.getLogger("logstore.server")
T = TypeVar("T")


class CoordinatorPartitions:
    """Topic `topic` of `configured` partitions (created in a cluster with `replication_factor`
    replicas and the config overrides `configs`). When this node becomes a partition's leader its
    state is loaded: `read(log)` on the disk thread, then `install(partition, what read returned)`
    on the event loop; `unload(partition)` forgets it when the node leads it no more."""

    def __init__(self, ctx: ServerContext, topic: str, configured: int, replication_factor: int,
                 read: Callable[[Log], T], install: Callable[[int, T], None], unload: Callable[[int], None],
                 configs: dict[str, str] | None = None):
        self._ctx = ctx
        self.topic = topic
        self._configured = configured
        self._replication_factor = replication_factor
        self._configs = configs or {}
        self.standalone = ctx.config.quorum is None
        self._read, self._install, self._unload = read, install, unload
        self._led: dict[int, int] = {}  # partition -> its leader epoch, the coordinator epoch
        self._loaded: set[int] = set()  # the led partitions whose state is installed
        self._loading: dict[int, asyncio.Task] = {}
        self._written: dict[int, int] = {}  # partition -> the leader epoch of its last write here (kept when
        # the partition is led elsewhere: a write waiting then must not pass at a later epoch)

    def load_standalone(self) -> None:
        """On a single node: install the state of every partition on disk now (a restart's replay)."""
        if self.standalone:
            for partition in range(self.count()):
                log = self._ctx.manager.get(self.topic, partition)
                if log is not None:
                    self._install(partition, self._read(log))

    def count(self) -> int:
        """The topic's partitions: as the cluster's metadata or the disk has them, else as
        configured (the count is fixed once created: every key is stored by a hash modulo it)."""
        cluster = self._ctx.cluster
        if not self.standalone and cluster is not None:
            info = cluster.image.topic(self.topic)
            if info is not None:
                return len(info.partitions)
        return self._ctx.topics.coordinator_partition_count(self.topic, self._configured)

    def partition_of(self, key: str) -> int:
        """The partition of a group or transactional id (a single node creates the topic now)."""
        if self.standalone:
            self._ctx.topics.ensure_internal(self.topic, self.count())
        return partition_for(key, self.count())

    def error(self, key: str) -> int:
        """NONE where this node coordinates `key`, COORDINATOR_LOAD_IN_PROGRESS while it loads
        its partition, NOT_COORDINATOR where another node does."""
        if self.standalone:
            return ec.NONE
        partition = partition_for(key, self.count())
        if partition in self._loaded:
            return ec.NONE
        return ec.COORDINATOR_LOAD_IN_PROGRESS if partition in self._led else ec.NOT_COORDINATOR

    def owns(self, key: str) -> bool:
        """Whether this node coordinates `key` now."""
        return self.error(key) == ec.NONE

    def append(self, key: str, records: list[tuple[bytes, bytes | None]], now_ms: int, *,
               producer_id: int = -1, producer_epoch: int = -1) -> int:
        """Write coordinator records of `key` to its partition, at the coordinator epoch: the
        log end offset after them (what `replicated` waits for). NotCoordinatorError where this
        node does not lead it, CoordinatorNotAvailableError while its ISR is smaller than its
        min.insync.replicas (Kafka's coordinators append with acks=-1)."""
        partition = self.partition_of(key)
        log = self.log(partition)
        if log is None or not (self.standalone or partition in self._loaded):
            raise NotCoordinatorError(f"{self.topic}-{partition} is not coordinated by this node")
        if not self.standalone:
            access = self._ctx.partition(self.topic, partition)
            if access is None or access.log_end_offset < 0:  # the metadata moved the leadership on
                raise NotCoordinatorError(f"{self.topic}-{partition} is led by another node")
            try:
                access.check_acks_all()
            except NotEnoughReplicasError as exc:
                raise CoordinatorNotAvailableError(str(exc)) from exc
        self._written[partition] = self.epoch(partition)
        append_records(log, records, now_ms, producer_id=producer_id, producer_epoch=producer_epoch,
                       leader_epoch=self._written[partition])
        return log.log_end_offset

    def log(self, partition: int) -> Log | None:
        """This node's log of `partition`, if it holds one."""
        return self._ctx.topics.log(self.topic, partition)

    async def replicated(self, key: str, end_offset: int | None = None) -> int:
        """Wait until every in-sync replica holds what the node wrote to `key`'s partition so far,
        or below `end_offset` (what `append` returned), as Kafka's coordinators append with
        acks=-1: NONE; NOT_COORDINATOR once another node leads it, or leads it no more at the
        epoch written at (the write may be truncated); COORDINATOR_NOT_AVAILABLE when the ISR
        does not catch up within offsets.commit.timeout.ms (the client retries, as Kafka maps a
        timed-out append)."""
        if self.standalone:
            return ec.NONE
        partition = partition_for(key, self.count())
        access = self._ctx.partition(self.topic, partition)
        if access is None or access.log_end_offset < 0:  # not held, or held as a follower
            return ec.NOT_COORDINATOR
        end = access.log_end_offset if end_offset is None else end_offset
        timeout_s = self._ctx.config.offsets_commit_timeout_ms / 1000
        try:
            access.check_leader_epoch(self._written.get(partition, self.epoch(partition)))
            acknowledged = await access.acknowledged(end, timeout_s)
        except LogstoreError:  # a newer leader epoch, or the leadership moved on while waiting
            return ec.NOT_COORDINATOR
        return ec.NONE if acknowledged else ec.COORDINATOR_NOT_AVAILABLE

    def leader_of(self, key: str) -> tuple[int, int]:
        """FindCoordinator's (error, node id) for `key`: this node on a single node; in a
        cluster the leader of its partition, COORDINATOR_NOT_AVAILABLE while the partition has
        none or the topic does not exist yet (its creation is asked of the controller then,
        which refuses a replication factor above the brokers registered, as Kafka's does)."""
        if self.standalone:
            return ec.NONE, self._ctx.node_id
        cluster = self._ctx.cluster
        if cluster is None:  # the node is still joining its cluster
            return ec.COORDINATOR_NOT_AVAILABLE, -1
        info = cluster.image.topic(self.topic)
        if info is None:
            cluster.create_in_background(self.topic, self._configured, self._replication_factor, self._configs)
            return ec.COORDINATOR_NOT_AVAILABLE, -1
        state = info.partitions.get(partition_for(key, len(info.partitions)))
        if state is None or state.leader < 0:
            return ec.COORDINATOR_NOT_AVAILABLE, -1
        return ec.NONE, state.leader

    # ------------------------------------------------------------------ leadership

    def epoch(self, partition: int) -> int:
        """The coordinator epoch of a partition coordinated here (0 on a single node)."""
        return self._led.get(partition, 0)

    def coordinated(self) -> list[int]:
        """The partitions loaded here (in a cluster)."""
        return sorted(self._loaded)

    def follow_metadata(self, serving: bool = True) -> None:
        """Follow what the cluster's metadata now says of the topic's leaders (`follow`); a
        node not `serving` (not registered and unfenced) leads none."""
        info = self._ctx.cluster.image.topic(self.topic)
        node_id = self._ctx.node_id
        self.follow({} if info is None or not serving else
                    {p: state.leader_epoch for p, state in info.partitions.items() if state.leader == node_id})

    def follow(self, leaders: dict[int, int]) -> None:
        """The partitions the metadata now says this node leads, with their leader epochs: newly
        led ones are loaded (read on the disk thread, then installed), ones led no more
        unloaded, and ones led at another epoch unloaded and loaded again (led elsewhere in
        between, their log may have lost writes and gained others), as Kafka's coordinators do."""
        for partition in [p for p, epoch in self._led.items() if leaders.get(p) != epoch]:
            self._resign(partition)
        for partition, epoch in leaders.items():
            if partition not in self._led:
                self._led[partition] = epoch
                self._loading[partition] = asyncio.get_running_loop().create_task(self._elected(partition))

    def _resign(self, partition: int) -> None:
        del self._led[partition]
        task = self._loading.pop(partition, None)
        if task is not None:
            task.cancel()
        if partition in self._loaded:
            self._loaded.discard(partition)
            self._unload(partition)

    async def _elected(self, partition: int) -> None:
        """Load a partition led here, again every LOAD_RETRY_S while that fails (clients are
        answered COORDINATOR_LOAD_IN_PROGRESS meanwhile: a quiet cluster brings no metadata
        change to try again on)."""
        try:
            while True:
                try:
                    log = self.log(partition)
                    if log is None:
                        raise NotCoordinatorError(f"{self.topic}-{partition} is led here but not open")
                    state = await on_disk(self._ctx.disk, self._read, log)
                    break
                except (LogstoreError, OSError) as exc:
                    logger.warning("loading %s-%d failed, trying again in %s s: %s", self.topic, partition,
                                   LOAD_RETRY_S, exc)
                    await asyncio.sleep(LOAD_RETRY_S)
        finally:
            if self._loading.get(partition) is asyncio.current_task():
                del self._loading[partition]
        self._loaded.add(partition)
        self._install(partition, state)

    def close(self) -> None:
        """Stop the loads under way."""
        for task in self._loading.values():
            task.cancel()

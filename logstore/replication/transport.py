"""Transports: how a follower reaches its leader's Partition. One interface (`Transport`) and
its in-process implementation (direct calls); brokers of a `logstore serve` cluster replicate
over Kafka's Fetch protocol instead (server.kraft.replica_fetcher).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol

from logstore.clean_shutdown import NO_BROKER_EPOCH
from logstore.errors import ReplicaNotAvailableError
from logstore.replication.partition import EpochEndOffset, FetchResponse, Partition

PartitionKey = tuple[int, str, int]  # (replica id, topic, partition)


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """A follower's fetch of one partition (Kafka's FetchRequest, one partition)."""

    topic: str
    partition: int
    replica_id: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int
    replica_epoch: int = NO_BROKER_EPOCH  # the follower's broker epoch (KIP-903's ReplicaState)


class Transport(Protocol):
    """What a follower needs from the network: fetch and OffsetsForLeaderEpoch on a leader.
    Raises ReplicaNotAvailableError when the leader cannot be reached."""

    def fetch(self, leader_id: int, request: FetchRequest) -> FetchResponse:
        """Send `request` to replica `leader_id`."""
        ...

    def offsets_for_leader_epoch(self, leader_id: int, topic: str, partition: int,
                                 current_leader_epoch: int, leader_epoch: int) -> EpochEndOffset:
        """Ask replica `leader_id` where `leader_epoch` ends in its log."""
        ...


def _serve_fetch(partition: Partition, request: FetchRequest) -> FetchResponse:
    return partition.fetch(request.replica_id, request.fetch_offset, request.max_bytes,
                           request.current_leader_epoch, request.last_fetched_epoch,
                           log_start_offset=request.log_start_offset, replica_epoch=request.replica_epoch)


class InProcessTransport:
    """Direct calls to Partitions registered under their replica id (a dead broker is one
    that is not registered)."""

    def __init__(self) -> None:
        self._partitions: dict[PartitionKey, Partition] = {}
        self._lock = threading.Lock()

    def register(self, partition: Partition) -> None:
        """Make `partition` reachable as replica `partition.replica_id`."""
        with self._lock:
            self._partitions[(partition.replica_id, partition.topic, partition.partition)] = partition

    def unregister(self, replica_id: int, topic: str, partition: int) -> None:
        """Make a replica unreachable (its broker went down)."""
        with self._lock:
            self._partitions.pop((replica_id, topic, partition), None)

    def _lookup(self, replica_id: int, topic: str, partition: int) -> Partition:
        with self._lock:
            found = self._partitions.get((replica_id, topic, partition))
        if found is None:
            raise ReplicaNotAvailableError(f"replica {replica_id} of {topic}-{partition} is not reachable")
        return found

    def fetch(self, leader_id: int, request: FetchRequest) -> FetchResponse:
        """Call the leader's Partition.fetch directly."""
        return _serve_fetch(self._lookup(leader_id, request.topic, request.partition), request)

    def offsets_for_leader_epoch(self, leader_id: int, topic: str, partition: int,
                                 current_leader_epoch: int, leader_epoch: int) -> EpochEndOffset:
        """Call the leader's Partition.offsets_for_leader_epoch directly."""
        leader = self._lookup(leader_id, topic, partition)
        return leader.offsets_for_leader_epoch(current_leader_epoch, leader_epoch)


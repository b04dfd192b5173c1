"""CreateTopics' manual replica assignment, checked as Kafka's controller checks it: partitions
0..n-1 each once, every replica a live broker and none twice, the same count everywhere."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from logstore.errors import LogstoreError


class InvalidReplicaAssignmentError(LogstoreError):
    """A manual replica assignment Kafka refuses (INVALID_REPLICA_ASSIGNMENT)."""


def assigned_partitions(assignments: Iterable[tuple[int, list[int]]], live: Collection[int]) -> int:
    """The partition count of a valid assignment of (partition index, broker ids) pairs over the
    `live` broker ids; InvalidReplicaAssignmentError naming what is wrong otherwise."""
    replicas_by_partition: dict[int, list[int]] = {}
    for partition, brokers in assignments:
        if partition in replicas_by_partition:
            raise InvalidReplicaAssignmentError(f"partition {partition} is assigned twice")
        replicas_by_partition[partition] = brokers
    count = len(replicas_by_partition)
    if sorted(replicas_by_partition) != list(range(count)):
        raise InvalidReplicaAssignmentError(
            f"partitions {sorted(replicas_by_partition)} are not a consecutive sequence from 0")
    sizes = set()
    for partition, brokers in sorted(replicas_by_partition.items()):
        if not brokers:
            raise InvalidReplicaAssignmentError(f"partition {partition} has an empty replica list")
        if len(set(brokers)) < len(brokers):
            raise InvalidReplicaAssignmentError(f"partition {partition} names a replica twice: {brokers}")
        unknown = [b for b in brokers if b not in live]
        if unknown:
            raise InvalidReplicaAssignmentError(f"partition {partition} names brokers {unknown} that are not live")
        sizes.add(len(brokers))
    if len(sizes) > 1:
        raise InvalidReplicaAssignmentError("all partitions must have the same number of replicas")
    return count

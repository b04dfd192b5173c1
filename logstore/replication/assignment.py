"""Replica assignment: spread a topic's partitions over brokers as Kafka does at topic creation.

Goals (seed 004): replicas evenly over brokers, no two replicas of a partition on one
broker, and with rack information, a partition's replicas on as many racks as possible.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from logstore.errors import InvalidReplicationError


def assign_replicas(
    n_partitions: int,
    replication_factor: int,
    brokers: Sequence[int] | Mapping[int, str | None],
    *,
    fixed_start_index: int = -1,
    start_partition_id: int = 0,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Map partition id -> replica list (first = preferred leader).

    ``brokers`` is a list of broker ids (rack-unaware) or a mapping broker id -> rack;
    when every broker has a rack the rack-aware layout is used. A negative
    ``fixed_start_index`` draws the start and shift from ``rng`` as Kafka does.
    """
    rack_of = dict(brokers) if isinstance(brokers, Mapping) else dict.fromkeys(brokers)
    _check(n_partitions, replication_factor, rack_of)
    rng = rng or random.Random()
    racks = set(rack_of.values())
    if None in racks:
        if len(racks) > 1:
            raise InvalidReplicationError("either every broker has a rack or none does")
        return _rack_unaware(n_partitions, replication_factor, sorted(rack_of),
                             fixed_start_index, start_partition_id, rng)
    return _rack_aware(n_partitions, replication_factor, rack_of,
                       fixed_start_index, start_partition_id, rng)


def _check(n_partitions: int, replication_factor: int, rack_of: Mapping[int, str | None]) -> None:
    if n_partitions <= 0:
        raise InvalidReplicationError(f"number of partitions must be > 0, got {n_partitions}")
    if replication_factor <= 0:
        raise InvalidReplicationError(f"replication factor must be > 0, got {replication_factor}")
    if replication_factor > len(rack_of):
        raise InvalidReplicationError(
            f"replication factor {replication_factor} larger than available brokers {len(rack_of)}"
        )


def _replica_index(first: int, shift: int, j: int, n_brokers: int) -> int:
    """Index of the (j+2)-th replica: a shift in 1..n-1 after the first, so never the first."""
    return (first + 1 + (shift + j) % (n_brokers - 1)) % n_brokers


def _start_and_shift(fixed_start_index: int, n: int, rng: random.Random) -> tuple[int, int]:
    if fixed_start_index >= 0:
        return fixed_start_index, fixed_start_index
    return rng.randrange(n), rng.randrange(n)


def _rack_unaware(
    n_partitions: int, rf: int, brokers: list[int], fixed: int, start_pid: int, rng: random.Random
) -> dict[int, list[int]]:
    n = len(brokers)
    start, shift = _start_and_shift(fixed, n, rng)
    result: dict[int, list[int]] = {}
    for pid in range(max(0, start_pid), max(0, start_pid) + n_partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start) % n
        result[pid] = [brokers[first]] + [brokers[_replica_index(first, shift, j, n)] for j in range(rf - 1)]
    return result


def rack_alternated_brokers(rack_of: Mapping[int, str]) -> list[int]:
    """Brokers ordered by taking one from each rack (racks and brokers sorted) in turn."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in sorted(rack_of.items()):
        by_rack.setdefault(rack, []).append(broker)
    queues = [iter(by_rack[rack]) for rack in sorted(by_rack)]
    result: list[int] = []
    while len(result) < len(rack_of):
        for queue in queues:
            broker = next(queue, None)
            if broker is not None:
                result.append(broker)
    return result


def _rack_aware(
    n_partitions: int, rf: int, rack_of: Mapping[int, str], fixed: int, start_pid: int,
    rng: random.Random,
) -> dict[int, list[int]]:
    arranged = rack_alternated_brokers(rack_of)
    n, n_racks = len(arranged), len(set(rack_of.values()))
    start, shift = _start_and_shift(fixed, n, rng)
    result: dict[int, list[int]] = {}
    for pid in range(max(0, start_pid), max(0, start_pid) + n_partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start) % n
        leader = arranged[first]
        replicas, racks_used, brokers_used = [leader], {rack_of[leader]}, {leader}
        k = 0
        while len(replicas) < rf:
            broker = arranged[_replica_index(first, shift * n_racks, k, n)]
            rack = rack_of[broker]
            # Skip a rack that already has a replica while another has none, and a broker
            # that already has one while another has none.
            if (rack not in racks_used or len(racks_used) == n_racks) and (
                broker not in brokers_used or len(brokers_used) == n
            ):
                replicas.append(broker)
                racks_used.add(rack)
                brokers_used.add(broker)
            k += 1
        result[pid] = replicas
    return result

"""Partition leader election strategies (seed 004, as Kafka's controller applies them).

Pure functions over the assigned replicas (AR), the ISR and the live brokers. Each returns
an ``Election`` whose ``leader`` is None when no replica qualifies.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Election:
    """Outcome of one election: the new leader (or None), the ISR to record, and whether unclean."""

    leader: int | None
    isr: tuple[int, ...]
    unclean: bool = False


def offline_partition_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int],
    *, unclean_leader_election_enable: bool = False,
) -> Election:
    """Leader for an offline or new partition: first live AR replica in the ISR; else, if
    unclean election is enabled, the first live AR replica (which may lack committed data)."""
    for replica in assignment:
        if replica in live and replica in isr:
            return Election(replica, tuple(r for r in isr if r in live))
    if unclean_leader_election_enable:
        for replica in assignment:
            if replica in live:
                return Election(replica, (replica,), unclean=True)
    return Election(None, tuple(isr))


def reassigned_partition_leader(
    reassignment: Sequence[int], isr: Collection[int], live: Collection[int]
) -> Election:
    """Leader after a reassignment: first replica of the new AR that is live and in the ISR."""
    for replica in reassignment:
        if replica in live and replica in isr:
            return Election(replica, tuple(isr))
    return Election(None, tuple(isr))


def preferred_replica_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int]
) -> Election:
    """The preferred (first assigned) replica, only if it is live and in the ISR."""
    if assignment and assignment[0] in live and assignment[0] in isr:
        return Election(assignment[0], tuple(isr))
    return Election(None, tuple(isr))


def controlled_shutdown_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int],
    shutting_down: Collection[int],
) -> Election:
    """Move leadership off brokers shutting down: the ISR loses them, the first remaining
    live ISR member of the AR leads."""
    new_isr = tuple(r for r in isr if r not in shutting_down)
    for replica in assignment:
        if replica in live and replica in new_isr:
            return Election(replica, new_isr)
    return Election(None, new_isr)


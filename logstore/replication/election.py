"""Partition leader election strategies (seed 004, as Kafka's controller applies them), with
Kafka 4.0's eligible leader replicas (KIP-966), the last-known ELR and unclean recovery.

Pure functions over the assigned replicas (AR), the ISR, the eligible leader replicas (ELR)
and the live brokers. A replica may lead if it is live and in the ISR, or, when the ISR is
empty, live and in the ELR (Kafka's PartitionChangeBuilder.isValidNewLeader). Each strategy
returns an ``Election`` whose ``leader`` is None when no replica qualifies.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from logstore.errors import InvalidConfigError


@dataclass(frozen=True, slots=True)
class Election:
    """Outcome of one election: the new leader (or None), the ISR to record, and whether unclean."""

    leader: int | None
    isr: tuple[int, ...]
    unclean: bool = False


def _may_lead(replica: int, isr: Collection[int], elr: Collection[int], live: Collection[int]) -> bool:
    return replica in live and (replica in isr or (not isr and replica in elr))


def _isr_led_by(leader: int, isr: Collection[int], live: Collection[int]) -> tuple[int, ...]:
    """The live ISR, or just the leader when it comes from the ELR."""
    return tuple(r for r in isr if r in live) or (leader,)


def offline_partition_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int],
    *, elr: Collection[int] = (), unclean_leader_election_enable: bool = False,
) -> Election:
    """Leader for an offline or new partition: first AR replica that may lead; else, if
    unclean election is enabled, the first live AR replica (which may lack committed data)."""
    for replica in assignment:
        if _may_lead(replica, isr, elr, live):
            return Election(replica, _isr_led_by(replica, isr, live))
    if unclean_leader_election_enable:
        for replica in assignment:
            if replica in live:
                return Election(replica, (replica,), unclean=True)
    return Election(None, tuple(isr))


def online_partition_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int], *, elr: Collection[int] = (),
    current: int | None = None,
) -> Election:
    """Kafka's online election: the `current` leader stays while it may lead (no needless
    move), else the first AR replica that may lead (`offline_partition_leader`'s clean rule)."""
    if current is not None and current in assignment and _may_lead(current, isr, elr, live):
        return Election(current, _isr_led_by(current, isr, live))
    return offline_partition_leader(assignment, isr, live, elr=elr)


def last_known_leader(
    isr: Collection[int], elr: Collection[int], last_known: Sequence[int], live: Collection[int],
) -> Election:
    """Balanced recovery without replica log answers (Kafka 4.0's last-known leader): once the
    ISR and the ELR are empty, the replica that led when the ISR emptied may lead again when it
    is back, since it held every committed record then. Unclean: the ISR restarts from it."""
    if not isr and not elr and len(last_known) == 1 and last_known[0] in live:
        return Election(last_known[0], (last_known[0],), unclean=True)
    return Election(None, tuple(isr))


def moved_leader(to: int, isr: Collection[int], live: Collection[int], *, elr: Collection[int] = ()) -> Election:
    """An operator's move of leadership to replica `to`: only to a live replica that may lead."""
    if _may_lead(to, isr, elr, live):
        return Election(to, _isr_led_by(to, isr, live))
    return Election(None, tuple(isr))


def reassigned_partition_leader(
    reassignment: Sequence[int], isr: Collection[int], live: Collection[int], *, elr: Collection[int] = (),
) -> Election:
    """Leader after a reassignment: first replica of the new AR that may lead."""
    for replica in reassignment:
        if _may_lead(replica, isr, elr, live):
            return Election(replica, _isr_led_by(replica, isr, live))
    return Election(None, tuple(isr))


def preferred_replica_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int], *, elr: Collection[int] = (),
) -> Election:
    """The preferred (first assigned) replica, only if it may lead."""
    if assignment and _may_lead(assignment[0], isr, elr, live):
        return Election(assignment[0], _isr_led_by(assignment[0], isr, live))
    return Election(None, tuple(isr))


def controlled_shutdown_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int],
    shutting_down: Collection[int], *, elr: Collection[int] = (),
) -> Election:
    """Move leadership off brokers shutting down: the ISR loses them, the first remaining AR
    replica that may lead takes over."""
    new_isr = tuple(r for r in isr if r not in shutting_down)
    staying = [r for r in live if r not in shutting_down]
    for replica in assignment:
        if _may_lead(replica, new_isr, elr, staying):
            return Election(replica, new_isr or (replica,))
    return Election(None, new_isr)


def isr_after_fencing(isr: Collection[int], fenced: Sequence[int], *, eligible_leader_replicas: bool) -> frozenset[int]:
    """The ISR once the brokers of `fenced` are gone. With ELR they all leave and the ISR may
    empty (KIP-966); without, the last member (in `fenced` order) stays, to lead on return."""
    new_isr = set(isr)
    for replica in fenced:
        if replica in new_isr and (eligible_leader_replicas or len(new_isr) > 1):
            new_isr.discard(replica)
    return frozenset(new_isr)


def eligible_leader_replicas(
    isr: Collection[int], new_isr: Collection[int], elr: Collection[int], *, min_insync_replicas: int,
    unclean_shutdown: Collection[int] = (),
) -> frozenset[int]:
    """The ELR once the ISR changes from `isr` to `new_isr` (Kafka's populateTargetElr): empty
    while the ISR holds min.insync.replicas; below that, replicas leaving the ISR join the
    ELR, and replicas back from an unclean shutdown leave it."""
    if len(new_isr) >= min_insync_replicas:
        return frozenset()
    return frozenset((set(elr) | set(isr)) - set(new_isr) - set(unclean_shutdown))


class UncleanRecoveryStrategy(StrEnum):
    """Kafka's `unclean.recovery.strategy` (KIP-966): what to do when no ISR or ELR replica may lead."""

    NONE = "None"  # stay offline (the rules before KIP-966)
    BALANCED = "Balanced"  # wait for every last-known ELR replica, elect the longest log
    AGGRESSIVE = "Aggressive"  # elect the longest log among the replicas that are up

    @classmethod
    def of(cls, value: str | UncleanRecoveryStrategy | None, *,
           unclean_leader_election_enable: bool = False) -> UncleanRecoveryStrategy:
        """The strategy named `value`; unset, `unclean.leader.election.enable` decides, as Kafka
        maps it with ELR on: true is Aggressive, false Balanced. InvalidConfigError otherwise."""
        if value is None:
            return cls.AGGRESSIVE if unclean_leader_election_enable else cls.BALANCED
        for strategy in cls:
            if str(value).lower() == strategy.value.lower():
                return strategy
        raise InvalidConfigError(f"unclean.recovery.strategy must be one of "
                                 f"{[s.value for s in cls]}, not {value!r}")


@dataclass(frozen=True, slots=True)
class ReplicaLogInfo:
    """What a replica tells the controller of its log (KIP-966's GetReplicaLogInfo)."""

    replica: int
    last_epoch: int  # the latest leader epoch in its epoch cache (-1: none)
    log_end_offset: int


def elr_after_isr_change(
    isr: Collection[int], new_isr: Collection[int], elr: Collection[int], last_known: Collection[int], *,
    min_insync_replicas: int, unclean_shutdown: Collection[int] = (),
) -> tuple[frozenset[int], frozenset[int]]:
    """The ELR and the last-known ELR once the ISR changes from `isr` to `new_isr` (KIP-966):
    `eligible_leader_replicas`, then `last_known_elr` of it."""
    new_elr = eligible_leader_replicas(isr, new_isr, elr, min_insync_replicas=min_insync_replicas,
                                       unclean_shutdown=unclean_shutdown)
    return new_elr, last_known_elr(isr, new_isr, elr, new_elr, last_known, min_insync_replicas=min_insync_replicas)


def last_known_elr(
    isr: Collection[int], new_isr: Collection[int], elr: Collection[int], new_elr: Collection[int],
    last_known: Collection[int], *, min_insync_replicas: int,
) -> frozenset[int]:
    """The last-known ELR once the ISR changes from `isr` to `new_isr` (Kafka's
    maybePopulateTargetElr): empty while the ISR holds min.insync.replicas; below that, every
    replica that was in the ISR or ELR since and is in neither now (e.g. it left the ELR after
    an unclean shutdown), so unclean recovery knows whose logs to wait for."""
    if len(new_isr) >= min_insync_replicas:
        return frozenset()
    return frozenset((set(last_known) | set(elr) | set(isr)) - set(new_isr) - set(new_elr))


def _longest_log(assignment: Sequence[int], logs: Mapping[int, ReplicaLogInfo]) -> int | None:
    """The replica whose log is longest by (last epoch, log end offset); ties go to AR order."""
    best: int | None = None
    for replica in assignment:
        info = logs.get(replica)
        if info is not None and (best is None or (info.last_epoch, info.log_end_offset) >
                                 (logs[best].last_epoch, logs[best].log_end_offset)):
            best = replica
    return best


def unclean_recovery_leader(
    assignment: Sequence[int], isr: Collection[int], elr: Collection[int], last_known: Collection[int],
    logs: Mapping[int, ReplicaLogInfo], *, strategy: UncleanRecoveryStrategy,
) -> Election:
    """KIP-966's unclean recovery for a partition no ISR or ELR replica can lead; `logs` holds
    the answers of the live replicas. Balanced acts only once the ISR and ELR are empty and
    every last-known ELR replica (every assigned one, if none is known) has answered; Aggressive
    acts on whatever answered. Either elects the longest log among the answers (a replica with
    a later epoch, or the same epoch and more offsets, holds every committed record the others
    hold); None never elects. The outcome is unclean: records may be lost."""
    if strategy is UncleanRecoveryStrategy.NONE:
        return Election(None, tuple(isr))
    if strategy is UncleanRecoveryStrategy.BALANCED:
        waiting_for = set(last_known) or set(assignment)
        if isr or elr or not waiting_for <= set(logs):
            return Election(None, tuple(isr))
    leader = _longest_log(assignment, logs)
    if leader is None:
        return Election(None, tuple(isr))
    return Election(leader, (leader,), unclean=True)

"""One partition's next state as a PartitionChangeRecord (Kafka's PartitionChangeBuilder): from a
target ISR and an election kind, the leader `replication.election`'s rules pick, the eligible
leader replicas and last-known leader of KIP-966, and the leader recovery state. Pure: reads the
partition's current state and who is live, returns the record (None when nothing changes).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from enum import Enum

from logstore.replication.election import (
    Election,
    UncleanRecoveryStrategy,
    eligible_leader_replicas,
    last_known_leader,
    moved_leader,
    offline_partition_leader,
    online_partition_leader,
    preferred_replica_leader,
)
from logstore.server.kraft import metadata_records as mr
from logstore.server.kraft.metadata_image import PartitionInfo


class ElectionKind(Enum):
    """Kafka's PartitionChangeBuilder.Election: how far an election may go to find a leader."""

    PREFERRED = "preferred"  # the preferred replica if it may lead, else as ONLINE
    ONLINE = "online"  # ISR, then ELR (ISR empty), then the last-known leader (Balanced)
    UNCLEAN = "unclean"  # as ONLINE, then any live replica (records may be lost)


@dataclass(frozen=True)
class ElectionPolicy:
    """A topic's election settings: KIP-966 on (the `eligible.leader.replicas.version` feature),
    its min.insync.replicas, and its unclean recovery strategy (`unclean.recovery.strategy`, or
    `unclean.leader.election.enable` mapped as `UncleanRecoveryStrategy.of` maps it)."""

    eligible_leader_replicas: bool = False
    min_insync_replicas: int = 1
    unclean_recovery: UncleanRecoveryStrategy = UncleanRecoveryStrategy.BALANCED

    def kind(self) -> ElectionKind:
        """The election a leaderless partition of this topic gets: unclean under Aggressive."""
        return ElectionKind.UNCLEAN if self.unclean_recovery is UncleanRecoveryStrategy.AGGRESSIVE \
            else ElectionKind.ONLINE


def _elect(p: PartitionInfo, isr: Sequence[int], elr: Collection[int], live: Collection[int],
           policy: ElectionPolicy, kind: ElectionKind, to: int | None) -> Election:
    """The leader `kind` finds (the current one stays while it may lead), by `election`'s rules."""
    if to is not None:
        return moved_leader(to, isr, live, elr=elr)
    election = Election(None, tuple(isr))
    if kind is ElectionKind.PREFERRED:
        election = preferred_replica_leader(p.replicas, isr, live, elr=elr)
    if election.leader is None:
        election = online_partition_leader(p.replicas, isr, live, elr=elr, current=p.leader)
    if election.leader is None and policy.eligible_leader_replicas \
            and policy.unclean_recovery is not UncleanRecoveryStrategy.NONE:
        election = last_known_leader(isr, elr, p.last_known_elr, live)
    if election.leader is None and kind is ElectionKind.UNCLEAN:
        election = offline_partition_leader(p.replicas, isr, live, unclean_leader_election_enable=True)
    return election


def partition_change(topic_id: uuid.UUID, partition_id: int, p: PartitionInfo, live: Collection[int],
                     policy: ElectionPolicy, *, isr: Sequence[int] | None = None,
                     kind: ElectionKind = ElectionKind.ONLINE, to: int | None = None,
                     unclean_shutdown: Collection[int] = (),
                     recovery_state: int | None = None) -> mr.MetadataRecord | None:
    """The record taking partition `p` to ISR `isr` (unchanged if None) with a leader elected by
    `kind` among `live` brokers (or moved to `to`, when it may lead), None when nothing changes.

    With ELR on, replicas leaving an ISR below min.insync.replicas join the ELR (those in
    `unclean_shutdown` do not, and leave it), a leader from the ELR restarts the ISR alone, and
    the leader when the ISR empties is kept as the last-known ELR. An unclean election restarts
    the ISR from its leader, clears the ELR and marks the leader RECOVERING."""
    target_isr = list(p.isr if isr is None else isr)
    elr: list[int] = []
    if policy.eligible_leader_replicas:
        wanted = eligible_leader_replicas(p.isr, target_isr, p.elr, min_insync_replicas=policy.min_insync_replicas,
                                          unclean_shutdown=unclean_shutdown)
        elr = [r for r in p.replicas if r in wanted]
    election = _elect(p, target_isr, elr, live, policy, kind, to)
    leader = mr.NO_LEADER if election.leader is None else election.leader
    state = p.leader_recovery_state if recovery_state is None else recovery_state
    if leader != p.leader:
        if election.unclean:
            target_isr, elr, state = [leader], [], mr.RECOVERING
        elif leader in elr and leader not in target_isr:
            target_isr, elr = [leader], [r for r in elr if r != leader]
    last_known = list(p.last_known_elr)
    if policy.eligible_leader_replicas:
        if not target_isr and p.isr and p.leader >= 0:
            last_known = [p.leader]  # the leader when the partition lost its whole ISR
        elif leader >= 0:
            last_known = []  # led again
    change = {
        "isr": target_isr if target_isr != p.isr and (target_isr or policy.eligible_leader_replicas) else None,
        "leader": leader if leader != p.leader else mr.NO_LEADER_CHANGE,
        "elr": elr if elr != p.elr else None,
        "last_known_elr": last_known if last_known != p.last_known_elr else None,
        "leader_recovery_state": state if state != p.leader_recovery_state else mr.NO_RECOVERY_STATE_CHANGE,
    }
    if change["isr"] is None and change["elr"] is None and change["last_known_elr"] is None \
            and change["leader"] == mr.NO_LEADER_CHANGE and change["leader_recovery_state"] == mr.NO_RECOVERY_STATE_CHANGE:
        return None
    return mr.partition_change(topic_id, partition_id, **change)

"""A minimal controller for one partition, as the simulation and the demo need it: it knows
which replicas are live (registered and unfenced), the leader, the leader epoch, the ISR and
the eligible leader replicas (ELR, KIP-966); elects leaders with the strategies of
`election.py`, bumps the leader epoch on every election and sends LeaderAndIsr
(`make_leader` / `make_follower`) to the live replicas. Leaders change the ISR through
`alter_isr` (Kafka's AlterPartition), which refuses replicas that are not live (KIP-841).

With `eligible_leader_replicas_enable=False` it keeps the rules before KIP-966: the ISR never
empties, its last member stays (whatever it lost) and leaders move the HW below min ISR.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from logstore.replication.election import (
    Election,
    controlled_shutdown_leader,
    eligible_leader_replicas,
    isr_after_fencing,
    offline_partition_leader,
    preferred_replica_leader,
    reassigned_partition_leader,
)
from logstore.replication.partition import Partition


class Controller:
    """Partition metadata and elections for the replicas in `assignment` (first = preferred);
    `min_insync_replicas` is the topic's."""

    def __init__(self, assignment: Sequence[int], *, min_insync_replicas: int = 1,
                 unclean_leader_election_enable: bool = False, eligible_leader_replicas_enable: bool = True):
        self.assignment: tuple[int, ...] = tuple(assignment)
        self.min_insync_replicas = min_insync_replicas
        self.unclean_leader_election_enable = unclean_leader_election_enable
        self.eligible_leader_replicas_enable = eligible_leader_replicas_enable
        self.leader: int | None = None
        self.leader_epoch = -1
        self.isr: frozenset[int] = frozenset(assignment)
        self.elr: frozenset[int] = frozenset()
        self.replicas: dict[int, Partition] = {}
        self.elections: list[tuple[int, Election]] = []  # (leader epoch, outcome), for tests and logs

    @property
    def live(self) -> frozenset[int]:
        """Replicas whose broker is up."""
        return frozenset(self.replicas)

    def startup(self, partition: Partition, *, unclean_shutdown: bool = False) -> None:
        """A replica's broker came up (or restarted): it follows the leader, or, if the
        partition has none (or it was the leader), an election runs. After an unclean
        shutdown (unflushed data lost) it leaves the ISR and the ELR (KIP-966)."""
        replica_id = partition.replica_id
        partition.on_isr_change = self.alter_isr
        self.replicas[replica_id] = partition
        if unclean_shutdown:
            self._set_isr(isr_after_fencing(self.isr, [replica_id],
                                            eligible_leader_replicas=self.eligible_leader_replicas_enable),
                          unclean_shutdown=[replica_id])
        if self.leader is None or self.leader == replica_id:
            self._elect_offline()
        else:
            partition.make_follower(self.leader, self.leader_epoch)
            if unclean_shutdown:
                self._leader_partition_update_isr()

    def fail(self, *replica_ids: int) -> None:
        """The controller noticed the brokers of `replica_ids` die (at once): they leave the
        ISR (into the ELR when it falls below min ISR) and a new leader is elected if the
        leader is among them."""
        for replica_id in replica_ids:
            self.replicas.pop(replica_id, None)
        self._set_isr(isr_after_fencing(self.isr, replica_ids,
                                        eligible_leader_replicas=self.eligible_leader_replicas_enable))
        if self.leader in replica_ids:
            self._elect_offline()
        else:
            self._leader_partition_update_isr()

    def _set_isr(self, isr: Collection[int], unclean_shutdown: Collection[int] = ()) -> None:
        if self.eligible_leader_replicas_enable:
            self.elr = eligible_leader_replicas(self.isr, isr, self.elr, min_insync_replicas=self.min_insync_replicas,
                                                unclean_shutdown=unclean_shutdown)
        self.isr = frozenset(isr)

    def _elect_offline(self) -> None:
        self._apply(offline_partition_leader(
            self.assignment, self.isr, self.live, elr=self.elr,
            unclean_leader_election_enable=self.unclean_leader_election_enable))

    def elect_preferred(self) -> bool:
        """Move leadership to the preferred replica if it may lead."""
        election = preferred_replica_leader(self.assignment, self.isr, self.live, elr=self.elr)
        if election.leader is None or election.leader == self.leader:
            return False
        self._apply(election)
        return True

    def controlled_shutdown(self, replica_id: int) -> None:
        """Move leadership off `replica_id` and drop it from the ISR before it stops."""
        live = self.live
        self.replicas.pop(replica_id, None)
        self._set_isr(isr_after_fencing(self.isr, [replica_id],
                                        eligible_leader_replicas=self.eligible_leader_replicas_enable))
        if replica_id == self.leader:
            self._apply(controlled_shutdown_leader(self.assignment, self.isr, live, {replica_id}, elr=self.elr))
        else:
            self._leader_partition_update_isr()

    def reassign(self, assignment: Sequence[int]) -> None:
        """Adopt a new replica list; the leader moves if it is no longer the right one."""
        self.assignment = tuple(assignment)
        election = reassigned_partition_leader(self.assignment, self.isr, self.live, elr=self.elr)
        if election.leader is not None and election.leader != self.leader:
            self._apply(election)

    def _apply(self, election: Election) -> None:
        if election.leader is None:
            self.leader = None  # offline: the ISR and ELR say who may lead when it returns
            return
        self.leader_epoch += 1
        self.leader = election.leader
        if election.unclean:
            self.isr, self.elr = frozenset({election.leader}), frozenset()  # its log is the history now
        else:
            self._set_isr(frozenset(election.isr) | {election.leader})
        self.elections.append((self.leader_epoch, election))
        self.replicas[self.leader].make_leader(self.leader_epoch, self.isr, self.assignment,
                                               eligible_leader_replicas=self.eligible_leader_replicas_enable)
        for replica_id, partition in self.replicas.items():
            if replica_id != self.leader:
                partition.make_follower(self.leader, self.leader_epoch)

    def _leader_partition_update_isr(self) -> None:
        if self.leader is not None and self.leader in self.replicas:
            self.replicas[self.leader].update_isr(self.isr)

    def alter_isr(self, partition: Partition, leader_epoch: int, new_isr: frozenset[int]) -> bool:
        """A leader's ISR change; accepted only from the current leader in the current epoch,
        and only if every member is live (KIP-841: fenced replicas may not join)."""
        if partition.replica_id != self.leader or leader_epoch != self.leader_epoch:
            return False
        if not new_isr <= self.live:
            return False
        self._set_isr(new_isr)
        return True

    def __repr__(self) -> str:
        return (f"Controller(leader={self.leader}, epoch={self.leader_epoch}, isr={sorted(self.isr)}, "
                f"elr={sorted(self.elr)}, live={sorted(self.live)})")

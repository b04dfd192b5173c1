"""A minimal controller for one partition, as the simulation and the demo need it: it knows
which replicas are live, the leader, the leader epoch and the ISR; elects leaders with the
strategies of `election.py`, bumps the leader epoch on every election and sends
LeaderAndIsr (`make_leader` / `make_follower`) to the live replicas. Leaders change the ISR
through `alter_isr` (Kafka's AlterPartition).
"""

from __future__ import annotations

from collections.abc import Sequence

from logstore.replication.election import (
    Election,
    controlled_shutdown_leader,
    offline_partition_leader,
    preferred_replica_leader,
    reassigned_partition_leader,
)
from logstore.replication.partition import Partition


class Controller:
    """Partition metadata and elections for the replicas in `assignment` (first = preferred)."""

    def __init__(self, assignment: Sequence[int], *, unclean_leader_election_enable: bool = False):
        self.assignment: tuple[int, ...] = tuple(assignment)
        self.unclean_leader_election_enable = unclean_leader_election_enable
        self.leader: int | None = None
        self.leader_epoch = -1
        self.isr: frozenset[int] = frozenset(assignment)
        self.replicas: dict[int, Partition] = {}
        self.elections: list[tuple[int, Election]] = []  # (leader epoch, outcome), for tests and logs

    @property
    def live(self) -> frozenset[int]:
        """Replicas whose broker is up."""
        return frozenset(self.replicas)

    def startup(self, partition: Partition) -> None:
        """A replica's broker came up (or restarted): it follows the leader, or, if the
        partition has none (or it was the leader), an election runs."""
        partition.on_isr_change = self.alter_isr
        self.replicas[partition.replica_id] = partition
        if self.leader is None or self.leader == partition.replica_id:
            self._elect_offline()
        else:
            partition.make_follower(self.leader, self.leader_epoch)

    def fail(self, *replica_ids: int) -> None:
        """The controller noticed the brokers of `replica_ids` die (at once): a new leader if
        the leader is among them, and they leave the ISR -- which never becomes empty: as in
        Kafka, the last member stays so it can lead again when it returns."""
        for replica_id in replica_ids:
            self.replicas.pop(replica_id, None)
        if self.leader in replica_ids:
            self._elect_offline()
        for replica_id in replica_ids:
            if replica_id in self.isr and len(self.isr) > 1:
                self.isr = self.isr - {replica_id}
        self._leader_partition_update_isr()

    def _elect_offline(self) -> None:
        self._apply(offline_partition_leader(
            self.assignment, self.isr, self.live,
            unclean_leader_election_enable=self.unclean_leader_election_enable))

    def elect_preferred(self) -> bool:
        """Move leadership to the preferred replica if it is live and in the ISR."""
        election = preferred_replica_leader(self.assignment, self.isr, self.live)
        if election.leader is None or election.leader == self.leader:
            return False
        self._apply(election)
        return True

    def controlled_shutdown(self, replica_id: int) -> None:
        """Move leadership off `replica_id` and drop it from the ISR before it stops."""
        election = controlled_shutdown_leader(self.assignment, self.isr, self.live, {replica_id})
        self.replicas.pop(replica_id, None)
        if replica_id == self.leader:
            self._apply(election)
        elif election.isr:
            self.isr = frozenset(election.isr)
            self._leader_partition_update_isr()

    def reassign(self, assignment: Sequence[int]) -> None:
        """Adopt a new replica list; the leader moves if it is no longer the right one."""
        self.assignment = tuple(assignment)
        election = reassigned_partition_leader(self.assignment, self.isr, self.live)
        if election.leader is not None and election.leader != self.leader:
            self._apply(election)

    def _apply(self, election: Election) -> None:
        if election.leader is None:
            self.leader = None  # offline: keep the ISR so a member can lead when it returns
            return
        self.leader_epoch += 1
        self.leader = election.leader
        self.isr = frozenset(election.isr) | {election.leader}
        self.elections.append((self.leader_epoch, election))
        self.replicas[self.leader].make_leader(self.leader_epoch, self.isr, self.assignment)
        for replica_id, partition in self.replicas.items():
            if replica_id != self.leader:
                partition.make_follower(self.leader, self.leader_epoch)

    def _leader_partition_update_isr(self) -> None:
        if self.leader is not None and self.leader in self.replicas:
            self.replicas[self.leader].update_isr(self.isr)

    def alter_isr(self, partition: Partition, leader_epoch: int, new_isr: frozenset[int]) -> bool:
        """A leader's ISR change; accepted only from the current leader in the current epoch."""
        if partition.replica_id != self.leader or leader_epoch != self.leader_epoch:
            return False
        self.isr = frozenset(new_isr)
        return True

    def __repr__(self) -> str:
        return (f"Controller(leader={self.leader}, epoch={self.leader_epoch}, isr={sorted(self.isr)}, "
                f"live={sorted(self.live)})")

"""A minimal controller for one partition, as the simulation and the demo need it: it knows
which replicas are live (registered and unfenced in the cluster's `BrokerRegistry`), the
leader, the leader epoch, the ISR, the eligible leader replicas (ELR) and the last-known ELR
(KIP-966); elects leaders with the strategies of `election.py`, bumps the leader epoch on every
election and sends LeaderAndIsr (`make_leader` / `make_follower`) to the live replicas. Leaders
change the ISR through `alter_isr` (Kafka's AlterPartition), which refuses replicas that are not
live (KIP-841) and broker epochs that are not current (KIP-903).

A replica's registration tells whether its broker stopped cleanly (its clean-shutdown marker
names the broker epoch it held); after an unclean stop it leaves the ISR and the ELR, since it
may have lost unflushed records. When no ISR or ELR replica can lead, unclean recovery
(`unclean.recovery.strategy`, Balanced by default) elects the longest log.

With `eligible_leader_replicas_enable=False` it keeps the rules before KIP-966: the ISR never
empties, its last member stays (whatever it lost) and leaders move the HW below min ISR.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from logstore.clean_shutdown import NO_BROKER_EPOCH
from logstore.replication.brokers import BrokerRegistration, BrokerRegistry
from logstore.replication.election import (
    Election,
    ReplicaLogInfo,
    UncleanRecoveryStrategy,
    controlled_shutdown_leader,
    elr_after_isr_change,
    isr_after_fencing,
    offline_partition_leader,
    preferred_replica_leader,
    reassigned_partition_leader,
    unclean_recovery_leader,
)
from logstore.replication.partition import Partition


class Controller:
    """Partition metadata and elections for the replicas in `assignment` (first = preferred);
    `min_insync_replicas` is the topic's. `brokers` is the cluster's registry (a new one if
    not given). `unclean_recovery_strategy` is Kafka's `unclean.recovery.strategy` (unset:
    Aggressive if `unclean_leader_election_enable`, else Balanced);
    `unclean_recovery_manager_enabled=False` (Kafka's `unclean.recovery.manager.enabled`) falls
    back to the classic unclean election of the first live replica, and only for Aggressive."""

    def __init__(self, assignment: Sequence[int], *, min_insync_replicas: int = 1,
                 unclean_leader_election_enable: bool = False, eligible_leader_replicas_enable: bool = True,
                 unclean_recovery_strategy: str | UncleanRecoveryStrategy | None = None,
                 unclean_recovery_manager_enabled: bool = True, brokers: BrokerRegistry | None = None):
        self.assignment: tuple[int, ...] = tuple(assignment)
        self.min_insync_replicas = min_insync_replicas
        self.unclean_leader_election_enable = unclean_leader_election_enable
        self.eligible_leader_replicas_enable = eligible_leader_replicas_enable
        self.unclean_recovery_strategy = UncleanRecoveryStrategy.of(
            unclean_recovery_strategy, unclean_leader_election_enable=unclean_leader_election_enable)
        self.unclean_recovery_manager_enabled = unclean_recovery_manager_enabled
        self.brokers = brokers if brokers is not None else BrokerRegistry()
        self.leader: int | None = None
        self.leader_epoch = -1
        self.isr: frozenset[int] = frozenset(assignment)
        self.elr: frozenset[int] = frozenset()
        self.last_known_elr: frozenset[int] = frozenset()
        self.replicas: dict[int, Partition] = {}
        self.elections: list[tuple[int, Election]] = []  # (leader epoch, outcome), for tests and logs

    @property
    def live(self) -> frozenset[int]:
        """Replicas whose broker is up."""
        return frozenset(self.replicas)

    def startup(self, partition: Partition, *, registration: BrokerRegistration | None = None) -> None:
        """A replica's broker came up (or restarted, or reached the controller again): it
        registers (KIP-903: a new broker epoch; unclean if its clean-shutdown marker does not
        name its last one, KIP-966), then follows the leader, or, if the partition has none (or
        it was the leader), an election runs. After an unclean shutdown it leaves the ISR and
        the ELR. A broker hosting several partitions registers once with `brokers.register` and
        passes that `registration` to each partition's controller."""
        replica_id = partition.replica_id
        # The same incarnation back in touch (a zombie reconnecting) keeps its epoch: nothing was lost.
        back = registration is None and partition.broker_epoch != NO_BROKER_EPOCH and \
            self.brokers.unfence(replica_id, partition.broker_epoch)
        if not back:
            registration = registration or self.brokers.register(replica_id, partition.previous_broker_epoch)
            partition.broker_epoch = registration.broker_epoch
        unclean = not back and registration is not None and registration.unclean_shutdown
        partition.on_isr_change = self.alter_isr
        self.replicas[replica_id] = partition
        if unclean:
            self._set_isr(isr_after_fencing(self.isr, [replica_id],
                                            eligible_leader_replicas=self.eligible_leader_replicas_enable),
                          unclean_shutdown=[replica_id])
        if self.leader is None or self.leader == replica_id:
            self._elect_offline()
        else:
            partition.make_follower(self.leader, self.leader_epoch)
            if unclean:
                self._leader_partition_update_isr()

    def fail(self, *replica_ids: int) -> None:
        """The controller noticed the brokers of `replica_ids` die (at once): they are fenced,
        leave the ISR (into the ELR when it falls below min ISR) and a new leader is elected
        if the leader is among them."""
        for replica_id in replica_ids:
            self.replicas.pop(replica_id, None)
            self.brokers.fence(replica_id)
        self._set_isr(isr_after_fencing(self.isr, replica_ids,
                                        eligible_leader_replicas=self.eligible_leader_replicas_enable))
        if self.leader in replica_ids:
            self._elect_offline()
        else:
            self._leader_partition_update_isr()

    def _set_isr(self, isr: Collection[int], unclean_shutdown: Collection[int] = ()) -> None:
        if self.eligible_leader_replicas_enable:
            self.elr, self.last_known_elr = elr_after_isr_change(
                self.isr, isr, self.elr, self.last_known_elr, min_insync_replicas=self.min_insync_replicas,
                unclean_shutdown=unclean_shutdown)
        self.isr = frozenset(isr)

    def _elect_offline(self) -> None:
        election = offline_partition_leader(self.assignment, self.isr, self.live, elr=self.elr)
        if election.leader is None:
            election = self._unclean_election() or election
        self._apply(election)

    def _unclean_election(self) -> Election | None:
        """No ISR or ELR replica can lead: unclean recovery (or, without the recovery manager,
        the classic unclean election of Aggressive)."""
        strategy = self.unclean_recovery_strategy
        if not self.unclean_recovery_manager_enabled or not self.eligible_leader_replicas_enable:
            if strategy is not UncleanRecoveryStrategy.AGGRESSIVE:
                return None
            return offline_partition_leader(self.assignment, self.isr, self.live, elr=self.elr,
                                            unclean_leader_election_enable=True)
        logs = {r: _log_info(p) for r, p in self.replicas.items() if r in self.assignment}
        election = unclean_recovery_leader(self.assignment, self.isr, self.elr, self.last_known_elr, logs,
                                           strategy=strategy)
        return election if election.leader is not None else None

    def elect_preferred(self) -> bool:
        """Move leadership to the preferred replica if it may lead."""
        election = preferred_replica_leader(self.assignment, self.isr, self.live, elr=self.elr)
        if election.leader is None or election.leader == self.leader:
            return False
        self._apply(election)
        return True

    def controlled_shutdown(self, replica_id: int) -> None:
        """Move leadership off `replica_id` and drop it from the ISR before it stops (fenced)."""
        live = self.live
        self.replicas.pop(replica_id, None)
        self.brokers.fence(replica_id)
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
            # Its log is the history now (Kafka clears the ELR and the last-known ELR).
            self.isr, self.elr, self.last_known_elr = frozenset({election.leader}), frozenset(), frozenset()
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
        """A leader's ISR change; accepted only from the current leader in the current epoch and
        its current broker epoch, only if every member is live (KIP-841: fenced replicas may not
        join) and each joining member fetched with its current broker epoch (KIP-903)."""
        if partition.replica_id != self.leader or leader_epoch != self.leader_epoch:
            return False
        if not self.brokers.is_current(partition.replica_id, partition.broker_epoch):
            return False  # STALE_BROKER_EPOCH
        if not new_isr <= self.live:
            return False
        for joining in new_isr - self.isr - {partition.replica_id}:
            epoch = partition.replica_broker_epoch(joining)
            if epoch != NO_BROKER_EPOCH and not self.brokers.is_current(joining, epoch):
                return False  # INELIGIBLE_REPLICA: a fetch from an earlier incarnation
        self._set_isr(new_isr)
        return True

    def __repr__(self) -> str:
        return (f"Controller(leader={self.leader}, epoch={self.leader_epoch}, isr={sorted(self.isr)}, "
                f"elr={sorted(self.elr)}, last_known_elr={sorted(self.last_known_elr)}, live={sorted(self.live)})")


def _log_info(partition: Partition) -> ReplicaLogInfo:
    """A live replica's answer to GetReplicaLogInfo: its latest epoch and its log end offset."""
    latest = partition.epochs.latest_epoch()
    return ReplicaLogInfo(partition.replica_id, -1 if latest is None else latest, partition.log_end_offset)

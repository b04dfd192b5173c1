"""Invariants of the replication simulation (tests/simulation/cluster.py), collected as
violations rather than raised. After every action: (1) no acknowledged (acks=all, committed) batch is missing
from the leader above its log start offset -- unless every replica that ever held it lost it
to a power loss (`lost_everywhere`) or an unclean election since chose a replica without it
(`lost_to_unclean_recovery`), both counted apart; (2) a follower that has fetched in the current
epoch holds exactly the leader's batches below its own HW; (3) the leader's HW never
decreases within a leader epoch; (4) every replica's offsets are dense from its log start
offset to its log end, with start <= HW <= end; (5) no fetcher round fails. With
`strict_history` also (6): a batch once below any leader's HW is never replaced at its
offset (with the same two exceptions). After healing (7): the partition has a leader and
every replica is back in the ISR.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from logstore.records import iter_batches, read_batch_header
from logstore.replication.partition import Partition
from tests.simulation.memory_log import MemoryLog

if TYPE_CHECKING:
    from tests.simulation.cluster import SimCluster

BatchId = tuple[int, int, int]  # (base offset, next offset, crc)


def batch_ids(log: Any) -> list[BatchId]:
    """Every readable batch of `log` from its log start offset, as (base, next, crc)."""
    if isinstance(log, MemoryLog):
        return log.batch_ids()
    out: list[BatchId] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 30).records
        if not data:
            break
        for batch in iter_batches(data):
            h = read_batch_header(batch.buffer, batch.position)
            out.append((h.base_offset, h.next_offset, h.crc))
            offset = h.next_offset
    return out


class Invariants:
    """The properties listed in the module docstring; violations are collected, not raised."""

    def __init__(self, strict_history: bool = True):
        self.strict_history = strict_history
        self.acked: dict[int, BatchId] = {}  # base offset -> batch, acks=all and acknowledged
        self.committed: dict[int, BatchId] = {}  # base offset -> batch once below a leader's HW
        self.leader_hw: tuple[int, int] = (-1, -1)  # (leader epoch, HW) last seen
        self.violations: list[str] = []
        self.held: dict[BatchId, set[int]] = {}  # batch -> replicas ever seen holding it
        self.power_lost: dict[BatchId, set[int]] = {}  # batch -> replicas that lost it to power loss, since
        self.unclean_at: dict[BatchId, int] = {}  # batch -> unclean elections so far when committed
        self.written_in: dict[BatchId, int] = {}  # acknowledged batch -> the leader epoch it was written in
        self.lost_everywhere: list[BatchId] = []  # every replica that held it lost it
        self.lost_to_unclean_recovery: list[BatchId] = []  # an unclean election chose a replica without it

    def _fail(self, message: str) -> None:
        if message not in self.violations:
            self.violations.append(message)

    def _loss_cause(self, batch: BatchId, unclean_epochs: list[int]) -> list[BatchId] | None:
        """Where a lost batch the fault model allows is counted (see the module docstring); None
        if it is not allowed. An unclean election counts if it came after the batch's epoch (an
        acknowledged batch, even one a zombie leader took) or after its commit (any other)."""
        if self.held.get(batch, set()) <= self.power_lost.get(batch, set()):
            return self.lost_everywhere
        epoch = self.written_in.get(batch)
        if (any(e > epoch for e in unclean_epochs) if epoch is not None
                else len(unclean_epochs) > self.unclean_at.get(batch, len(unclean_epochs))):
            return self.lost_to_unclean_recovery
        return None

    def check(self, cluster: SimCluster) -> None:
        """Run every invariant over the current state."""
        ids = {n.replica_id: batch_ids(n.partition.log) for n in cluster.nodes if n.partition is not None}
        for replica_id, replica_ids in ids.items():
            for batch in replica_ids:
                self.held.setdefault(batch, set()).add(replica_id)
                lost = self.power_lost.get(batch)
                if lost:
                    lost.discard(replica_id)  # it holds the batch again
        for node in cluster.nodes:
            if node.partition is not None:
                self._check_dense(node.partition, ids[node.replica_id])
        unclean = [e for e, election in cluster.controller.elections if election.unclean]
        leader = cluster.leader_partition()
        if leader is None:
            return
        leader_ids = ids[leader.replica_id]
        by_base = {b[0]: b for b in leader_ids}
        hw = leader.high_watermark
        epoch = leader.leader_epoch
        last_epoch, last_hw = self.leader_hw
        if epoch == last_epoch and hw < last_hw:
            self._fail(f"leader HW decreased in epoch {epoch}: {last_hw} -> {hw}")
        self.leader_hw = (epoch, hw)
        for batch in leader_ids:
            if batch[1] <= hw:
                old = self.committed.setdefault(batch[0], batch)
                if old == batch:
                    self.unclean_at.setdefault(batch, len(unclean))
                elif self._loss_cause(old, unclean) is not None:
                    self.committed[batch[0]] = batch
                    self.unclean_at.setdefault(batch, len(unclean))
                elif self.strict_history:
                    self._fail(f"committed batch at offset {batch[0]} replaced: {old} -> {batch}")
        start = leader.log.log_start_offset
        for base, batch in list(self.acked.items()):
            if batch[1] > start and by_base.get(base) != batch:
                cause = self._loss_cause(batch, unclean)
                if cause is not None:
                    cause.append(batch)
                    del self.acked[base]
                else:
                    self._fail(f"acknowledged batch {batch} lost on leader {leader.replica_id}")
        for node in cluster.nodes:
            p = node.partition
            if p is None or p is leader or node.follower is None or not node.follower.fetched_in_current_epoch:
                continue
            for batch in ids[node.replica_id]:
                if batch[1] <= p.high_watermark and batch[0] >= start and by_base.get(batch[0]) != batch:
                    self._fail(f"replica {node.replica_id} differs from leader {leader.replica_id} below its HW "
                               f"{p.high_watermark}: {batch} vs {by_base.get(batch[0])}")

    def _check_dense(self, partition: Partition, ids: list[BatchId]) -> None:
        log = partition.log
        start, end, hw = log.log_start_offset, log.log_end_offset, log.high_watermark
        if not start <= hw <= end:
            self._fail(f"replica {partition.replica_id}: start {start} <= hw {hw} <= end {end} broken")
        expected = ids[0][0] if ids else start
        if ids and not ids[0][0] <= start < ids[0][1]:
            self._fail(f"replica {partition.replica_id}: first batch {ids[0]} does not hold the start {start}")
        for base, nxt, _ in ids:
            if base != expected:
                self._fail(f"replica {partition.replica_id}: offsets not dense at {expected} (batch at {base})")
            expected = nxt
        if ids and expected != end:
            self._fail(f"replica {partition.replica_id}: last batch ends at {expected}, log end is {end}")

    def acknowledged(self, batch: BatchId, leader_epoch: int) -> None:
        """Remember an acks=all append the producer saw succeed, written in `leader_epoch`."""
        self.acked[batch[0]] = batch
        self.written_in[batch] = leader_epoch

    def lost_to_power_loss(self, replica_id: int, batches: Iterable[BatchId]) -> None:
        """`replica_id` lost `batches` (unflushed) when its machine failed."""
        for batch in batches:
            self.power_lost.setdefault(batch, set()).add(replica_id)

    def fetcher_failed(self, replica_id: int, error: Exception | None) -> None:
        """A fetcher round ended FAILED: an error no replication rule handled."""
        self._fail(f"replica {replica_id}: fetcher round failed: {error!r}")

    def check_healed(self, cluster: SimCluster) -> None:
        """After healing, the partition has a leader and every replica is back in the ISR."""
        if cluster.controller.leader is None:
            self._fail(f"no leader after healing: {cluster.controller}")
            return
        missing = sorted(set(range(len(cluster.nodes))) - cluster.controller.isr)
        if missing:
            self._fail(f"replicas {missing} did not rejoin the ISR after healing: {cluster.controller}")

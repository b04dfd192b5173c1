"""SimCluster: three replicas of one partition, a Controller, an in-process transport and a
ManualClock, driven one deterministic action at a time, with the invariants checked after
every action by `Invariants`.

Fault model (Kafka's durability assumption made explicit). No stop but a clean one leaves the
clean-shutdown marker, so the controller learns of every other from the replica's own
registration (KIP-966 with KIP-903's broker epochs); nothing tells it by hand:
- `restart(r)`: the process dies and comes back at once (kill -9, or `clean=True` a quick clean
  restart). The page cache survives, so no log byte is lost; in-memory state is: the HW falls
  back to the last checkpointed value and the follower state restarts. The controller did not
  notice the death; the new registration shows a kill -9 as unclean.
- `bounce(r)`: kill -9, the controller notices (fenced), the broker starts again (unclean).
- `fetch_then_crash(r)`: one fetcher round, then the process dies before that round's
  `log-start-offset-checkpoint` write (between a truncation and its checkpoint).
- `fail(r)`: the machine dies (power loss): unflushed bytes are lost, even on the last live
  ISR replica. The controller notices: `r` leaves the ISR or, if it led, a new leader is elected.
- `power_loss_of_the_isr()`: every live ISR replica fails at once, each having flushed to its
  own point, and none keeps more than it flushed.
- `power_loss_after_delete_records()`: DeleteRecords on the leader, then its machine fails.
- `recover(r)`: a failed replica's broker starts again; `recover_all()` starts every one that
  is down, in a random order.
- `isolate()`: the controller loses the leader (session expiry) and elects another, but the
  old leader keeps running unaware -- a zombie that still takes produces; `reconnect()` ends it.

`faults` counts the faults a schedule hit that earlier versions of the simulation spared
(`NEW_FAULTS`); the controller's unclean elections count as unclean recoveries.

Batches hold one to three records, so DeleteRecords can put a log start inside one.

The invariants are in tests/simulation/invariants.py; random schedules of these faults in
tests/simulation/schedule.py.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from pathlib import Path
from typing import Any

from logstore.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    read_offsets_checkpoint,
    update_offsets_checkpoints,
    write_offsets_checkpoint,
)
from logstore.clock import ManualClock
from logstore.config import LogConfig
from logstore.errors import NotEnoughReplicasError, NotLeaderOrFollowerError
from logstore.log_files import CLEAN_SHUTDOWN_FILE
from logstore.records import build_batch_columnar, read_batch_header
from logstore.replication.controller import Controller
from logstore.replication.follower import Follower, Step
from logstore.replication.partition import ACKS_ALL, AppendHandle, Partition
from logstore.replication.transport import FetchRequest, InProcessTransport
from retention import apply_retention
from tests.simulation.invariants import BatchId, Invariants, batch_ids
from tests.simulation.memory_log import MemoryLog

TOPIC = "sim"
START_MS = 1_000_000
LAG_MS = 100
BASE_CONFIG = {"replica.lag.time.max.ms": LAG_MS, "min.insync.replicas": 1, "file.delete.delay.ms": 0,
               "segment.bytes": 1024}

#: Faults the simulation spared before KIP-966 was complete; each schedule counts its hits.
NEW_FAULTS = ("isr_power_loss", "last_isr_replica_power_loss", "sigkill", "bounce", "random_restart_order")


class Node:
    """One replica's broker: its partition and fetcher while up, its storage across restarts."""

    def __init__(self, replica_id: int):
        self.replica_id = replica_id
        self.partition: Partition | None = None
        self.follower: Follower | None = None
        self.memory_log: MemoryLog | None = None
        self.hw_checkpoint = 0
        self.isolated = False  # up, but cut off from the controller (a zombie leader)

    @property
    def up(self) -> bool:
        return self.partition is not None


class SimCluster:
    """Three replicas (ids 0, 1, 2; 0 preferred) under one Controller."""

    def __init__(
        self,
        *,
        backend: str = "memory",
        root: Path | None = None,
        truncate_to_hw: bool = False,
        truncate_on_fetch: bool = False,
        config: dict[str, Any] | None = None,
        replicas: int = 3,
        strict_history: bool = True,
        unclean_leader_election_enable: bool = False,
        eligible_leader_replicas_enable: bool = True,
        unclean_recovery_strategy: str | None = None,
    ):
        if backend == "disk" and root is None:
            raise ValueError("the disk backend needs a root directory")
        self.backend = backend
        self.root = root
        self.truncate_to_hw = truncate_to_hw
        self.truncate_on_fetch = truncate_on_fetch
        self.config = {**BASE_CONFIG, **(config or {})}
        self.clock = ManualClock(START_MS)
        self.transport = InProcessTransport()
        self.controller = Controller(list(range(replicas)),
                                     min_insync_replicas=LogConfig.coerce(self.config).min_insync_replicas,
                                     unclean_leader_election_enable=unclean_leader_election_enable,
                                     eligible_leader_replicas_enable=eligible_leader_replicas_enable,
                                     unclean_recovery_strategy=unclean_recovery_strategy)
        self.nodes = [Node(i) for i in range(replicas)]
        self.faults: Counter[str] = Counter()
        self.invariants = Invariants(strict_history)
        self.pending: list[tuple[AppendHandle, BatchId]] = []
        self._produced = 0
        for node in self.nodes:
            self._start(node)

    # ---------------------------------------------------------------- plumbing

    def _dir(self, node: Node) -> Path:
        assert self.root is not None
        return self.root / f"broker-{node.replica_id}" / f"{TOPIC}-0"

    def _start(self, node: Node) -> None:
        """Open the node's storage, take its checkpointed HW, register it with the controller."""
        if self.backend == "memory":
            if node.memory_log is None:
                node.memory_log = MemoryLog(TOPIC, 0, self.config, self.clock)
            log = node.memory_log
            log.reopen()
            partition = Partition(log, node.replica_id, clock=self.clock,
                                  previous_broker_epoch=log.clean_shutdown_broker_epoch)
        else:
            partition = Partition.open(self._dir(node), node.replica_id, self.config, clock=self.clock,
                                       retention=apply_retention)
        partition.log.high_watermark = node.hw_checkpoint
        node.partition = partition
        node.follower = Follower(partition, self.transport, truncate_to_hw=self.truncate_to_hw,
                                 truncate_on_fetch=self.truncate_on_fetch)
        self.transport.register(partition)
        self.controller.startup(partition)  # the registration tells whether it stopped cleanly

    @property
    def unclean_elections(self) -> int:
        """Unclean elections (unclean recoveries) so far."""
        return sum(election.unclean for _, election in self.controller.elections)

    def _stop(self, node: Node, *, clean: bool = False, lose_unflushed: bool = False) -> None:
        """Stop a broker: cleanly (the clean-shutdown marker written), killed (page cache kept,
        no marker) or, with `lose_unflushed`, by a power loss."""
        partition = node.partition
        assert partition is not None
        self.transport.unregister(node.replica_id, TOPIC, 0)
        log = partition.log
        if lose_unflushed:
            lost = [b for b in batch_ids(log) if b[1] > log.recovery_point]
            self.invariants.lost_to_power_loss(node.replica_id, lost)
        if isinstance(log, MemoryLog):
            partition.close()
            if lose_unflushed:
                log.crash()
            elif not clean:
                log.kill()
        else:
            if lose_unflushed:
                self._lose_unflushed_bytes(partition)
            else:
                partition.close()
            if not clean:
                (self._dir(node).parent / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
        node.partition = None
        node.follower = None
        node.isolated = False

    @staticmethod
    def _lose_unflushed_bytes(partition: Partition) -> None:
        """Power loss on disk: the files keep only what was fsynced. Close the log, cut its
        active segment's .log back to the recovery point's byte position and put the recovery
        point checkpoint back to it; the next open runs Log's crash recovery from there
        (indexes, epoch cache, producer state past that point are rebuilt or dropped)."""
        log = partition.log
        recovery_point = log.recovery_point
        active = log.segments[-1]
        assert active.base_offset <= recovery_point, "rolls flush: only the active segment is dirty"
        found = active.translate_offset(recovery_point)
        cut = found.position if found is not None else active.size
        path = active.log_path
        partition.close()
        os.truncate(path, cut)
        checkpoint = path.parent.parent / RECOVERY_POINT_CHECKPOINT
        offsets = read_offsets_checkpoint(checkpoint)
        offsets[(TOPIC, 0)] = recovery_point
        write_offsets_checkpoint(checkpoint, offsets)

    def leader_partition(self) -> Partition | None:
        """The leader's Partition, if the partition is online."""
        leader = self.controller.leader
        return None if leader is None else self.nodes[leader].partition

    def _after(self) -> None:
        """Collect acknowledgements, then check every invariant."""
        waiting = []
        for handle, batch in self.pending:
            if not handle.done:
                waiting.append((handle, batch))
            elif handle.is_committed:
                self.invariants.acknowledged(batch, handle.leader_epoch)
        self.pending = waiting
        self.invariants.check(self)

    # ---------------------------------------------------------------- actions

    def produce(self, acks: int = ACKS_ALL, value: bytes | None = None, records: int = 1) -> AppendHandle | None:
        """One batch of `records` records to the leader; None if there is no leader or it refused."""
        leader = self.leader_partition()
        if leader is None:
            return None
        self._produced += 1
        payload = value if value is not None else b"v%d" % self._produced
        batch = build_batch_columnar([b"k"] * records, [payload] * records,
                                     timestamps=[self.clock.time_ms()] * records)
        try:
            handle = leader.append(batch, acks=acks)
        except (NotEnoughReplicasError, NotLeaderOrFollowerError):
            self._after()
            return None
        if acks == ACKS_ALL:
            self.pending.append((handle, (handle.first_offset, handle.last_offset + 1, read_batch_header(batch).crc)))
        self._after()
        return handle

    def fetch(self, replica_id: int) -> Step:
        """One fetcher round of `replica_id`."""
        step = self._step(self.nodes[replica_id])
        self._after()
        return step

    def _step(self, node: Node) -> Step:
        if node.follower is None:
            return Step.IDLE
        step = node.follower.step()
        if step is Step.FAILED:
            self.invariants.fetcher_failed(node.replica_id, node.follower.last_error)
        return step

    def fetch_then_crash(self, replica_id: int) -> None:
        """One fetcher round, then the process dies before the round's log start offset
        checkpoint is written (a follower that truncated crashes before checkpointing)."""
        node = self.nodes[replica_id]
        if node.partition is None:
            return
        checkpointed = self._log_start_checkpoint(node)
        self._step(node)
        self._stop(node)
        self._set_log_start_checkpoint(node, checkpointed)
        self._start(node)
        self._after()

    def _log_start_checkpoint(self, node: Node) -> int:
        if node.memory_log is not None:
            return node.memory_log.log_start_checkpoint
        return read_offsets_checkpoint(self._dir(node).parent / LOG_START_OFFSET_CHECKPOINT).get((TOPIC, 0), 0)

    def _set_log_start_checkpoint(self, node: Node, offset: int) -> None:
        if node.memory_log is not None:
            node.memory_log.log_start_checkpoint = offset
        else:
            update_offsets_checkpoints(self._dir(node).parent, TOPIC, 0, {LOG_START_OFFSET_CHECKPOINT: offset})

    def tick(self, ms: int) -> None:
        """Advance the clock; the leader drops lagging followers from the ISR."""
        self.clock.advance(ms)
        leader = self.leader_partition()
        if leader is not None:
            leader.maybe_shrink_isr()
        self._after()

    def flush(self, replica_id: int) -> None:
        """fsync the replica's log."""
        node = self.nodes[replica_id]
        if node.partition is not None:
            node.partition.log.flush()
        self._after()

    def checkpoint_hw(self, replica_id: int) -> None:
        """Write the replica's HW checkpoint (Kafka does this every few seconds)."""
        node = self.nodes[replica_id]
        if node.partition is not None:
            node.hw_checkpoint = node.partition.high_watermark
        self._after()

    def restart(self, replica_id: int, *, clean: bool = False) -> None:
        """Process death and restart before the controller notices (kill -9, or a quick clean
        restart): no byte lost, HW back to its checkpoint."""
        node = self.nodes[replica_id]
        if node.partition is None:
            return
        if not clean:
            self.faults["sigkill"] += 1
        self._stop(node, clean=clean)
        self._start(node)
        self._after()

    def bounce(self, replica_id: int) -> None:
        """kill -9; the controller notices (fenced, out of the ISR), and the broker starts again."""
        node = self.nodes[replica_id]
        if node.partition is None:
            return
        self.faults["bounce"] += 1
        self._stop(node)
        self.controller.fail(replica_id)
        self._after()
        self._start(node)
        self._after()

    def fail(self, replica_id: int) -> None:
        """Machine failure: unflushed bytes lost, even on the last live ISR replica; the
        controller is told."""
        node = self.nodes[replica_id]
        if node.partition is None:
            return
        if not (self.controller.isr & self.controller.live) - {replica_id}:
            self.faults["last_isr_replica_power_loss"] += 1
        self._stop(node, lose_unflushed=True)
        self.controller.fail(replica_id)
        self._after()

    def fail_together(self, lose_unflushed: dict[int, bool]) -> None:
        """Several machines fail at the same moment (each losing its unflushed bytes, or
        killed with its page cache kept); the controller learns of all of them in one event,
        in the dict's order."""
        for replica_id, lose in lose_unflushed.items():
            self._stop(self.nodes[replica_id], lose_unflushed=lose)
        self.controller.fail(*lose_unflushed)
        self._after()

    def power_loss_of_the_isr(self, rng: random.Random) -> None:
        """Every live ISR replica fails at once, in a random order, each having flushed to a
        point of its own between its recovery point and its log end; none keeps more."""
        members = sorted(self.controller.isr & self.controller.live)
        if not members:
            return
        self.faults["isr_power_loss"] += 1
        rng.shuffle(members)
        for replica_id in members:
            log = self.nodes[replica_id].partition.log
            log.flush(rng.randint(log.recovery_point, log.log_end_offset))
        self.fail_together(dict.fromkeys(members, True))

    def lose_fetch_response(self, replica_id: int) -> None:
        """The follower's fetch reaches the leader (which moves its HW), but the follower dies
        before it applies the response: the seed's window between two fetch rounds."""
        node = self.nodes[replica_id]
        assert node.partition is not None and node.follower is not None
        state = node.partition.follower_state()
        assert state is not None
        log = node.partition.log
        latest = node.partition.epochs.latest_epoch()
        request = FetchRequest(TOPIC, 0, replica_id, log.log_end_offset, 1 << 20,
                               -1 if self.truncate_to_hw else state[1],
                               -1 if self.truncate_to_hw or latest is None else latest, log.log_start_offset)
        self.transport.fetch(state[0], request)
        self._after()

    def recover(self, replica_id: int) -> None:
        """Start a failed replica's broker again."""
        node = self.nodes[replica_id]
        if node.partition is None:
            self._start(node)
        self._after()

    def recover_all(self, rng: random.Random) -> None:
        """Start every failed replica's broker again, in a random order."""
        down = [n.replica_id for n in self.nodes if n.partition is None]
        if len(down) > 1:
            self.faults["random_restart_order"] += 1
        rng.shuffle(down)
        for replica_id in down:
            self.recover(replica_id)

    def elect_preferred(self) -> None:
        """Preferred-replica election."""
        self.controller.elect_preferred()
        self._after()

    def controlled_shutdown(self, replica_id: int) -> None:
        """Move leadership away, then stop cleanly (everything flushed)."""
        node = self.nodes[replica_id]
        if node.partition is None or len(self.controller.live) < 2:
            return
        self.controller.controlled_shutdown(replica_id)
        self._stop(node, clean=True)
        self._after()

    def delete_records(self, fraction: float) -> None:
        """Move the leader's log start offset up (DeleteRecords / retention), at most to its HW."""
        leader = self.leader_partition()
        if leader is not None:
            log = leader.log
            target = log.log_start_offset + int((log.high_watermark - log.log_start_offset) * fraction)
            if log.maybe_increment_log_start_offset(target, "client_record_deletion") \
                    and leader.retention is not None:
                leader.retention(log)  # retention drops the segments wholly below the start
        self._after()

    def power_loss_after_delete_records(self, fraction: float) -> None:
        """DeleteRecords on the leader (which moves its recovery point up without a flush, as
        Kafka's does), then the leader's machine fails."""
        leader = self.controller.leader
        self.delete_records(fraction)
        if leader is not None:
            self.fail(leader)

    def isolate(self) -> None:
        """The controller gives up on the leader while it keeps running (see the docstring)."""
        leader = self.controller.leader
        if leader is not None and len(self.controller.live) > 1:
            self.nodes[leader].isolated = True
            self.controller.fail(leader)
        self._after()

    def produce_to_zombie(self) -> None:
        """A producer with stale metadata writes acks=all to an isolated old leader."""
        for node in self.nodes:
            if node.isolated and node.partition is not None:
                batch = build_batch_columnar([b"k"], [b"zombie"], timestamps=[self.clock.time_ms()])
                try:
                    handle = node.partition.append(batch)
                except (NotEnoughReplicasError, NotLeaderOrFollowerError):
                    break
                self.pending.append((handle, (handle.first_offset, handle.last_offset + 1,
                                              read_batch_header(batch).crc)))
                node.partition.maybe_shrink_isr()  # its AlterPartition is refused: stale epoch
                break
        self._after()

    def reconnect(self) -> None:
        """Isolated replicas reach the controller again and learn the current leader."""
        for node in self.nodes:
            if node.isolated and node.partition is not None:
                node.isolated = False
                self.controller.startup(node.partition)
        self._after()

    def heal(self, rounds: int = 40) -> None:
        """Bring every broker back and fetch until all replicas match the leader."""
        for node in self.nodes:
            if node.isolated:
                node.isolated = False
                if node.partition is not None:
                    self.controller.startup(node.partition)
        for node in self.nodes:
            if node.partition is None:
                self._start(node)
        self._after()
        for _ in range(rounds):
            leader = self.leader_partition()
            if leader is None:
                break  # check_healed reports it
            for node in self.nodes:
                if node.partition is not leader:
                    self.fetch(node.replica_id)
            end = leader.log_end_offset
            if leader.high_watermark == end and len(self.controller.isr) == len(self.nodes) and all(
                    n.partition is leader or (n.follower is not None and n.follower.fetched_in_current_epoch
                                              and n.partition.high_watermark == end) for n in self.nodes):
                break
        self.invariants.check_healed(self)

    def close(self) -> None:
        """Close every open partition (data flushed)."""
        for node in self.nodes:
            if node.partition is not None:
                self._stop(node, clean=True)

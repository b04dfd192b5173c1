"""KIP-966 completed: a replica's own files say whether it stopped cleanly (the clean-shutdown
marker with its broker epoch), broker registrations get epochs (KIP-903) and stale ones may not
change the ISR, and unclean recovery (last-known ELR, `unclean.recovery.strategy`) brings back
a partition whose ISR and ELR emptied, electing the longest log."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logstore import Log
from logstore.clean_shutdown import NO_BROKER_EPOCH, marker_bytes, read_marker
from logstore.clock import ManualClock
from logstore.errors import InvalidConfigError
from logstore.log_files import CLEAN_SHUTDOWN_FILE
from logstore.replication import BrokerRegistry, Controller, Partition
from logstore.replication.election import (
    ReplicaLogInfo,
    UncleanRecoveryStrategy,
    last_known_elr,
    unclean_recovery_leader,
)
from logstore.replication.follower import Follower
from logstore.replication.transport import InProcessTransport
from tests.simulation.cluster import SimCluster
from tests.simulation.invariants import batch_ids
from tests.simulation.memory_log import MemoryLog

BACKENDS = ("memory", "disk")
BALANCED, AGGRESSIVE, NONE = (UncleanRecoveryStrategy.BALANCED, UncleanRecoveryStrategy.AGGRESSIVE,
                              UncleanRecoveryStrategy.NONE)


# ---------------------------------------------------------------- the two cases


def test_smallest_case_through_the_public_api_keeps_m2() -> None:
    """The issue's smallest case, driven as the README documents: `Controller.startup(p)`, no flag."""
    clock = ManualClock(1_000_000)
    transport = InProcessTransport()
    controller = Controller([0, 1], min_insync_replicas=2)
    logs = [MemoryLog("t", 0, {"min.insync.replicas": 2}, clock) for _ in range(2)]

    def start(i: int) -> Partition:
        logs[i].reopen()
        partition = Partition(logs[i], i, clock=clock, previous_broker_epoch=logs[i].clean_shutdown_broker_epoch)
        transport.register(partition)
        controller.startup(partition)
        return partition

    leader, follower = start(0), start(1)
    fetcher = Follower(follower, transport)
    fetcher.step()
    fetcher.step()
    m1 = leader.append([(b"k", b"m1")])
    fetcher.step()
    fetcher.step()
    logs[1].flush()  # replica 1 flushed m1 only
    m2 = leader.append([(b"k", b"m2")])
    fetcher.step()
    fetcher.step()
    logs[0].flush()  # replica 0 flushed both
    assert m1.is_committed and m2.is_committed
    for i in (0, 1):  # both lose power
        transport.unregister(i, "t", 0)
        logs[i].crash()
    controller.fail(0, 1)
    restarted = start(1)  # first back, log end 1
    assert controller.leader is None, controller
    start(0)
    assert controller.leader == 0
    fetcher = Follower(restarted, transport)
    for _ in range(4):
        fetcher.step()
    assert restarted.log.batch_ids() == logs[0].batch_ids() and restarted.log_end_offset == 2


def _m2_on_replica_0_only_flushed(tmp_path: Path, backend: str) -> tuple[SimCluster, tuple[int, int, int]]:
    """ISR [0, 1], min ISR 2; m1 and m2 acknowledged; replica 0 flushed both, replica 1 only m1;
    both lose power at once."""
    c = SimCluster(backend=backend, root=tmp_path, replicas=2, config={"min.insync.replicas": 2})
    c.fetch(1)
    c.fetch(1)
    assert c.controller.isr == {0, 1}
    m1 = c.produce()
    c.fetch(1)
    c.fetch(1)
    c.flush(1)
    m2 = c.produce()
    c.fetch(1)
    c.fetch(1)
    c.flush(0)
    assert m1 is not None and m1.is_committed and m2 is not None and m2.is_committed
    m2_id = c.invariants.acked[m2.first_offset]
    c.fail_together({0: True, 1: True})
    assert c.controller.leader is None and c.controller.isr == frozenset()
    return c, m2_id


@pytest.mark.parametrize("backend", BACKENDS)
def test_replica_that_lost_m2_is_not_elected_when_it_restarts_first(tmp_path: Path, backend: str) -> None:
    c, m2 = _m2_on_replica_0_only_flushed(tmp_path, backend)
    c.recover(1)  # its log ends at 1; its registration shows the unclean stop
    assert c.controller.leader is None, c.controller
    assert 1 not in c.controller.elr
    c.recover(0)
    assert c.controller.leader == 0
    c.heal()
    assert c.invariants.violations == []
    assert all(m2 in batch_ids(n.partition.log) for n in c.nodes)
    c.close()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("first", [0, 1])
def test_both_isr_members_power_lost_then_back_end_with_a_leader_holding_m2(
        tmp_path: Path, backend: str, first: int) -> None:
    c, m2 = _m2_on_replica_0_only_flushed(tmp_path, backend)
    c.recover(first)
    c.recover(1 - first)
    leader = c.leader_partition()
    assert leader is not None and m2 in batch_ids(leader.log)
    c.heal()
    assert c.invariants.violations == [] and not c.invariants.lost_everywhere
    a, b = (batch_ids(n.partition.log) for n in c.nodes)
    assert a == b and m2 in a
    c.close()


def test_every_holder_losing_a_record_is_counted_not_hidden() -> None:
    c = SimCluster(replicas=2, config={"min.insync.replicas": 2})
    c.fetch(1)
    c.fetch(1)
    m1 = c.produce()
    c.fetch(1)
    c.fetch(1)
    assert m1 is not None and m1.is_committed
    m1_id = c.invariants.acked[m1.first_offset]
    c.fail_together({0: True, 1: True})  # nobody flushed m1
    c.recover(0)
    c.recover(1)
    c.heal()
    assert c.invariants.violations == []
    assert c.invariants.lost_everywhere == [m1_id]
    assert c.unclean_elections == 1 and c.controller.leader is not None


# ---------------------------------------------------------------- the clean-shutdown marker


def test_partition_close_writes_the_marker_with_its_broker_epoch(tmp_path: Path) -> None:
    registry = BrokerRegistry()
    registry.register(7)  # epoch 0 is someone else's
    p = Partition.open(tmp_path / "t-0", 7, clock=ManualClock(0))
    Controller([7], brokers=registry).startup(p)
    assert p.broker_epoch == 1 and registry.is_current(7, 1)
    p.close()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).read_bytes() == marker_bytes(1) == b'{"broker_epoch":"1","version":"0"}'
    again = Partition.open(tmp_path / "t-0", 7, clock=ManualClock(0))
    assert again.log.had_clean_shutdown and again.previous_broker_epoch == 1
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()  # taken: it vouches only for the last stop
    assert registry.register(7, again.previous_broker_epoch).unclean_shutdown is False
    again.close()


def test_a_stop_without_close_leaves_no_marker_and_registers_unclean(tmp_path: Path) -> None:
    registry = BrokerRegistry()
    p = Partition.open(tmp_path / "t-0", 1, clock=ManualClock(0))
    controller = Controller([1], brokers=registry)
    controller.startup(p)
    p.append([(b"k", b"v")])
    p.log.flush()
    p.log._release()  # kill -9: the lock goes with the process, nothing else runs
    killed = Partition.open(tmp_path / "t-0", 1, clock=ManualClock(0))
    assert not killed.log.had_clean_shutdown and killed.previous_broker_epoch == NO_BROKER_EPOCH
    assert registry.register(1, killed.previous_broker_epoch).unclean_shutdown
    killed.close()


def test_a_brand_new_replica_is_not_unclean() -> None:
    registry = BrokerRegistry()
    first = registry.register(3)
    assert not first.unclean_shutdown and first.broker_epoch == 0
    assert registry.register(3).unclean_shutdown  # registered before, and no marker this time


def test_standalone_logs_of_one_directory_write_the_marker_when_the_last_closes(tmp_path: Path) -> None:
    a = Log.open(tmp_path / "a-0")
    b = Log.open(tmp_path / "b-0")
    a.close(broker_epoch=4)
    assert read_marker(tmp_path) is None  # b still runs: a crash of b must not look clean
    b.close(broker_epoch=5)
    assert read_marker(tmp_path) == 5
    reader = Log.open(tmp_path / "a-0", read_only=True)
    reader.close()
    assert read_marker(tmp_path) == 5  # a read-only open changes no byte
    reopened = Log.open(tmp_path / "a-0")
    assert reopened.had_clean_shutdown and read_marker(tmp_path) is None
    reopened.close()


def test_memory_log_marker_follows_close_kill_and_crash() -> None:
    log = MemoryLog("t", 0, {}, ManualClock(0))
    assert not log.had_clean_shutdown
    log.close(broker_epoch=3)
    log.reopen()
    assert log.had_clean_shutdown and log.clean_shutdown_broker_epoch == 3
    log.kill()
    log.reopen()
    assert not log.had_clean_shutdown
    log.close(broker_epoch=4)
    log.crash()
    log.reopen()
    assert not log.had_clean_shutdown and log.clean_shutdown_broker_epoch == NO_BROKER_EPOCH


# ---------------------------------------------------------------- broker epochs (KIP-903)


def _pair(**controller_args: object) -> tuple[Controller, list[Partition], InProcessTransport, ManualClock]:
    clock = ManualClock(1_000_000)
    transport = InProcessTransport()
    controller = Controller([0, 1], **controller_args)
    parts = [Partition(MemoryLog("t", 0, {"replica.lag.time.max.ms": 1000}, clock), i, clock=clock)
             for i in range(2)]
    for p in parts:
        transport.register(p)
        controller.startup(p)
    return controller, parts, transport, clock


def test_isr_expansion_from_a_stale_broker_epoch_is_refused() -> None:
    controller, (leader, follower), transport, clock = _pair()
    controller.fail(1)
    stale = follower.broker_epoch
    restarted = Partition(follower.log, 1, clock=clock)  # a new incarnation registers
    controller.startup(restarted)
    assert restarted.broker_epoch > stale
    assert controller.isr == {0}
    leader.fetch(1, 0, 1 << 20, controller.leader_epoch, replica_epoch=stale)  # the old incarnation
    assert controller.isr == {0} and leader.isr == {0}
    leader.fetch(1, 0, 1 << 20, controller.leader_epoch, replica_epoch=restarted.broker_epoch)
    assert controller.isr == {0, 1}


def test_alter_partition_from_a_fenced_leader_broker_is_refused() -> None:
    controller, (leader, follower), _, _ = _pair()
    controller.brokers.fence(0)
    assert not controller.alter_isr(leader, controller.leader_epoch, frozenset({0}))
    assert controller.brokers.unfence(0, leader.broker_epoch)
    assert controller.alter_isr(leader, controller.leader_epoch, frozenset({0}))


def test_followers_send_their_broker_epoch() -> None:
    controller, (leader, follower), transport, _ = _pair()
    f = Follower(follower, transport)
    f.step()
    f.step()
    assert leader.remote_replica(1).broker_epoch == follower.broker_epoch
    assert controller.isr == {0, 1}


def test_a_zombie_reconnecting_keeps_its_broker_epoch_and_is_not_unclean() -> None:
    controller, (leader, follower), _, _ = _pair(min_insync_replicas=2)
    epoch = leader.broker_epoch
    controller.fail(0)
    controller.startup(leader)
    assert leader.broker_epoch == epoch and controller.brokers.is_current(0, epoch)


# ---------------------------------------------------------------- unclean recovery, pure


def test_strategy_names_and_the_unclean_leader_election_mapping() -> None:
    assert UncleanRecoveryStrategy.of(None) is BALANCED
    assert UncleanRecoveryStrategy.of(None, unclean_leader_election_enable=True) is AGGRESSIVE
    assert UncleanRecoveryStrategy.of("None") is NONE and UncleanRecoveryStrategy.of("aggressive") is AGGRESSIVE
    with pytest.raises(InvalidConfigError, match="unclean.recovery.strategy"):
        UncleanRecoveryStrategy.of("Eager")
    assert Controller([0], unclean_leader_election_enable=True).unclean_recovery_strategy is AGGRESSIVE
    assert Controller([0]).unclean_recovery_strategy is BALANCED


def test_last_known_elr_keeps_replicas_that_left_the_elr_below_min_isr() -> None:
    # ISR {0}, ELR {1}: 0 fails, then 1 comes back from an unclean shutdown.
    assert last_known_elr([0], [], [1], [0, 1], [], min_insync_replicas=2) == frozenset()
    assert last_known_elr([], [], [0, 1], [0], [], min_insync_replicas=2) == {1}
    assert last_known_elr([], [2], [0], [0], [1], min_insync_replicas=1) == frozenset()


def _logs(*entries: tuple[int, int, int]) -> dict[int, ReplicaLogInfo]:
    return {r: ReplicaLogInfo(r, e, leo) for r, e, leo in entries}


def test_balanced_waits_for_every_last_known_elr_replica_then_elects_the_longest_log() -> None:
    logs = _logs((1, 3, 10))
    assert unclean_recovery_leader([0, 1, 2], [], [], [0, 1], logs, strategy=BALANCED).leader is None
    logs = _logs((1, 3, 10), (0, 3, 12), (2, 4, 1))
    election = unclean_recovery_leader([0, 1, 2], [], [], [0, 1], logs, strategy=BALANCED)
    assert (election.leader, election.isr, election.unclean) == (2, (2,), True)  # a later epoch wins
    assert unclean_recovery_leader([0, 1, 2], [], [1], [0], logs, strategy=BALANCED).leader is None  # ELR waits
    assert unclean_recovery_leader([0, 1, 2], [], [], [0, 1], logs, strategy=NONE).leader is None


def test_aggressive_elects_from_whatever_answered() -> None:
    logs = _logs((2, 1, 5))
    assert unclean_recovery_leader([0, 1, 2], [0], [], [0, 1], logs, strategy=AGGRESSIVE).leader == 2
    assert unclean_recovery_leader([0, 1, 2], [0], [], [], {}, strategy=AGGRESSIVE).leader is None


@given(st.dictionaries(st.integers(0, 4), st.tuples(st.integers(-1, 5), st.integers(0, 20)), max_size=5),
       st.frozensets(st.integers(0, 4)), st.sampled_from([BALANCED, AGGRESSIVE]))
def test_unclean_recovery_elects_the_longest_answering_log(
        answers: dict[int, tuple[int, int]], last_known: frozenset[int], strategy: UncleanRecoveryStrategy) -> None:
    assignment = [0, 1, 2, 3, 4]
    logs = {r: ReplicaLogInfo(r, e, leo) for r, (e, leo) in answers.items()}
    election = unclean_recovery_leader(assignment, [], [], last_known, logs, strategy=strategy)
    waiting = strategy is BALANCED and not (last_known or set(assignment)) <= set(logs)
    if not logs or waiting:
        assert election.leader is None
        return
    best = max((e, leo) for e, leo in answers.values())
    assert election.unclean and election.leader in logs
    assert (logs[election.leader].last_epoch, logs[election.leader].log_end_offset) == best
    assert election.leader == min(r for r in logs if (logs[r].last_epoch, logs[r].log_end_offset) == best)


def test_without_the_recovery_manager_only_aggressive_elects_the_first_live_replica() -> None:
    for strategy, expected in ((AGGRESSIVE, 1), (BALANCED, None)):
        controller, parts, _, _ = _pair(unclean_recovery_manager_enabled=False, unclean_recovery_strategy=strategy)
        controller.fail(0, 1)
        controller.startup(Partition(MemoryLog("t", 0, {}, parts[1].clock), 1, clock=parts[1].clock))
        assert controller.leader == expected

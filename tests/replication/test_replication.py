"""Partition, Follower and Controller rules: the HW one fetch round behind (seed 001), acks
and min.insync.replicas, ISR shrink and expand, leader-epoch fencing, KIP-320 diverging
epochs, follower truncation and the log start offset. Protocol rules run on the in-memory
log double; tests/simulation and test_replication_disk.py run them on real Logs."""

from __future__ import annotations

import logging
import threading

import pytest

from logstore.clock import ManualClock
from logstore.epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from logstore.errors import (
    FencedLeaderEpochError,
    FetchOffsetOutOfRangeError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
)
from logstore.replication.controller import Controller
from logstore.replication.follower import Follower, Step, truncation_offset
from logstore.replication.partition import ACKS_ALL, EpochEndOffset, Partition
from logstore.replication.transport import FetchRequest, InProcessTransport
from tests.simulation.memory_log import MemoryLog

LAG = 1000


def _partition(replica_id: int, clock: ManualClock, **config: int) -> Partition:
    cfg = {"replica.lag.time.max.ms": LAG, "min.insync.replicas": 1, **config}
    log = MemoryLog("t", 0, {k.replace("_", "."): v for k, v in cfg.items()}, clock)
    return Partition(log, replica_id, clock=clock)


class Trio:
    """Leader 0 and followers 1, 2 wired through a Controller (keeping eligible leader replicas
    unless `elr=False`) and an in-process transport."""

    def __init__(self, *, elr: bool = True, **config: int):
        self.clock = ManualClock(1_000_000)
        self.transport = InProcessTransport()
        self.controller = Controller([0, 1, 2], min_insync_replicas=config.get("min_insync_replicas", 1),
                                     eligible_leader_replicas_enable=elr)
        self.p = [_partition(i, self.clock, **config) for i in range(3)]
        for p in self.p:
            self.transport.register(p)
            self.controller.startup(p)
        self.f = {i: Follower(self.p[i], self.transport) for i in (1, 2)}

    def restart_after_power_loss(self, replica_id: int) -> Partition:
        """The replica's broker lost power (unflushed records gone, no clean-shutdown marker)
        and starts again: a new Partition on its log registers."""
        log = self.p[replica_id].log
        log.crash()
        log.reopen()
        self.p[replica_id] = Partition(log, replica_id, clock=self.clock)
        self.transport.register(self.p[replica_id])
        self.controller.startup(self.p[replica_id])
        return self.p[replica_id]

    def rounds(self, n: int = 1, replicas: tuple[int, ...] = (1, 2)) -> None:
        for _ in range(n):
            for r in replicas:
                self.f[r].step()


def _records(n: int = 1) -> list[tuple[bytes, bytes]]:
    return [(b"k", b"v%d" % i) for i in range(n)]


def test_high_watermark_moves_one_fetch_round_behind_as_in_the_seed() -> None:
    t = Trio()
    t.rounds(2)  # truncation round, then an empty fetch: both join the ISR
    assert t.controller.isr == {0, 1, 2}
    leader, follower = t.p[0], t.p[1]
    leader.append(_records())
    assert (leader.log_end_offset, leader.high_watermark) == (1, 0)
    t.rounds(1, (1,))  # round 1: remote LEO 0 -> HW 0; follower LEO 1, HW 0
    assert leader.remote_replica(1).log_end_offset == 0
    assert (follower.log_end_offset, follower.high_watermark, leader.high_watermark) == (1, 0, 0)
    t.rounds(1, (1,))  # round 2: remote LEO 1, but replica 2 is still at 0
    assert leader.high_watermark == 0
    t.rounds(1, (2,))
    t.rounds(1, (2,))
    assert leader.high_watermark == 1
    t.rounds(1, (1,))
    assert follower.high_watermark == 1


def test_acks_all_completes_when_the_high_watermark_passes_the_batch() -> None:
    t = Trio()
    t.rounds(2)
    handle = t.p[0].append(_records(3), acks=ACKS_ALL)
    assert (handle.first_offset, handle.last_offset) == (0, 2)
    assert not handle.done and not handle.is_committed
    t.rounds(1)
    assert not handle.done
    t.rounds(1)
    assert handle.is_committed and handle.result(0).record_count == 3


@pytest.mark.parametrize("acks", [0, 1])
def test_acks_zero_and_one_complete_at_once(acks: int) -> None:
    t = Trio()
    t.rounds(2)
    handle = t.p[0].append(_records(), acks=acks)
    assert handle.is_committed
    assert t.p[0].high_watermark == 0


def test_min_insync_replicas_refuses_acks_all_when_the_isr_is_too_small_without_elr() -> None:
    t = Trio(min_insync_replicas=2, elr=False)
    assert t.controller.isr == {0}  # followers have not fetched yet
    with pytest.raises(NotEnoughReplicasError):
        t.p[0].append(_records())
    assert t.p[0].append(_records(), acks=1).is_committed
    t.rounds(2)  # truncation, then a fetch below the HW (1): not in the ISR yet
    assert t.controller.isr == {0}
    t.rounds(1)
    assert t.controller.isr == {0, 1, 2}
    assert t.p[0].append(_records()).done is False


def test_acks_all_fails_when_the_isr_shrank_below_min_insync_before_commit_without_elr() -> None:
    t = Trio(min_insync_replicas=2, elr=False)
    t.rounds(2)
    handle = t.p[0].append(_records())
    t.clock.advance(LAG + 1)  # neither follower fetches again
    assert t.p[0].maybe_shrink_isr() == {1, 2}
    assert t.p[0].high_watermark == 1  # committed by the leader alone
    with pytest.raises(NotEnoughReplicasAfterAppendError):
        handle.result(0)


def test_with_elr_the_hw_stands_still_while_the_isr_is_below_min_insync_replicas() -> None:
    # KIP-966: so every eligible leader replica holds everything below the HW.
    t = Trio(min_insync_replicas=2)
    t.rounds(2)
    handle = t.p[0].append(_records())
    t.clock.advance(LAG + 1)
    assert t.p[0].maybe_shrink_isr() == {1, 2}
    assert t.controller.elr == {1, 2}
    assert t.p[0].append(_records(), acks=1).is_committed
    assert t.p[0].high_watermark == 0 and not handle.done
    t.rounds(2, (1,))  # replica 1 rejoins at the HW: the ISR is back to min.insync.replicas
    assert t.controller.isr == {0, 1} and t.controller.elr == frozenset()
    assert t.p[0].high_watermark == 2 and handle.is_committed


def test_isr_shrinks_only_after_lag_time_without_catching_up() -> None:
    t = Trio()
    t.rounds(2)
    t.p[0].append(_records())
    t.clock.advance(LAG)
    assert t.p[0].maybe_shrink_isr() == frozenset()
    t.rounds(1, (1,))
    t.rounds(1, (1,))  # replica 1 caught up again; replica 2 has not fetched
    t.clock.advance(1)
    assert t.p[0].maybe_shrink_isr() == {2}
    assert t.controller.isr == t.p[0].isr == {0, 1}


def test_isr_expands_when_follower_reaches_hw_and_the_epoch_start() -> None:
    t = Trio()
    t.rounds(2)
    t.controller.fail(2)
    assert t.controller.isr == {0, 1}
    for _ in range(3):
        t.p[0].append(_records())
        t.rounds(2, (1,))
    t.controller.startup(t.p[2])
    leader = t.p[0]
    assert leader.high_watermark == 3
    assert t.f[2].step() is Step.FETCHED  # fetch at 0 (same epoch: no truncation): behind the HW
    assert 2 not in leader.isr
    t.f[2].step()  # fetch at 3 = HW: joins
    assert 2 in leader.isr and t.controller.isr == {0, 1, 2}


def test_isr_expansion_waits_for_the_leader_epoch_start_offset() -> None:
    clock = ManualClock(1_000_000)
    leader = _partition(0, clock)
    leader.make_leader(0, [0], [0, 1])
    leader.append(_records(4))
    assert leader.high_watermark == 4
    leader.make_leader(1, [0], [0, 1])
    assert leader.leader_epoch_start_offset == 4
    leader.log.high_watermark = 2  # a new leader's HW may lag its LEO
    leader.fetch(1, 3, 1 << 20, 1, 0)
    assert 1 not in leader.isr  # at the HW, but not past where epoch 1 started
    leader.fetch(1, 4, 1 << 20, 1, 1)
    assert 1 in leader.isr


def test_fetch_checks_the_leader_epoch_and_the_role() -> None:
    t = Trio()
    t.controller.elect_preferred()
    leader = t.p[0]
    leader.make_leader(3, [0, 1, 2], [0, 1, 2])
    with pytest.raises(FencedLeaderEpochError):
        leader.fetch(1, 0, 100, 2, UNDEFINED_EPOCH)
    with pytest.raises(UnknownLeaderEpochError):
        leader.fetch(1, 0, 100, 4, UNDEFINED_EPOCH)
    with pytest.raises(NotLeaderOrFollowerError):
        t.p[1].fetch(2, 0, 100, 0, UNDEFINED_EPOCH)
    with pytest.raises(NotLeaderOrFollowerError):
        leader.fetch(7, 0, 100, 3, UNDEFINED_EPOCH)
    with pytest.raises(FencedLeaderEpochError):
        leader.offsets_for_leader_epoch(1, 0)


def test_fetch_answers_a_diverging_epoch_instead_of_records() -> None:
    clock = ManualClock(1_000_000)
    leader = _partition(0, clock)
    leader.make_leader(0, [0], [0, 1])
    leader.append(_records(5))
    leader.make_leader(2, [0], [0, 1])
    leader.append(_records(3))
    assert leader.epochs.entries() == [(0, 0), (2, 5)]
    response = leader.fetch(1, 7, 1 << 20, 2, 1)  # the follower wrote epoch 1 up to 7
    assert response.records == b"" and response.diverging_epoch == EpochEndOffset(0, 5)
    response = leader.fetch(1, 6, 1 << 20, 2, 0)
    assert response.diverging_epoch == EpochEndOffset(0, 5)
    response = leader.fetch(1, 5, 1 << 20, 2, 0)
    assert response.diverging_epoch is None and response.records


def test_fetch_out_of_range_carries_the_leader_offsets() -> None:
    clock = ManualClock(1_000_000)
    leader = _partition(0, clock)
    leader.make_leader(0, [0], [0, 1])
    leader.append(_records(4))
    leader.log.maybe_increment_log_start_offset(2)
    with pytest.raises(FetchOffsetOutOfRangeError) as info:
        leader.fetch(1, 1, 100, 0, UNDEFINED_EPOCH)
    assert (info.value.log_start_offset, info.value.log_end_offset) == (2, 4)
    with pytest.raises(FetchOffsetOutOfRangeError):
        leader.fetch(1, 5, 100, 0, UNDEFINED_EPOCH)


def test_offsets_for_leader_epoch_answers_like_kafka() -> None:
    clock = ManualClock(1_000_000)
    leader = _partition(0, clock)
    leader.make_leader(1, [0], [0])
    leader.append(_records(3))
    leader.make_leader(4, [0], [0])
    leader.append(_records(2))
    assert leader.offsets_for_leader_epoch(4, 4) == (4, 5)
    assert leader.offsets_for_leader_epoch(4, 3) == (1, 3)
    assert leader.offsets_for_leader_epoch(4, 0) == (0, 0)
    assert leader.offsets_for_leader_epoch(4, UNDEFINED_EPOCH) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def test_truncation_offset_follows_kafkas_rules() -> None:
    clock = ManualClock(1_000_000)
    p = _partition(1, clock)
    for epoch, n in ((0, 3), (2, 4), (3, 2)):
        p.make_leader(epoch, [1], [1])
        p.append(_records(n))
    p.make_follower(0, 5)
    assert p.epochs.entries() == [(0, 0), (2, 3), (3, 7)]
    assert truncation_offset(EpochEndOffset(3, 8), p) == (8, True)
    assert truncation_offset(EpochEndOffset(2, 5), p) == (5, True)
    assert truncation_offset(EpochEndOffset(2, 12), p) == (7, True)
    assert truncation_offset(EpochEndOffset(1, 4), p) == (3, False)  # we never had epoch 1
    assert truncation_offset(EpochEndOffset(UNDEFINED_EPOCH, 6), p) == (6, True)
    p.log.high_watermark = 4
    assert truncation_offset(EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET), p) == (4, True)


def test_follower_truncates_to_the_leaders_epoch_end_not_its_hw() -> None:
    t = Trio()
    t.rounds(2)
    t.p[0].append(_records(2))
    t.rounds(1)  # followers have 2 records, HW 0
    assert t.p[1].high_watermark == 0
    t.controller.fail(0)  # 1 leads (epoch 1), 2 follows
    assert t.controller.leader == 1
    assert t.f[2].step() is Step.TRUNCATED
    assert t.p[2].log_end_offset == 2  # epoch 0 ends at 2 on the new leader: nothing cut


def test_follower_cuts_what_the_new_leader_never_had() -> None:
    t = Trio()
    t.rounds(2)
    t.p[0].append(_records(1))
    t.rounds(2)
    t.p[0].append(_records(2))
    t.rounds(1, (2,))  # only replica 2 has offsets 1..2
    t.controller.fail(0)
    t.controller.elect_preferred()
    assert t.controller.leader == 1
    t.p[1].append(_records(1))  # epoch 1 starts at 1 on the new leader
    assert t.f[2].step() is Step.TRUNCATED
    assert t.p[2].log_end_offset == 1
    t.rounds(2, (2,))
    assert t.p[2].log.batch_ids() == t.p[1].log.batch_ids()


def test_follower_restarts_from_the_leaders_log_start_when_behind_it() -> None:
    t = Trio()
    t.rounds(2)
    t.controller.fail(2)
    for _ in range(5):
        t.p[0].append(_records())
        t.rounds(2, (1,))
    t.p[0].log.maybe_increment_log_start_offset(4)
    t.controller.startup(t.p[2])
    assert t.f[2].step() is Step.OUT_OF_RANGE
    assert t.p[2].log.log_start_offset == t.p[2].log_end_offset == 4
    t.rounds(2, (2,))
    assert t.p[2].log_end_offset == 5


def test_follower_restarts_its_empty_log_at_the_batch_holding_the_leaders_log_start() -> None:
    # DeleteRecords put the leader's start inside a batch: the follower behind it restarts
    # empty at that start, then takes the whole batch (Kafka's appendRecordsToFollowerOrFutureReplica).
    t = Trio()
    t.rounds(2)
    t.controller.fail(2)
    t.p[0].append(_records(3))
    t.p[0].append(_records(2))
    t.rounds(2, (1,))
    t.p[0].log.maybe_increment_log_start_offset(1)
    t.controller.startup(t.p[2])
    assert t.f[2].step() is Step.OUT_OF_RANGE
    assert (t.p[2].log.log_start_offset, t.p[2].log_end_offset) == (1, 1)
    assert t.f[2].step() is Step.FETCHED
    assert t.p[2].log.batch_ids() == t.p[0].log.batch_ids()
    assert (t.p[2].log.log_start_offset, t.p[2].high_watermark) == (1, 5)
    t.rounds(1, (2,))
    assert t.controller.isr == {0, 1, 2}


def test_a_follower_holding_nothing_the_leader_keeps_restarts_at_the_batch_holding_its_start() -> None:
    # A zombie's unreplicated tail ends exactly at the new leader's start, inside its batch:
    # the epochs cannot tell (the leader's history below its start is gone), so the fetch must.
    t = Trio()
    t.rounds(2)
    t.p[0].append(_records(1))
    t.rounds(2)
    t.controller.fail(0)  # replica 0 keeps running, unaware: a zombie leader
    t.p[0].append(_records(2), acks=1)  # offsets 1..2 in epoch 0, never replicated
    t.p[1].append(_records(3))  # offsets 1..3 in epoch 1
    t.rounds(3, (2,))
    t.p[1].log.maybe_increment_log_start_offset(3)
    t.controller.startup(t.p[0])
    zombie = Follower(t.p[0], t.transport)
    assert zombie.step() is Step.TRUNCATED and t.p[0].log_end_offset == 3  # epoch 0 "ends" at 3
    assert zombie.step() is Step.FETCHED
    assert t.p[0].log.batch_ids() == t.p[1].log.batch_ids()
    assert t.p[0].log.log_start_offset == 3
    zombie.step()
    assert t.controller.isr == {0, 1, 2}


def test_a_log_start_moving_during_a_fetch_answers_out_of_range(monkeypatch) -> None:
    t = Trio()
    t.controller.fail(1, 2)
    t.p[0].append(_records(3))
    log = t.p[0].log
    read = log.read

    def read_after_delete_records(offset: int, max_bytes: int):
        log.maybe_increment_log_start_offset(2)  # another thread's DeleteRecords wins the race
        return read(offset, max_bytes)

    monkeypatch.setattr(log, "read", read_after_delete_records)
    t.controller.startup(t.p[1])
    assert t.f[1].step() is Step.TRUNCATED
    assert t.f[1].step() is Step.OUT_OF_RANGE
    assert (t.p[1].log.log_start_offset, t.p[1].log_end_offset) == (2, 2)


def test_follower_takes_the_leaders_log_start_offset_in_one_fetch() -> None:
    t = Trio()
    t.rounds(2)
    for _ in range(4):
        t.p[0].append(_records())
    t.rounds(2)
    t.p[0].log.maybe_increment_log_start_offset(3)
    t.rounds(1)
    assert [p.log.log_start_offset for p in t.p] == [3, 3, 3]


def test_role_change_fails_pending_appends_and_old_epochs_are_ignored() -> None:
    t = Trio()
    t.rounds(2)
    handle = t.p[0].append(_records())
    t.controller.fail(0)
    t.p[0].make_follower(1, t.controller.leader_epoch)
    assert handle.done
    with pytest.raises(NotLeaderOrFollowerError):
        handle.result(0)
    assert t.p[1].make_leader(0, [1], [0, 1, 2]) is False
    assert t.p[1].make_follower(2, 0) is False


def test_fenced_follower_waits_and_an_unreachable_leader_is_retried() -> None:
    t = Trio()
    t.rounds(2)
    t.p[0].make_leader(5, [0, 1, 2], [0, 1, 2])  # epoch moved without the followers knowing
    assert t.f[1].step() is Step.FENCED
    t.transport.unregister(0, "t", 0)
    assert t.f[2].step() is Step.RETRY
    t.p[0].make_follower(1, 6)
    assert Follower(t.p[0], t.transport).step() is Step.RETRY


class _BreaksOnce(InProcessTransport):
    """The first fetch fails with an error no fetcher expects; the second waits for the test."""

    def __init__(self) -> None:
        super().__init__()
        self.fetches = 0
        self.retrying = threading.Event()
        self.resume = threading.Event()

    def fetch(self, leader_id: int, request: FetchRequest):
        self.fetches += 1
        if self.fetches == 1:
            raise RuntimeError("socket closed under the fetcher")
        if self.fetches == 2:
            self.retrying.set()
            self.resume.wait(30)
        return super().fetch(leader_id, request)


def test_follower_thread_survives_an_unexpected_error_shows_it_and_retries(caplog) -> None:
    t = Trio()
    t.transport = transport = _BreaksOnce()
    for p in t.p:
        transport.register(p)
    follower = Follower(t.p[1], transport)
    assert follower.step() is Step.TRUNCATED
    with caplog.at_level(logging.ERROR, logger="logstore.replication.follower"):
        follower.start(interval_s=0.001, backoff_s=0.001)
        try:
            assert transport.retrying.wait(30), "the fetcher thread died"
            assert isinstance(follower.last_error, RuntimeError)
            transport.resume.set()
            assert t.p[0].wait_for_isr(2, timeout_s=30)
        finally:
            follower.stop()
    assert follower.last_error is None
    assert any("t-0" in r.getMessage() and "offset 0" in r.getMessage() for r in caplog.records)


def test_follower_reports_invalid_fetched_records_and_retries() -> None:
    t = Trio()
    t.rounds(2)
    t.p[0].append(_records(2))
    t.p[1].log.append(_records(1))  # a stray record: the next fetched batch starts below its end
    assert t.f[1].step() is Step.FAILED
    assert "below the log end offset" in str(t.f[1].last_error)
    t.p[1].log.truncate_to(0)
    assert t.f[1].step() is Step.FETCHED and t.f[1].last_error is None


def test_controller_elections_bump_the_epoch_and_use_the_seed_strategies() -> None:
    t = Trio()
    t.rounds(2)
    assert (t.controller.leader, t.controller.leader_epoch) == (0, 0)
    t.controller.fail(0)
    assert (t.controller.leader, t.controller.leader_epoch) == (1, 1)
    assert t.p[2].follower_state() == (1, 1)
    t.controller.startup(t.p[0])
    t.rounds(2, (2,))
    old_leader = Follower(t.p[0], t.transport)
    assert old_leader.step() is Step.TRUNCATED
    assert old_leader.step() is Step.FETCHED
    assert t.controller.isr == {0, 1, 2}
    assert t.controller.elect_preferred() and t.controller.leader == 0
    t.controller.controlled_shutdown(0)
    assert t.controller.leader == 1 and 0 not in t.controller.isr
    assert [e for e, _ in t.controller.elections] == [0, 1, 2, 3]


def test_controller_refuses_a_failed_replica_back_into_the_isr() -> None:
    # KIP-841: the controller fenced replica 2, which still fetches from the leader.
    t = Trio()
    t.rounds(2)
    t.controller.fail(2)
    assert t.controller.isr == {0, 1} and t.p[0].isr == {0, 1}
    t.rounds(2)
    assert t.controller.isr == {0, 1} and t.p[0].isr == {0, 1}
    t.controller.startup(t.p[2])
    t.rounds(1)
    assert t.controller.isr == {0, 1, 2}


def test_controller_keeps_the_last_isr_member_without_elr_whatever_it_lost() -> None:
    t = Trio(elr=False)
    t.rounds(2)
    t.controller.fail(2)
    t.controller.fail(0, 1)  # "last replica standing": whichever id comes last
    assert t.controller.leader is None and t.controller.isr == {1}
    t.restart_after_power_loss(1)
    assert t.controller.leader == 1


def test_controller_elects_an_eligible_leader_replica_that_kept_its_data() -> None:
    t = Trio()
    t.rounds(2)
    t.controller.fail(2)
    t.controller.fail(0, 1)
    assert t.controller.leader is None
    assert (t.controller.isr, t.controller.elr) == (frozenset(), {0, 1})
    t.restart_after_power_loss(1)  # lost its unflushed records
    assert t.controller.leader is None and t.controller.elr == {0}
    t.controller.startup(t.p[2])  # never eligible: it left the ISR before the others
    assert t.controller.leader is None
    t.controller.startup(t.p[0])
    assert (t.controller.leader, t.controller.isr, t.controller.elr) == (0, {0}, frozenset())
    assert t.p[0].is_leader and t.p[1].follower_state() == (0, t.controller.leader_epoch)


def test_controller_goes_offline_without_unclean_election_and_recovers_with_it() -> None:
    t = Trio()
    t.controller.fail(1, 2)
    t.controller.fail(0)
    assert t.controller.leader is None and t.controller.isr == frozenset() and t.controller.elr == {0}
    t.controller.startup(t.p[1])
    assert t.controller.leader is None
    unclean = Controller([0, 1, 2], unclean_leader_election_enable=True)
    unclean.isr = frozenset({0})
    unclean.startup(t.p[1])
    assert unclean.leader == 1 and unclean.elections[-1][1].unclean


def test_kip320_follower_truncates_on_the_diverging_epoch_of_a_fetch() -> None:
    t = Trio()
    t.rounds(2)
    t.p[0].append(_records(1))
    t.rounds(2)
    t.p[0].append(_records(2))
    t.rounds(1, (2,))  # only replica 2 has offsets 1..2 (epoch 0)
    t.controller.fail(0)
    t.p[1].append(_records(1))  # epoch 1 starts at 1 on the new leader
    follower = Follower(t.p[2], t.transport, truncate_on_fetch=True)
    assert follower.step() is Step.TRUNCATED  # no OffsetsForLeaderEpoch round
    assert t.p[2].log_end_offset == 3 and not follower.fetched_in_current_epoch
    assert follower.step() is Step.DIVERGED  # the leader says: epoch 0 ends at 1
    assert t.p[2].log_end_offset == 1
    assert follower.step() is Step.FETCHED and follower.fetched_in_current_epoch
    assert t.p[2].log.batch_ids() == t.p[1].log.batch_ids()
    with pytest.raises(ValueError):
        Follower(t.p[2], t.transport, truncate_on_fetch=True, truncate_to_hw=True)


def test_controller_reassignment_moves_leadership_to_the_new_first_replica() -> None:
    t = Trio()
    t.rounds(2)
    t.controller.reassign([2, 1, 0])
    assert (t.controller.leader, t.controller.leader_epoch) == (2, 1)
    assert t.p[2].is_leader and t.p[0].follower_state() == (2, 1)
    t.controller.reassign([2, 0])
    assert t.controller.leader_epoch == 1  # still the right leader: no election

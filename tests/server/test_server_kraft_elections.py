"""The active quorum's elections, as Kafka 4.0's quorum holds them: KIP-966's eligible
leader replicas once `eligible.leader.replicas.version` is finalized (off by default, as in
Kafka 4.0), the last-known leader and the unclean recovery strategies, controlled shutdown,
preferred and unclean elections (ElectLeaders) and an operator's move of a leader."""

from __future__ import annotations

import uuid

import pytest

from logstore.clean_shutdown import NO_BROKER_EPOCH
from logstore.clock import ManualClock
from logstore.errors import InvalidReplicationError
from logstore.server import error_codes as ec
from logstore.server.kraft.metadata_records import ELIGIBLE_LEADER_REPLICAS_VERSION, RECOVERING
from logstore.server.kraft.partition_change import ElectionKind
from tests.server.test_server_kraft_controller import (
    CLUSTER,
    FEATURES,
    SESSION_MS,
    beat,
    join,
    listeners,
    start,
)
from tests.support.clock import NOW


def state(quorum, topic: str = "orders", partition: int = 0):
    return quorum.image.topic(topic).partitions[partition]


@pytest.fixture
def quorum_clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def quorum(tmp_path, quorum_clock):
    """The active quorum of a fresh metadata log."""
    controller = start(tmp_path, quorum_clock)
    yield controller
    controller.close()


@pytest.fixture(autouse=True)
def in_broker_order(monkeypatch):
    """Every partition's replicas are (1, 2, 3), led by 1: fixed, so the scenarios read plainly."""
    monkeypatch.setattr("logstore.server.kraft.quorum_controller.assign_replicas",
                        lambda count, factor, brokers: {i: sorted(brokers)[:factor] for i in range(count)})


def three_brokers(quorum, *, elr: bool, partitions: int = 1, configs: dict | None = None) -> None:
    """Brokers 1-3 and `orders`, replicas (1, 2, 3) led by 1 in every partition."""
    for broker_id in (1, 2, 3):
        join(quorum, broker_id)
    if elr:
        quorum.update_feature(ELIGIBLE_LEADER_REPLICAS_VERSION, 1)
    quorum.create_topic("orders", partitions, 3, configs)


def fence(quorum, *broker_ids: int) -> None:
    for broker_id in broker_ids:
        quorum.heartbeat(broker_id, quorum.image.brokers[broker_id].broker_epoch,
                         current_metadata_offset=quorum.log.end_offset, want_fence=True)


def rejoin(quorum, broker_id: int, *, clean: bool = True) -> None:
    """The broker registers again, naming its last epoch (a clean stop) or none, and catches up."""
    previous = quorum.image.brokers[broker_id].broker_epoch if clean else NO_BROKER_EPOCH
    registration = quorum.register_broker(broker_id, cluster_id=CLUSTER, incarnation_id=uuid.uuid4(),
                                          listeners=listeners(broker_id), features=FEATURES,
                                          previous_broker_epoch=previous)
    quorum.heartbeat(broker_id, registration.broker_epoch, current_metadata_offset=quorum.log.end_offset)


def test_elr_is_off_by_default_as_in_kafka_4_0_and_the_last_isr_member_stays(quorum):
    three_brokers(quorum, elr=False)
    assert ELIGIBLE_LEADER_REPLICAS_VERSION not in quorum.image.features
    fence(quorum, 2, 3, 1)
    p = state(quorum)
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (-1, [1], [], [])
    rejoin(quorum, 2)
    assert state(quorum).leader == -1  # 2 is not in the ISR: no clean election
    rejoin(quorum, 1)
    assert (state(quorum).leader, state(quorum).isr) == (1, [1])


def test_with_elr_fenced_isr_members_below_min_isr_become_eligible_and_lead_on_return(quorum):
    three_brokers(quorum, elr=True, configs={"min.insync.replicas": "2"})
    fence(quorum, 3)
    assert (state(quorum).isr, state(quorum).elr) == ([1, 2], [])  # at min ISR: no ELR yet
    fence(quorum, 2)
    assert (state(quorum).isr, state(quorum).elr) == ([1], [2])
    fence(quorum, 1)
    p = state(quorum)
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (-1, [], [1, 2], [1])
    rejoin(quorum, 3)
    assert state(quorum).leader == -1  # 3 left before the ISR shrank below min ISR
    rejoin(quorum, 2)
    p = state(quorum)
    assert (p.leader, p.isr, p.elr, p.last_known_elr, p.leader_recovery_state) == (2, [2], [1], [], 0)


def test_an_unclean_shutdown_takes_a_broker_out_of_the_isr_and_the_elr(quorum):
    three_brokers(quorum, elr=True, configs={"min.insync.replicas": "3"})
    fence(quorum, 3)
    assert (state(quorum).isr, state(quorum).elr) == ([1, 2], [3])
    rejoin(quorum, 3, clean=False)
    assert (state(quorum).isr, state(quorum).elr) == ([1, 2], [])


@pytest.mark.parametrize("strategy, leader", [("None", -1), ("Balanced", 1), ("Aggressive", 2)])
def test_unclean_recovery_follows_the_topics_strategy(quorum, strategy, leader):
    """ISR and ELR empty (1, the last leader, came back from an unclean stop): None stays
    offline, Balanced waits for the last-known leader, Aggressive takes whoever is up."""
    three_brokers(quorum, elr=True, configs={"unclean.recovery.strategy": strategy})
    fence(quorum, 3, 2, 1)
    assert (state(quorum).isr, state(quorum).elr, state(quorum).last_known_elr) == ([], [1], [1])
    rejoin(quorum, 2)
    rejoin(quorum, 1, clean=False)
    p = state(quorum)
    assert p.leader == leader
    if leader != -1:
        assert (p.isr, p.elr, p.last_known_elr, p.leader_recovery_state) == ([leader], [], [], RECOVERING)


def test_unclean_leader_election_enable_elects_any_live_replica_without_elr(quorum):
    three_brokers(quorum, elr=False, configs={"unclean.leader.election.enable": "true"})
    fence(quorum, 2, 3, 1)
    rejoin(quorum, 3)
    p = state(quorum)
    assert (p.leader, p.isr, p.leader_recovery_state) == (3, [3], RECOVERING)


def test_turning_elr_off_clears_every_partitions_elr(quorum):
    three_brokers(quorum, elr=True, configs={"min.insync.replicas": "3"})
    fence(quorum, 3)
    quorum.update_feature(ELIGIBLE_LEADER_REPLICAS_VERSION, 0)
    assert (state(quorum).elr, quorum.image.eligible_leader_replicas_enabled) == ([], False)


def test_the_elr_survives_a_restart_through_the_snapshot_and_the_log(tmp_path, quorum_clock):
    quorum = start(tmp_path, quorum_clock)
    three_brokers(quorum, elr=True, configs={"min.insync.replicas": "3"})
    fence(quorum, 3)
    quorum.snapshot()
    fence(quorum, 2)
    before = state(quorum)
    quorum.close()
    again = start(tmp_path, quorum_clock)
    assert state(again) == before and (before.isr, before.elr) == ([1], [2, 3])
    again.close()


def test_a_broker_shutting_down_hands_its_leaderships_over_before_it_is_told_to_stop(quorum):
    three_brokers(quorum, elr=False, partitions=2)
    quorum.move_leader("orders", 1, 2)
    epoch = quorum.image.brokers[1].broker_epoch
    reply = quorum.heartbeat(1, epoch, current_metadata_offset=quorum.log.end_offset, want_shut_down=True)
    # leaderships moved, 1 out of every ISR, but 2 has not replayed that yet: not yet
    assert (reply.should_shut_down, reply.is_fenced) == (False, False)
    assert [(state(quorum, partition=i).leader, state(quorum, partition=i).isr) for i in (0, 1)] == \
        [(2, [2, 3]), (2, [2, 3])]
    assert quorum.image.brokers[1].in_controlled_shutdown
    beat(quorum, 2, 3)
    reply = quorum.heartbeat(1, epoch, current_metadata_offset=quorum.log.end_offset, want_shut_down=True)
    assert (reply.should_shut_down, reply.is_fenced) == (True, True)


def test_a_broker_in_controlled_shutdown_may_neither_lead_nor_join_an_isr(quorum):
    three_brokers(quorum, elr=False)
    epoch = quorum.image.brokers[3].broker_epoch
    quorum.heartbeat(3, epoch, current_metadata_offset=0, want_shut_down=True)
    with pytest.raises(InvalidReplicationError):
        quorum.move_leader("orders", 0, 3)
    p = state(quorum)
    topic_id = quorum.image.topic_ids["orders"]
    error = quorum.alter_partition(1, quorum.image.brokers[1].broker_epoch, topic_id, 0,
                                       leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch,
                                       new_isr=[(1, NO_BROKER_EPOCH), (2, NO_BROKER_EPOCH), (3, epoch)])
    assert error == ec.INELIGIBLE_REPLICA


def test_move_leader_goes_only_to_a_live_in_sync_replica(quorum):
    three_brokers(quorum, elr=False)
    before = state(quorum).leader_epoch
    assert quorum.move_leader("orders", 0, 3) == before + 1
    assert (state(quorum).leader, state(quorum).isr) == (3, [1, 2, 3])
    assert quorum.move_leader("orders", 0, 3) == before + 1  # leads already: nothing to do
    fence(quorum, 2)
    with pytest.raises(InvalidReplicationError, match="may not lead"):
        quorum.move_leader("orders", 0, 2)
    with pytest.raises(InvalidReplicationError, match="no partition"):
        quorum.move_leader("orders", 7, 1)


def test_preferred_and_unclean_elections_answer_as_kafkas_controller(quorum):
    three_brokers(quorum, elr=False, partitions=2)
    quorum.move_leader("orders", 1, 3)
    assert quorum.elect_leaders(ElectionKind.PREFERRED, [("orders", 0), ("orders", 1), ("nope", 0)]) == {
        ("orders", 0): ec.ELECTION_NOT_NEEDED, ("orders", 1): ec.NONE, ("nope", 0): ec.UNKNOWN_TOPIC_OR_PARTITION}
    assert state(quorum, partition=1).leader == 1
    assert quorum.elect_leaders(ElectionKind.PREFERRED, None) == {}  # every preferred replica leads
    quorum.move_leader("orders", 0, 2)
    fence(quorum, 1)
    assert quorum.elect_leaders(ElectionKind.PREFERRED, [("orders", 0)]) == {
        ("orders", 0): ec.PREFERRED_LEADER_NOT_AVAILABLE}
    assert quorum.elect_leaders(ElectionKind.UNCLEAN, [("orders", 0)]) == {("orders", 0): ec.ELECTION_NOT_NEEDED}
    fence(quorum, 2, 3)
    rejoin(quorum, 2)  # not in the ISR ([3]): only an unclean election brings the partition back
    assert state(quorum).leader == -1
    assert quorum.elect_leaders(ElectionKind.UNCLEAN, [("orders", 0)]) == {("orders", 0): ec.NONE}
    assert (state(quorum).leader, state(quorum).isr) == (2, [2])
    rejoin(quorum, 1)
    assert quorum.elect_leaders(ElectionKind.UNCLEAN, [("orders", 1)]) == {("orders", 1): ec.NONE}


def test_an_unknown_recovery_strategy_is_refused_at_creation(quorum):
    join(quorum, 1)
    with pytest.raises(Exception, match="unclean.recovery.strategy"):
        quorum.create_topic("orders", 1, 1, {"unclean.recovery.strategy": "Reckless"})


def test_a_session_timeout_fences_as_a_clean_fence_does(quorum, quorum_clock):
    three_brokers(quorum, elr=True, configs={"min.insync.replicas": "3"})
    quorum_clock.advance(SESSION_MS // 2)
    beat(quorum, 1, 2)
    quorum_clock.advance(SESSION_MS // 2 + 1)
    assert quorum.check_sessions() == [3]
    assert (state(quorum).isr, state(quorum).elr) == ([1, 2], [3])

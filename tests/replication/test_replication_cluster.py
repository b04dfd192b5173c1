"""Replica assignment and leader election strategies, as seed 004 and Kafka's controller describe."""

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logstore.errors import InvalidReplicationError
from logstore.replication import (
    Election,
    assign_replicas,
    controlled_shutdown_leader,
    eligible_leader_replicas,
    isr_after_fencing,
    offline_partition_leader,
    preferred_replica_leader,
    rack_alternated_brokers,
    reassigned_partition_leader,
)


def test_first_replicas_walk_the_broker_list_from_the_start_index():
    # Seed 004: 5 brokers, 5 partitions, partition 0 on broker 4 -> 1 on 5, 2 on 1, 3 on 2, 4 on 3.
    plan = assign_replicas(5, 1, [1, 2, 3, 4, 5], fixed_start_index=3)
    assert [plan[p][0] for p in range(5)] == [4, 5, 1, 2, 3]


def test_followers_shift_by_next_replica_shift_and_shift_grows_each_round():
    plan = assign_replicas(10, 3, [0, 1, 2, 3, 4], fixed_start_index=0)
    assert plan[0] == [0, 1, 2]
    assert plan[4] == [4, 0, 1]
    # After a full round over the brokers the follower shift grows by one.
    assert plan[5] == [0, 2, 3]


@given(
    n_brokers=st.integers(1, 12), n_partitions=st.integers(1, 40), data=st.data(),
    seed=st.integers(0, 2**32),
)
def test_assignment_never_puts_two_replicas_of_a_partition_on_one_broker(n_brokers, n_partitions, data, seed):
    rf = data.draw(st.integers(1, n_brokers))
    plan = assign_replicas(n_partitions, rf, list(range(100, 100 + n_brokers)), rng=random.Random(seed))
    assert sorted(plan) == list(range(n_partitions))
    for replicas in plan.values():
        assert len(replicas) == rf == len(set(replicas))


def test_leaders_are_spread_evenly():
    plan = assign_replicas(30, 3, list(range(6)), rng=random.Random(7))
    assert set(Counter(r[0] for r in plan.values()).values()) == {5}


def test_rack_alternated_list_takes_one_broker_per_rack_in_turn():
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "a"}
    assert rack_alternated_brokers(racks) == [0, 2, 4, 1, 3, 5]


@given(seed=st.integers(0, 2**32), n_partitions=st.integers(1, 30))
def test_rack_aware_assignment_spreads_each_partition_over_distinct_racks(seed, n_partitions):
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    plan = assign_replicas(n_partitions, 3, racks, rng=random.Random(seed))
    for replicas in plan.values():
        assert len(set(replicas)) == 3
        assert {racks[b] for b in replicas} == {"a", "b", "c"}


@pytest.mark.parametrize(
    ("partitions", "rf", "brokers"),
    [(0, 1, [1]), (1, 0, [1]), (1, 3, [1, 2]), (1, 1, {1: "a", 2: None})],
)
def test_impossible_assignments_raise(partitions, rf, brokers):
    with pytest.raises(InvalidReplicationError):
        assign_replicas(partitions, rf, brokers)


def test_offline_election_prefers_the_first_live_in_sync_replica_in_assignment_order():
    result = offline_partition_leader([1, 2, 3], isr=[2, 3], live={2, 3})
    assert (result.leader, result.isr, result.unclean) == (2, (2, 3), False)


def test_offline_election_without_a_live_isr_member_fails_unless_unclean_is_enabled():
    assert offline_partition_leader([1, 2, 3], isr=[1], live={2, 3}).leader is None
    unclean = offline_partition_leader([1, 2, 3], isr=[1], live={3, 2}, unclean_leader_election_enable=True)
    assert (unclean.leader, unclean.isr, unclean.unclean) == (2, (2,), True)


def test_reassignment_election_picks_first_new_replica_that_is_live_and_in_sync():
    assert reassigned_partition_leader([4, 5, 2], isr=[2, 5], live={2, 4, 5}).leader == 5
    assert reassigned_partition_leader([4, 6], isr=[2, 5], live={2, 4, 5}).leader is None


def test_preferred_replica_election_only_succeeds_for_a_live_in_sync_first_replica():
    assert preferred_replica_leader([3, 1, 2], isr=[1, 2, 3], live={1, 2, 3}).leader == 3
    assert preferred_replica_leader([3, 1, 2], isr=[1, 2], live={1, 2, 3}).leader is None
    assert preferred_replica_leader([3, 1, 2], isr=[1, 2, 3], live={1, 2}).leader is None


def test_controlled_shutdown_moves_leadership_and_shrinks_the_isr():
    result = controlled_shutdown_leader([1, 2, 3], isr=[1, 2, 3], live={1, 2, 3}, shutting_down={1})
    assert (result.leader, result.isr) == (2, (2, 3))
    assert controlled_shutdown_leader([1], isr=[1], live={1}, shutting_down={1}).leader is None


def test_fenced_replicas_all_leave_the_isr_with_elr_and_the_last_one_stays_without():
    assert isr_after_fencing([1, 2, 3], [1, 2], eligible_leader_replicas=False) == frozenset({3})
    assert isr_after_fencing([1, 2], [1, 2], eligible_leader_replicas=False) == frozenset({2})
    assert isr_after_fencing([1, 2], [2, 1], eligible_leader_replicas=False) == frozenset({1})
    assert isr_after_fencing([1, 2], [1, 2], eligible_leader_replicas=True) == frozenset()


def test_eligible_leader_replicas_are_those_that_left_an_isr_below_min_insync_replicas():
    # KIP-966 (Kafka's PartitionChangeBuilder.populateTargetElr).
    assert eligible_leader_replicas([1, 2, 3], [1, 2], (), min_insync_replicas=2) == frozenset()
    assert eligible_leader_replicas([1, 2], [1], (), min_insync_replicas=2) == frozenset({2})
    assert eligible_leader_replicas([1], [], [2], min_insync_replicas=2) == frozenset({1, 2})
    assert eligible_leader_replicas([1], [], [2], min_insync_replicas=2, unclean_shutdown=[2]) == frozenset({1})
    assert eligible_leader_replicas([], [2], [1, 2], min_insync_replicas=2) == frozenset({1})
    assert eligible_leader_replicas([2], [2, 3], [1], min_insync_replicas=2) == frozenset()


def test_an_eligible_leader_replica_leads_only_when_the_isr_is_empty():
    assert offline_partition_leader([1, 2, 3], isr=[], live={2, 3}, elr=[3, 1]) == Election(3, (3,))
    assert offline_partition_leader([1, 2, 3], isr=[2], live={2, 3}, elr=[3]).leader == 2
    assert offline_partition_leader([1, 2, 3], isr=[], live={2}, elr=[1, 3]).leader is None
    unclean = offline_partition_leader([1, 2, 3], isr=[], live={2}, elr=[1], unclean_leader_election_enable=True)
    assert (unclean.leader, unclean.unclean) == (2, True)
    assert preferred_replica_leader([3, 1, 2], isr=[], live={1, 2, 3}, elr=[3]).leader == 3
    assert reassigned_partition_leader([4, 5], isr=[], live={4, 5}, elr=[5]).leader == 5
    shutdown = controlled_shutdown_leader([1, 2], isr=[1], live={1, 2}, shutting_down={1}, elr=[2])
    assert (shutdown.leader, shutdown.isr) == (2, (2,))

"""Leaderships moving on a running cluster: a broker stopping cleanly hands its leaderships over
before it stops (controlled shutdown), so the next produce is answered by its successor at once;
and an operator moves a leader to another in-sync replica, which the brokers follow."""

from __future__ import annotations

from logstore.server import error_codes as ec
from tests.server.test_server_kraft_cluster import (  # noqa: F401 (the cluster fixture)
    cluster,
    eventually,
    produce,
    replicated,
    three_records_replicated,
)


def test_a_clean_stop_hands_the_leadership_over_before_the_broker_goes(cluster):
    index, first = three_records_replicated(cluster)
    cluster.stop(first)  # returns once the controller said shouldShutDown
    state = cluster.controller.image.topic("orders").partitions[index]
    assert state.leader != first and first not in state.isr
    assert first not in cluster.controller.image.unfenced_brokers()
    # the successor knew it led before the stop returned: no retry, no wait
    assert produce(cluster.nodes[state.leader].port, "orders", index, b"d", acks=-1) == ec.NONE


def test_a_moved_leader_serves_and_the_old_one_follows_it(cluster):
    index, first = three_records_replicated(cluster)
    target = next(n for n in (1, 2, 3) if n != first)
    epoch = cluster.nodes[1].move_leader("orders", index, target)
    assert epoch == cluster.controller.image.topic("orders").partitions[index].leader_epoch
    eventually(lambda: produce(cluster.nodes[target].port, "orders", index, b"d") == ec.NONE)
    assert produce(cluster.nodes[first].port, "orders", index, b"e") == ec.NOT_LEADER_OR_FOLLOWER
    replicated(cluster, "orders", index, 4)

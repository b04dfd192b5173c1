"""A leader in a `logstore serve` cluster changes its partitions' ISR by lag, through
AlterPartition at the controller (Kafka's maybeShrinkIsr / maybeExpandIsr): a follower that stops
fetching while it keeps heartbeating leaves the ISR once `replica.lag.time.max.ms` has passed on
the driven clock, so the high watermark is no longer held back, and rejoins once it has caught up."""

from __future__ import annotations

from tests.server.test_server_kraft_cluster import (  # noqa: F401 (the cluster fixture)
    Cluster,
    cluster,
    create_topic,
    eventually,
    produce,
)

LAG_MS = 5000  # less than the brokers' session, so the silent follower stays registered


def isr(nodes: Cluster, topic: str, partition: int) -> list[int]:
    return sorted(nodes.controller.image.topic(topic).partitions[partition].isr)


def test_a_follower_that_stops_fetching_leaves_the_isr_after_the_lag_and_rejoins_once_caught_up(
        cluster, monkeypatch):  # noqa: F811 (fixture)
    create_topic(cluster.nodes[1].port, "orders", 3, 3,
                 {"replica.lag.time.max.ms": str(LAG_MS), "min.insync.replicas": "2"})
    cluster.caught_up()
    partitions = cluster.controller.image.topic("orders").partitions
    index, leader = next((i, p.leader) for i, p in sorted(partitions.items()) if p.leader != 1)
    silent, other = [n for n in (1, 2, 3) if n != leader]
    monkeypatch.setattr(cluster.nodes[silent].cluster.fetcher, "followed", lambda _leader: [])  # it stops fetching
    assert produce(cluster.nodes[leader].port, "orders", index, b"a") == 0
    tracker = cluster.nodes[leader].cluster.isr
    eventually(lambda: tracker.fetched_offsets("orders", index)[other] == 1)
    log = cluster.nodes[leader].manager.get("orders", index)
    assert log.high_watermark == 0  # held back by the silent follower, still in the ISR
    cluster.pass_time(LAG_MS - 1000)
    assert isr(cluster, "orders", index) == [1, 2, 3]  # not lagging long enough yet

    cluster.pass_time(2000)  # past replica.lag.time.max.ms: the leader sends AlterPartition
    assert isr(cluster, "orders", index) == sorted([leader, other])
    eventually(lambda: log.high_watermark == 1)
    assert produce(cluster.nodes[leader].port, "orders", index, b"b", acks=-1) == 0  # 2 in sync: enough

    monkeypatch.undo()
    create_topic(cluster.nodes[1].port, "wake", 1, 3)  # new metadata: the silent broker fetches again
    eventually(lambda: isr(cluster, "orders", index) == [1, 2, 3])
    eventually(lambda: cluster.nodes[silent].manager.get("orders", index).log_end_offset == 2)

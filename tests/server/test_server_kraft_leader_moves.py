"""Leaderships moving on a running cluster: a broker stopping cleanly hands its leaderships over
before it stops (controlled shutdown), so the next produce is answered by its successor at once;
an operator moves a leader to another in-sync replica, which the brokers follow; and
ElectLeaders, sent to any broker (by confluent-kafka's admin client too), brings preferred
replicas back."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka.protocol.admin import ElectLeadersRequest, ElectLeadersResponse

from logstore.server import error_codes as ec
from logstore.server.control_hooks import Drop
from logstore.server.kraft.metadata_records import ELIGIBLE_LEADER_REPLICAS_VERSION
from tests.server.test_server_kraft_cluster import (  # noqa: F401 (the cluster fixture)
    cluster,
    create_topic,
    eventually,
    produce,
    replicated,
    three_records_replicated,
)
from tests.support.wire import WireClient


def test_a_clean_stop_hands_the_leadership_over_before_the_broker_goes(cluster):  # noqa: F811 (fixture)
    index, first = three_records_replicated(cluster)
    cluster.stop(first)  # returns once the controller said shouldShutDown
    state = cluster.controller.image.topic("orders").partitions[index]
    assert state.leader != first and first not in state.isr
    assert first not in cluster.controller.image.unfenced_brokers()
    # the successor knew it led before the stop returned: no retry, no wait
    assert produce(cluster.nodes[state.leader].port, "orders", index, b"d", acks=-1) == ec.NONE


def test_a_moved_leader_serves_and_the_old_one_follows_it(cluster):  # noqa: F811 (fixture)
    index, first = three_records_replicated(cluster)
    target = next(n for n in (1, 2, 3) if n != first)
    epoch = cluster.nodes[1].move_leader("orders", index, target)
    assert epoch == cluster.controller.image.topic("orders").partitions[index].leader_epoch
    eventually(lambda: produce(cluster.nodes[target].port, "orders", index, b"d") == ec.NONE)
    assert produce(cluster.nodes[first].port, "orders", index, b"e") == ec.NOT_LEADER_OR_FOLLOWER
    replicated(cluster, "orders", index, 4)


def test_an_acks_all_produce_waiting_when_the_leader_moves_is_refused_not_acknowledged(cluster):  # noqa: F811
    # the followers cannot fetch the old leader's 4th record; the new leader takes another at
    # offset 3, which the old one, truncated, fetches: its high watermark passes the first
    # produce's end, which must still not count as acknowledged (Kafka: NOT_LEADER_OR_FOLLOWER)
    index, first = three_records_replicated(cluster)
    target = next(n for n in (2, 3) if n != first)
    starved = cluster.kafka.control("Fetch", Drop(), node=first, times=None)
    followers = {n for n in (1, 2, 3) if n != first}  # their long polls from before the hook are over
    eventually(lambda: {r.body.replica_state.replica_id for _, r in starved.requests} == followers)
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(produce, cluster.nodes[first].port, "orders", index, b"lost", -1)
        old = cluster.nodes[first].manager.get("orders", index)
        eventually(lambda: old.log_end_offset == 4)
        cluster.kafka.move_leader("orders", index, target)
        starved.remove()
        assert produce(cluster.nodes[target].port, "orders", index, b"kept", acks=-1) == ec.NONE
        eventually(lambda: old.high_watermark == 4)
        assert waiting.result(timeout=30) == ec.NOT_LEADER_OR_FOLLOWER
    assert [r.value for r in old.records(3, isolation="high_watermark")] == [b"kept"]


def elect_leaders(port: int, election_type: int, partitions: dict[str, list[int]] | None, version: int = 2):
    request = ElectLeadersRequest[version]
    topics = None if partitions is None else [
        request.TopicPartitions(topic=t, partitions=ps) for t, ps in partitions.items()]
    fields = {"election_type": election_type} if version >= 1 else {}
    with WireClient(port) as client:
        response = client.call(request(topic_partitions=topics, timeout_ms=10_000, **fields), ElectLeadersResponse[version])
    return {(r.topic, p.partition_id): p.error_code for r in response.replica_election_results for p in r.partition_result}


def test_elect_leaders_sent_to_any_broker_brings_the_preferred_replica_back(cluster):  # noqa: F811 (fixture)
    index, first = three_records_replicated(cluster)
    preferred = cluster.controller.image.topic("orders").partitions[index].replicas[0]
    other = next(n for n in (1, 2, 3) if n != preferred)
    cluster.nodes[1].move_leader("orders", index, other)
    asking = next(n for n in (2, 3) if n != first)
    assert elect_leaders(cluster.nodes[asking].port, 0, {"orders": [index, 9]}) == {
        ("orders", index): ec.NONE, ("orders", 9): ec.UNKNOWN_TOPIC_OR_PARTITION}
    assert cluster.controller.image.topic("orders").partitions[index].leader == preferred
    assert elect_leaders(cluster.nodes[asking].port, 0, None, version=0) == {}  # every preferred replica leads
    assert elect_leaders(cluster.nodes[asking].port, 1, {"orders": [index]}) == {("orders", index): ec.ELECTION_NOT_NEEDED}
    eventually(lambda: produce(cluster.nodes[preferred].port, "orders", index, b"d") == ec.NONE)


def test_a_single_node_needs_no_election(server):
    port = server.port
    create_topic(port, "orders", 1, 1)
    assert elect_leaders(port, 0, {"orders": [0, 5]}) == {
        ("orders", 0): ec.ELECTION_NOT_NEEDED, ("orders", 5): ec.UNKNOWN_TOPIC_OR_PARTITION}


@pytest.mark.slow
def test_admin_clients_elect_the_preferred_leader_and_turn_elr_on(cluster):  # noqa: F811 (fixture)
    """confluent-kafka's elect_leaders and kafka-python's update_features, as operators call them."""
    create_topic(cluster.nodes[1].port, "orders", 1, 3)
    cluster.caught_up()
    preferred, other = cluster.controller.image.topic("orders").partitions[0].replicas[:2]
    cluster.nodes[1].move_leader("orders", 0, other)
    admin = AdminClient({"bootstrap.servers": cluster.nodes[2].bootstrap_servers})
    elected = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("orders", 0)]).result(10)
    assert list(elected.values()) == [None]
    assert cluster.controller.image.topic("orders").partitions[0].leader == preferred
    operator = KafkaAdminClient(bootstrap_servers=cluster.nodes[3].bootstrap_servers)
    try:
        assert operator.update_features({ELIGIBLE_LEADER_REPLICAS_VERSION: 1}) == {
            ELIGIBLE_LEADER_REPLICAS_VERSION: "OK"}
    finally:
        operator.close()
    assert cluster.controller.image.eligible_leader_replicas_enabled

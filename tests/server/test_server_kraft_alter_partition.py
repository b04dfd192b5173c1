"""AlterPartition at the active controller (KIP-497/841/903): only the partition's leader, in its
current leader epoch and partition epoch, from its current broker registration, may change the
ISR, to live replicas of the partition whose broker epochs are current; an accepted change is a
PartitionChangeRecord that bumps the partition epoch, not the leader epoch."""

from __future__ import annotations

import uuid

import pytest

from logstore.clean_shutdown import NO_BROKER_EPOCH
from logstore.server import error_codes as ec
from logstore.server.messages.controller_apis import AlterPartitionRequest, AlterPartitionResponse
from tests.server.test_server_kraft_cluster import Cluster, create_topic, eventually
from tests.server.test_server_kraft_controller import (  # noqa: F401 (the controller and clock fixtures)
    SESSION_MS,
    beat,
    clock,
    controller,
    join,
)
from tests.support.wire import WireClient


@pytest.fixture
def placed(controller):  # noqa: F811
    """Brokers 1-3 and a one-partition topic on all three: (controller, topic id, leader, epochs)."""
    epochs = {b: join(controller, b) for b in (1, 2, 3)}
    topic_id = controller.create_topic("orders", 1, 3)
    return controller, topic_id, controller.image.topics[topic_id].partitions[0].leader, epochs


def shrink(quorum, topic_id, leader, epochs, isr, **changes) -> int:
    """The leader asks for `isr` (members at their `epochs`), in the partition's current epochs
    unless `changes` says otherwise; the error code."""
    p = quorum.image.topics[topic_id].partitions[0]
    args = {"leader_epoch": p.leader_epoch, "partition_epoch": p.partition_epoch,
            "new_isr": [(b, epochs[b]) for b in isr], **changes}
    return quorum.alter_partition(leader, epochs[leader], topic_id, 0, **args)


def test_the_leader_shrinks_and_expands_the_isr_and_only_the_partition_epoch_moves(placed):
    quorum, topic_id, leader, epochs = placed
    follower = next(b for b in (1, 2, 3) if b != leader)
    rest = [b for b in (1, 2, 3) if b != follower]
    assert shrink(quorum, topic_id, leader, epochs, rest) == ec.NONE
    p = quorum.image.topics[topic_id].partitions[0]
    assert (sorted(p.isr), p.leader_epoch, p.partition_epoch) == (sorted(rest), 0, 1)
    assert shrink(quorum, topic_id, leader, epochs, [*rest, follower]) == ec.NONE
    assert sorted(quorum.image.topics[topic_id].partitions[0].isr) == [1, 2, 3]


@pytest.mark.parametrize("change, error", [
    ({"leader_epoch": 1}, ec.NOT_LEADER_OR_FOLLOWER),
    ({"leader_epoch": -1}, ec.FENCED_LEADER_EPOCH),
    ({"partition_epoch": 5}, ec.INVALID_UPDATE_VERSION),
    ({"new_isr": [(9, 0)]}, ec.INVALID_REQUEST),
])
def test_changes_kafka_refuses_are_refused_with_its_errors(placed, change, error):
    quorum, topic_id, leader, epochs = placed
    assert shrink(quorum, topic_id, leader, epochs, [leader], **change) == error
    assert quorum.image.topics[topic_id].partitions[0].partition_epoch == 0


def test_a_follower_or_an_old_incarnation_may_not_change_the_isr(placed):
    quorum, topic_id, leader, epochs = placed
    follower = next(b for b in (1, 2, 3) if b != leader)
    p = quorum.image.topics[topic_id].partitions[0]
    assert quorum.alter_partition(follower, epochs[follower], topic_id, 0, leader_epoch=0, partition_epoch=0,
                                      new_isr=[(follower, epochs[follower])]) == ec.INVALID_REQUEST
    assert quorum.alter_partition(leader, epochs[leader] - 1, topic_id, 0, leader_epoch=0, partition_epoch=0,
                                      new_isr=[(leader, epochs[leader])]) == ec.STALE_BROKER_EPOCH
    assert quorum.alter_partition(leader, epochs[leader], uuid.uuid4(), 0, leader_epoch=0, partition_epoch=0,
                                      new_isr=[(leader, epochs[leader])]) == ec.UNKNOWN_TOPIC_ID
    assert p.isr == quorum.image.topics[topic_id].partitions[0].isr


def test_fenced_replicas_and_earlier_incarnations_may_not_join_the_isr(placed, clock):  # noqa: F811 (fixture)
    quorum, topic_id, leader, epochs = placed
    others = [b for b in (1, 2, 3) if b != leader]
    assert shrink(quorum, topic_id, leader, epochs, [leader]) == ec.NONE
    assert shrink(quorum, topic_id, leader, {**epochs, others[0]: epochs[others[0]] - 1},
                  [leader, others[0]]) == ec.INELIGIBLE_REPLICA  # KIP-903: a fetch from an earlier incarnation
    clock.advance(SESSION_MS + 1)
    beat(quorum, leader, others[0])
    quorum.check_sessions()  # others[1] is fenced now
    assert shrink(quorum, topic_id, leader, epochs, [leader, others[1]]) == ec.INELIGIBLE_REPLICA  # KIP-841
    assert quorum.alter_partition(leader, epochs[leader], topic_id, 0, **{
        "leader_epoch": 0, "partition_epoch": quorum.image.topics[topic_id].partitions[0].partition_epoch,
        "new_isr": [(leader, NO_BROKER_EPOCH), (others[0], NO_BROKER_EPOCH)]}) == ec.NONE  # v2: no epochs


def test_alter_partition_over_the_controller_listener(tmp_path):
    cluster = Cluster(tmp_path)
    try:
        create_topic(cluster.nodes[1].port, "orders", 1, 3)
        topic = cluster.controller.image.topic("orders")
        p = topic.partitions[0]
        epochs = {b: info.broker_epoch for b, info in cluster.controller.image.brokers.items()}
        cls = AlterPartitionRequest
        request = cls(version=3, broker_id=p.leader, broker_epoch=epochs[p.leader], topics=[cls.TopicData(
            topic_id=topic.topic_id, partitions=[cls.TopicData.PartitionData(
                partition_index=0, leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch,
                new_isr_with_epochs=[cls.TopicData.PartitionData.BrokerState(broker_id=p.leader,
                                                                             broker_epoch=epochs[p.leader])],
                leader_recovery_state=0)])])
        with WireClient(cluster.nodes[1].cluster.controller_port) as client:
            response = client.call(request, AlterPartitionResponse[3])
            stale = client.call(cls(version=3, broker_id=p.leader, broker_epoch=0, topics=[]),
                                AlterPartitionResponse[3])
        answer = response.topics[0].partitions[0]
        assert (response.error_code, answer.error_code, answer.isr, answer.partition_epoch) == (0, 0, [p.leader], 1)
        assert stale.error_code == ec.STALE_BROKER_EPOCH
        cluster.caught_up()  # every broker replays the change; the leader then adds its followers back as they fetch
        assert all(n.cluster.view.image.topic("orders").partitions[0].partition_epoch >= 1
                   for n in cluster.nodes.values())
        eventually(lambda: sorted(cluster.metadata(2, ["orders"]).topics[0].partitions[0].isr_nodes) == [1, 2, 3])
    finally:
        cluster.close()

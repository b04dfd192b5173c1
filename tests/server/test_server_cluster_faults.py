"""KafkaCluster's faults, each observed as a client sees it: a killed leader's partitions get a
new leader that holds every acknowledged record; a power loss drops only what was not fsynced;
a cut link stops replication until healed, a cut client link refuses clients; control hooks
answer an error code, hold, drop or only observe requests of one API."""

from __future__ import annotations

import select
import signal
import socket

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from logstore import Log
from logstore.records import Record, build_batch, iter_batches
from logstore.server import KafkaServer
from logstore.server.cluster import Answer, Delay, Drop, KafkaCluster, Observe
from logstore.server.cluster.power_loss import drop_unflushed
from logstore.server.group_coordinator import GroupCoordinator
from tests.server.test_server_kraft_cluster import fetch_partition, produce
from tests.support.waiting import eventually
from tests.support.wire import WireClient

NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT = 6, 7
SHORT_SESSION = {"broker.session.timeout.ms": 1000, "broker.heartbeat.interval.ms": 200}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One three-node cluster for the faults that leave it as they found it; topic "orders" has
    three partitions on every node, one led by each."""
    with KafkaCluster(3, data_dir=tmp_path_factory.mktemp("cluster")) as cluster:
        cluster.create_topic("orders", 3)
        yield cluster


def led_elsewhere(cluster: KafkaCluster, topic: str) -> tuple[int, int]:
    """(partition, leader) of a partition of `topic` led by a broker that is not the controller."""
    return next((p, leader) for p in range(3) if (leader := cluster.leader(topic, p)) not in (1, -1))


def values(port: int, topic: str, partition: int) -> list[bytes]:
    """The values a client fetches from `topic`-`partition` at the node on `port`, from offset 0."""
    answer = fetch_partition(port, topic, partition, 0, -1)
    assert answer.error_code == 0, answer
    return [r.value for b in iter_batches(bytes(answer.records or b"")) for r in b.records()]


def api_versions(port: int) -> int:
    with WireClient(port) as client:
        return client.call(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"),
                           ApiVersionsResponse[3]).error_code


def test_a_killed_leaders_partitions_get_a_new_leader_holding_every_acknowledged_record(kafka_cluster):
    kafka_cluster.create_topic("orders", 3, configs={"min.insync.replicas": "2"})
    partition, leader = led_elsewhere(kafka_cluster, "orders")
    sent = [f"order {i}".encode() for i in range(5)]
    assert [produce(kafka_cluster.node(leader).port, "orders", partition, v, acks=-1) for v in sent] == [0] * 5
    kafka_cluster.node(leader).kill()
    successor = kafka_cluster.wait_for_leader("orders", partition, not_on=[leader])
    # every acknowledged record is there, readable once the new ISR has fetched it (the high watermark)
    eventually(lambda: values(kafka_cluster.node(successor).port, "orders", partition) == sent)
    assert produce(kafka_cluster.node(successor).port, "orders", partition, b"after", acks=-1) == 0
    kafka_cluster.node(leader).start()  # it follows its successor and catches up
    kafka_cluster.wait_until_ready()
    log = kafka_cluster.node(leader).server.manager.get("orders", partition)
    eventually(lambda: log.log_end_offset == 6)


def test_power_loss_drops_only_what_was_not_fsynced(tmp_path):
    # a short session: the restarted node registers once its killed incarnation's session ran out
    with KafkaCluster(1, data_dir=tmp_path, config=SHORT_SESSION) as cluster:
        cluster.create_topic("orders", configs={"flush.messages": "2"})  # fsynced after every second record
        port = cluster.node(1).port
        assert [produce(port, "orders", 0, v) for v in (b"a", b"b", b"c")] == [0, 0, 0]
        log = cluster.node(1).server.manager.get("orders", 0)
        assert (log.recovery_point, log.log_end_offset) == (2, 3)
        dropped = cluster.node(1).power_loss()
        segment = cluster.node(1).data_dir / "orders-0" / "00000000000000000000.log"
        assert dropped > 0 and segment.stat().st_size > 0
        cluster.node(1).start()
        cluster.wait_until_ready()
        assert values(cluster.node(1).port, "orders", 0) == [b"a", b"b"]


def test_power_loss_removes_the_segments_rolled_after_the_recovery_point(tmp_path):
    partition = tmp_path / "t-0"
    partition.mkdir()
    with Log.open(partition, {"segment.bytes": 200}) as log:
        for _ in range(6):
            log.append(build_batch([Record(0, 0, None, bytes(40))]))
        segments = sorted(p.name for p in partition.glob("*.log"))
    assert len(segments) > 2
    second = int(segments[1].split(".")[0])
    drop_unflushed(partition, second)
    assert sorted(p.name for p in partition.glob("*.log")) == segments[:2]
    assert (partition / segments[1]).stat().st_size == 0
    with Log.open(partition) as log:
        assert log.log_end_offset == second


def test_a_cut_link_stops_replication_between_two_nodes_until_healed(cluster):
    partition, leader = led_elsewhere(cluster, "orders")
    cut_off = next(n for n in (2, 3) if n != leader)
    replica = cluster.node(cut_off).server.manager.get("orders", partition)
    other = cluster.node(1).server.manager.get("orders", partition)
    start = replica.log_end_offset
    cluster.cut(leader, cut_off)
    try:
        assert produce(cluster.node(leader).port, "orders", partition, b"while cut") == 0
        eventually(lambda: other.log_end_offset == start + 1)  # the link to node 1 still carries it
        assert replica.log_end_offset == start
    finally:
        cluster.heal(leader, cut_off)
    eventually(lambda: replica.log_end_offset == start + 1)


def test_a_node_cut_from_its_clients_refuses_them_and_still_replicates(cluster):
    partition, leader = led_elsewhere(cluster, "orders")
    follower = next(n for n in (2, 3) if n != leader)
    replica = cluster.node(follower).server.manager.get("orders", partition)
    start = replica.log_end_offset
    cluster.cut_clients(follower)
    try:
        with pytest.raises(ConnectionError):
            api_versions(cluster.node(follower).port)
        assert api_versions(cluster.node(leader).port) == 0
        assert produce(cluster.node(leader).port, "orders", partition, b"x") == 0
        eventually(lambda: replica.log_end_offset == start + 1)
    finally:
        cluster.heal_clients(follower)
    assert api_versions(cluster.node(follower).port) == 0


def test_an_answer_hook_sends_its_error_code_to_the_client_once(cluster):
    partition, leader = led_elsewhere(cluster, "orders")
    port = cluster.node(leader).port
    end = cluster.node(leader).server.manager.get("orders", partition).log_end_offset
    hook = cluster.control("Produce", Answer(NOT_LEADER_OR_FOLLOWER), node=leader)
    assert produce(port, "orders", partition, b"refused") == NOT_LEADER_OR_FOLLOWER
    assert cluster.node(leader).server.manager.get("orders", partition).log_end_offset == end  # not handled
    assert produce(port, "orders", partition, b"taken") == 0  # one-shot: removed after one request
    assert [(node, request.body.topic_data[0].name) for node, request in hook.requests] == [(leader, "orders")]


def test_a_delay_hook_holds_every_request_of_its_api_until_removed(cluster):
    hook = cluster.control("ApiVersions", Delay(2), node=2, times=None)
    clients = [WireClient(cluster.node(2).port) for _ in range(2)]
    try:
        for client in clients:
            client.send(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
        hook.wait(2)
        assert not any(answered(client) for client in clients)  # both taken, both still held
        assert [client.receive(ApiVersionsResponse[3]).error_code for client in clients] == [0, 0]
    finally:
        hook.remove()
        for client in clients:
            client.close()
    api_versions(cluster.node(2).port)
    assert len(hook.requests) == 2


def answered(client: WireClient) -> bool:
    """Whether an answer (or the connection's end) is waiting on `client`'s socket now."""
    return bool(select.select([client.sock], [], [], 0)[0])


def test_a_drop_hook_closes_the_connection_unanswered(cluster):
    cluster.control("ApiVersions", Drop(), node=3)
    with pytest.raises(ConnectionError):
        api_versions(cluster.node(3).port)
    assert api_versions(cluster.node(3).port) == 0


def test_an_observe_hook_sees_the_followers_fetches_and_the_heartbeats(cluster):
    partition, leader = led_elsewhere(cluster, "orders")
    fetches = cluster.control("Fetch", Observe(), node=leader, times=4)
    beats = cluster.control("BrokerHeartbeat", Observe(), times=None)
    try:
        seen = fetches.wait(4)
        beats.wait(3)
    finally:
        beats.remove()
    # followers fetch at v17: their id (and broker epoch) in ReplicaState
    assert {request.body.replica_state.replica_id for _node, request in seen} <= {1, 2, 3} - {leader}
    assert {node for node, _request in beats.requests} == {1}  # the controller's listener answers them
    assert {request.body.broker_id for _node, request in beats.requests} >= {2, 3}


@pytest.mark.slow
@pytest.mark.parametrize("kafka_cluster", [{"nodes": 2, "processes": True}], indirect=True)
def test_a_power_cut_node_process_loses_its_leadership_and_its_unflushed_records_then_fetches_them(kafka_cluster):
    kafka_cluster.create_topic("orders", 2)
    partition = next(p for p in range(2) if kafka_cluster.leader("orders", p) == 2)
    assert [produce(kafka_cluster.node(2).port, "orders", partition, v, acks=-1) for v in (b"a", b"b")] == [0, 0]
    process = kafka_cluster.node(2).process
    assert kafka_cluster.node(2).power_loss() > 0  # never fsynced: flush.messages is unbounded, as in Kafka
    assert process.returncode == -signal.SIGKILL
    assert kafka_cluster.wait_for_leader("orders", partition, not_on=[2]) == 1
    eventually(lambda: values(kafka_cluster.node(1).port, "orders", partition) == [b"a", b"b"])
    kafka_cluster.node(2).start()  # recovers what the power cut left, then fetches the rest from node 1
    segment = kafka_cluster.node(2).data_dir / f"orders-{partition}" / "00000000000000000000.log"
    eventually(lambda: len(list(iter_batches(segment.read_bytes()))) == 2)


def test_a_moved_leader_takes_the_clients_and_the_old_one_refuses_them(cluster):
    partition, leader = led_elsewhere(cluster, "orders")
    target = next(n for n in (2, 3) if n != leader)
    epoch = cluster.move_leader("orders", partition, target)
    try:
        assert cluster.leader("orders", partition) == target
        assert produce(cluster.node(leader).port, "orders", partition, b"old") == NOT_LEADER_OR_FOLLOWER
        assert produce(cluster.node(target).port, "orders", partition, b"new") == 0

        def last_epoch() -> int:  # of the last batch consumers see (below the high watermark)
            answer = fetch_partition(cluster.node(target).port, "orders", partition, 0, epoch)
            return list(iter_batches(bytes(answer.records or b"")))[-1].partition_leader_epoch

        eventually(lambda: last_epoch() == epoch)  # the new leader stamped its epoch on b"new"
    finally:
        cluster.move_leader("orders", partition, leader)


def test_an_observe_hook_sees_requests_another_hook_answers(cluster):
    seen = cluster.control("ApiVersions", Observe(), node=2, times=None)
    cluster.control("ApiVersions", Drop(), node=2)
    try:
        with pytest.raises(ConnectionError):
            api_versions(cluster.node(2).port)
        assert api_versions(cluster.node(2).port) == 0
    finally:
        seen.remove()
    assert len(seen.requests) == 2


def test_a_broker_cut_from_the_controller_is_fenced_and_returns_when_healed(cluster):
    led = [p for p in range(3) if cluster.leader("orders", p) == 3]
    cluster.cut(1, 3)  # heartbeats and metadata fetches from 3 to the controller fail
    try:
        eventually(lambda: sorted(b.node_id for b in cluster.metadata(2).brokers) == [1, 2])
        for partition in led:  # as node 2 sees it: node 3 cannot learn it
            eventually(lambda p=partition: cluster.leader("orders", p, node_id=2) in (1, 2))
    finally:
        cluster.heal(1, 3)
    cluster.wait_until_ready()
    lead_again(cluster, led, 3)


def lead_again(cluster: KafkaCluster, partitions: list[int], node: int) -> None:
    """Give `node` back the leadership of these partitions of "orders" (as the module found
    them), once it has caught up into their ISR again."""
    for partition in partitions:
        eventually(lambda p=partition: node in isr(cluster, "orders", p))
        cluster.move_leader("orders", partition, node)


def isr(cluster: KafkaCluster, topic: str, partition: int) -> list[int]:
    """The ISR of `topic`-`partition` as the controller's node tells clients."""
    return next(p.isr_nodes for p in cluster.metadata(1, [topic]).topics[0].partitions
                if p.partition_index == partition)


def test_pushed_errors_answer_the_next_requests_in_order(cluster):
    partition, leader = led_elsewhere(cluster, "orders")
    port = cluster.node(leader).port
    cluster.push_errors("Produce", NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, node=leader)
    assert [produce(port, "orders", partition, b"x") for _ in range(3)] == [NOT_LEADER_OR_FOLLOWER,
                                                                           REQUEST_TIMED_OUT, 0]


def test_a_restarted_node_serves_again_on_its_port(cluster):
    led = [p for p in range(3) if cluster.leader("orders", p) == 3]
    port, server = cluster.node(3).port, cluster.node(3).server
    cluster.node(3).restart()
    assert cluster.node(3).server is not server and cluster.node(3).port == port
    cluster.wait_until_ready()
    assert api_versions(port) == 0
    lead_again(cluster, led, 3)  # its leaderships moved away before it stopped


class ShutdownStepFailed(Exception):
    """What a failing step of a clean shutdown raises in these tests."""


def failing_close(_coordinator) -> None:
    raise ShutdownStepFailed


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def test_a_server_whose_shutdown_fails_still_frees_its_directory_and_port(tmp_path, monkeypatch):
    server = KafkaServer(tmp_path, port=0).start()
    port = server.port
    monkeypatch.setattr(GroupCoordinator, "close", failing_close)
    with pytest.raises(ShutdownStepFailed):
        server.stop()
    monkeypatch.undo()
    with KafkaServer(tmp_path, port=port) as again:  # no LogLockedError, no address in use
        assert api_versions(again.port) == 0


def test_a_cluster_stops_every_node_when_one_fails_to_stop_and_raises_the_first_error(monkeypatch):
    cluster = KafkaCluster(2).start()
    ports = [cluster.node(n).port for n in (1, 2)]
    monkeypatch.setattr(GroupCoordinator, "close", failing_close)
    with pytest.raises(ShutdownStepFailed):
        cluster.stop()
    assert not any(cluster.node(n).running for n in (1, 2))
    assert all(port_is_free(port) for port in ports)
    assert not cluster.data_dir.exists()


@pytest.mark.slow
@pytest.mark.parametrize("kafka_cluster", [{"nodes": 1, "processes": True, "cluster_id": "-Hq3dJ2lRU2Zx8uN0pQm7w"}],
                         indirect=True)
def test_a_node_process_starts_with_a_cluster_id_that_begins_with_a_dash(kafka_cluster):
    """A Kafka cluster id is URL-safe base64, so one in 64 begins with "-"; the node's command line must keep it a value."""
    assert kafka_cluster.metadata().cluster_id == "-Hq3dJ2lRU2Zx8uN0pQm7w"

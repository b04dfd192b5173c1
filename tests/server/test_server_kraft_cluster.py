"""`logstore serve` nodes forming a KRaft cluster in one process: a combined broker+controller
node and broker-only nodes register and heartbeat over the controller listener, are fenced
when their heartbeats stop (the clock is driven, no sleeps) and unfenced when they return,
learn the metadata by fetching `__cluster_metadata`, and answer Metadata with every node."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from logstore import Log
from logstore.clock import ManualClock
from logstore.partition_metadata import read_partition_metadata
from logstore.records import Record, build_batch, iter_batches
from logstore.server import KafkaCluster, KafkaServer
from logstore.server.messages.controller_apis import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from tests.cli.test_cli_dump import run_in_process
from tests.support.clock import NOW
from tests.support.waiting import eventually
from tests.support.wire import WireClient

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
SESSION_MS = 9000
COMMON = {"controller.listener.names": "CONTROLLER", "broker.session.timeout.ms": str(SESSION_MS)}


def controller_node(data_dir: Path, clock: ManualClock, configs: dict | None = None) -> KafkaServer:
    return KafkaServer(data_dir / "node-1", port=0, clock=clock, cluster_id=CLUSTER_ID, config={
        **COMMON, **(configs or {}), "process.roles": "broker,controller", "node.id": 1, "controller.quorum.voters": "1@127.0.0.1:0",
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"})


def broker_node(data_dir: Path, clock: ManualClock, node_id: int, controller_port: int,
                configs: dict | None = None) -> KafkaServer:
    return KafkaServer(data_dir / f"node-{node_id}", port=0, clock=clock, cluster_id=CLUSTER_ID, config={
        **COMMON, **(configs or {}), "process.roles": "broker", "node.id": node_id,
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}", "listeners": "PLAINTEXT://127.0.0.1:0"})


class Cluster:
    """Three nodes on a driven clock, 1 (broker and controller), 2 and 3 (brokers), each with
    broker `configs`: a KafkaCluster whose running servers the tests reach into."""

    def __init__(self, data_dir: Path, configs: dict | None = None):
        self.dir = data_dir
        self.clock = ManualClock(NOW)
        self.kafka = KafkaCluster(3, data_dir=data_dir, clock=self.clock, cluster_id=CLUSTER_ID,
                                  config={"broker.session.timeout.ms": SESSION_MS, **(configs or {})}).start()

    @property
    def nodes(self) -> dict[int, KafkaServer]:
        """The running nodes' servers, by node id."""
        return {n: node.server for n, node in self.kafka.nodes.items() if node.running}

    @property
    def controller(self):
        return self.nodes[1].cluster.controller

    def start(self, node_id: int) -> KafkaServer:
        self.kafka.node(node_id).start()
        return self.nodes[node_id]

    def stop(self, node_id: int) -> None:
        self.kafka.node(node_id).stop()

    def pass_time(self, ms: int) -> None:
        """Advance the clock by `ms` (less than a session) while every running node heartbeats."""
        self.clock.advance(ms)
        self.kafka.check_timers()

    def caught_up(self) -> None:
        caught_up(self.controller, self.nodes.values())

    def metadata(self, node_id: int, topics: list[str] | None = None) -> MetadataResponse:
        """Node `node_id`'s Metadata answer, once it has fetched the whole metadata log."""
        self.caught_up()
        return metadata(self.nodes[node_id].port, topics)

    def close(self) -> None:
        self.kafka.stop()


def caught_up(controller, brokers) -> None:
    """Wait until every broker has fetched the controller's metadata log to its end."""
    end = controller.log.end_offset
    eventually(lambda: all(n.cluster.lifecycle.metadata_offset >= end for n in brokers),
               "the brokers did not fetch the metadata log")


def metadata(port: int, topics: list[str] | None = None) -> MetadataResponse:
    with WireClient(port) as client:
        request = MetadataRequest(version=12, topics=None if topics is None else [
            MetadataRequest.MetadataRequestTopic(name=t, topic_id=uuid.UUID(int=0)) for t in topics],
            allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        return client.call(request, MetadataResponse[12])


@pytest.fixture
def cluster(tmp_path: Path):
    cluster = Cluster(tmp_path)
    yield cluster
    cluster.close()


def create_topic(port: int, name: str, partitions: int, replication_factor: int,
                 configs: dict[str, str] | None = None) -> CreateTopicsResponse:
    with WireClient(port) as client:
        entries = [CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                   for k, v in (configs or {}).items()]
        topic = CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions,
                                                   replication_factor=replication_factor, assignments=[],
                                                   configs=entries)
        return client.call(CreateTopicsRequest(version=7, topics=[topic], timeout_ms=30_000, validate_only=False),
                           CreateTopicsResponse[7])


def brokers_of(response: MetadataResponse) -> list[int]:
    return sorted(b.node_id for b in response.brokers)


def test_every_node_registers_and_every_node_lists_all_of_them(cluster):
    assert cluster.controller.image.unfenced_brokers() == [1, 2, 3]
    for node_id in (1, 2, 3):
        response = cluster.metadata(node_id)
        assert brokers_of(response) == [1, 2, 3]
        assert response.cluster_id == CLUSTER_ID
        ports = {b.node_id: b.port for b in response.brokers}
        assert ports == {n: node.port for n, node in cluster.nodes.items()}


def test_a_topic_created_on_a_broker_is_placed_by_the_controller_and_opened_where_it_lives(cluster):
    result = create_topic(cluster.nodes[2].port, "orders", 3, 3).topics[0]
    assert (result.error_code, result.num_partitions, result.replication_factor) == (0, 3, 3)
    topic_id = cluster.controller.image.topic("orders").topic_id
    cluster.caught_up()
    for node_id, node in cluster.nodes.items():
        response = cluster.metadata(node_id, ["orders"])
        partitions = response.topics[0].partitions
        assert response.topics[0].topic_id == topic_id
        assert sorted(p.partition_index for p in partitions) == [0, 1, 2]
        assert all(sorted(p.replica_nodes) == [1, 2, 3] and p.isr_nodes == p.replica_nodes for p in partitions)
        assert sorted(p.leader_id for p in partitions) == [1, 2, 3]
        for partition in range(3):
            assert read_partition_metadata(node.data_dir / f"orders-{partition}") == topic_id
    create_topic(cluster.nodes[1].port, "spread", 3, 1)
    cluster.caught_up()
    hosted = {n: sorted(p.name for p in node.data_dir.glob("spread-*")) for n, node in cluster.nodes.items()}
    assert sorted(sum(hosted.values(), [])) == ["spread-0", "spread-1", "spread-2"]
    cluster.stop(2)
    cluster.start(2)
    assert sorted(p.name for p in cluster.nodes[2].data_dir.glob("spread-*")) == hosted[2]
    refused = create_topic(cluster.nodes[3].port, "wide", 1, 4).topics[0]
    assert refused.error_code == 38  # INVALID_REPLICATION_FACTOR: 3 brokers
    assert create_topic(cluster.nodes[3].port, "orders", 1, 1).topics[0].error_code == 36  # TOPIC_ALREADY_EXISTS


def register_silent_broker(cluster: Cluster, broker_id: int) -> int:
    """A broker that registers and heartbeats once over the controller listener, then goes
    silent (as a hung process would): its broker epoch."""
    with WireClient(cluster.nodes[1].cluster.controller_port) as client:
        registration = client.call(BrokerRegistrationRequest(
            version=4, broker_id=broker_id, cluster_id=CLUSTER_ID, incarnation_id=uuid.uuid4(),
            listeners=[BrokerRegistrationRequest.Listener(name="PLAINTEXT", host="127.0.0.1", port=1,
                                                          security_protocol=0)],
            features=[], rack=None, log_dirs=[], previous_broker_epoch=-1), BrokerRegistrationResponse[4])
        epoch = registration.broker_epoch
        beat = client.call(BrokerHeartbeatRequest(version=1, broker_id=broker_id, broker_epoch=epoch,
                                                  current_metadata_offset=epoch, want_fence=False,
                                                  want_shut_down=False), BrokerHeartbeatResponse[1])
    assert (registration.error_code, beat.error_code, beat.is_fenced) == (0, 0, False)
    return epoch


def test_a_broker_whose_heartbeats_stop_is_fenced_when_its_session_runs_out(cluster):
    register_silent_broker(cluster, 4)
    assert brokers_of(cluster.metadata(2)) == [1, 2, 3, 4]
    create_topic(cluster.nodes[1].port, "orders", 4, 4)
    cluster.pass_time(SESSION_MS // 2)
    assert 4 in cluster.controller.image.unfenced_brokers()  # its session has not run out yet
    cluster.pass_time(SESSION_MS // 2 + 1)
    assert cluster.controller.image.unfenced_brokers() == [1, 2, 3]
    response = cluster.metadata(2, ["orders"])
    assert brokers_of(response) == [1, 2, 3]
    for p in response.topics[0].partitions:
        assert 4 not in p.isr_nodes and p.leader_id in (1, 2, 3) and p.offline_replicas == [4]


def test_a_stopped_broker_is_fenced_at_once_and_returns_unfenced_with_a_new_epoch(cluster):
    first_epoch = cluster.controller.image.brokers[3].broker_epoch
    cluster.stop(3)  # a controlled shutdown: its last heartbeat asks to stop
    assert cluster.controller.image.unfenced_brokers() == [1, 2]
    assert brokers_of(cluster.metadata(1)) == [1, 2]
    cluster.start(3)
    assert cluster.controller.image.unfenced_brokers() == [1, 2, 3]
    assert cluster.controller.image.brokers[3].broker_epoch > first_epoch
    assert brokers_of(cluster.metadata(1)) == [1, 2, 3]


def placements(image) -> dict:
    """Topic name -> (topic id, {partition: replicas})."""
    return {t.name: (t.topic_id, {i: p.replicas for i, p in t.partitions.items()}) for t in image.topics.values()}


def test_a_restarted_controller_reloads_the_metadata_and_brokers_keep_their_replica_of_it(tmp_path, capsys,
                                                                                         monkeypatch):
    cluster = Cluster(tmp_path)
    try:
        create_topic(cluster.nodes[1].port, "orders", 2, 2)
        cluster.nodes[1].cluster.controller.snapshot()
        create_topic(cluster.nodes[1].port, "later", 1, 1)
        expected = placements(cluster.controller.image)
        cluster.caught_up()
    finally:
        cluster.close()
    restarted = controller_node(tmp_path, ManualClock(NOW)).start()
    try:
        image = restarted.cluster.controller.image
        assert placements(image) == expected
        # every node stopped (fenced, the last ISR member staying); node 1 came back: it leads
        # where it is in the ISR, the other partitions wait for their brokers
        partitions = [p for t in image.topics.values() for p in t.partitions.values()]
        assert all(p.leader == (1 if 1 in p.isr else -1) for p in partitions)
        assert brokers_of(metadata(restarted.port)) == [1]
    finally:
        restarted.stop()
    replica = tmp_path / "node-2" / "__cluster_metadata-0"
    dumped = run_in_process("dump", "--cluster-metadata-decoder", "--files", "00000000000000000000.log",
                            cwd=replica, capsys=capsys, monkeypatch=monkeypatch)
    assert dumped.returncode == 0, dumped.stderr
    assert '"type":"TOPIC_RECORD","version":0,"data":{"name":"later"' in dumped.stdout
    for node_id in (1, 2, 3):  # every node's data directory, metadata log and snapshots included
        verified = run_in_process("verify", str(tmp_path / f"node-{node_id}"), cwd=tmp_path, capsys=capsys,
                                  monkeypatch=monkeypatch)
        assert verified.returncode == 0 and verified.stdout.rstrip().endswith("OK"), verified.stdout


def test_a_controller_only_node_runs_the_quorum_without_being_a_broker(tmp_path):
    clock = ManualClock(NOW)
    controller = KafkaServer(tmp_path / "controller", port=0, clock=clock, cluster_id=CLUSTER_ID, config={
        **COMMON, "process.roles": "controller", "node.id": 9, "controller.quorum.voters": "9@127.0.0.1:0",
        "listeners": "CONTROLLER://127.0.0.1:0"}).start()
    try:
        broker = broker_node(tmp_path, clock, 1, controller.cluster.controller_port).start()
        try:
            assert controller.cluster.controller.image.unfenced_brokers() == [1]
            caught_up(controller.cluster.controller, [broker])
            assert brokers_of(metadata(broker.port)) == [1]
            assert create_topic(broker.port, "orders", 2, 1).topics[0].error_code == 0
        finally:
            broker.stop()
    finally:
        controller.stop()
    assert not list((tmp_path / "controller").glob("orders-*"))


def produce(port: int, topic: str, partition: int, value: bytes, acks: int = 1) -> int:
    """Produce one record to `topic`-`partition` at node `port`: the error code."""
    request = ProduceRequest[7]
    batch = build_batch([Record(0, NOW, None, value)])
    with WireClient(port) as client:
        response = client.call(request(transactional_id=None, acks=acks, timeout_ms=10_000, topic_data=[
            request.TopicProduceData(name=topic, partition_data=[
                request.TopicProduceData.PartitionProduceData(index=partition, records=batch)])]), ProduceResponse[7])
    return response.responses[0].partition_responses[0].error_code


def test_only_the_leader_takes_a_partitions_records_and_stamps_the_controllers_leader_epoch(cluster):
    create_topic(cluster.nodes[1].port, "orders", 3, 3)  # one partition led by each broker
    cluster.caught_up()
    partitions = cluster.controller.image.topic("orders").partitions
    index, first = next((i, p.leader) for i, p in sorted(partitions.items()) if p.leader != 1)
    followers = [n for n in (1, 2, 3) if n != first]
    assert [produce(cluster.nodes[n].port, "orders", index, b"x") for n in followers] == [6, 6]  # NOT_LEADER_...
    assert produce(cluster.nodes[first].port, "orders", index, b"epoch 0") == 0
    replicated(cluster, "orders", index, 1)
    cluster.stop(first)  # the controller moves the leadership to a follower, in epoch 1
    cluster.caught_up()
    state = cluster.controller.image.topic("orders").partitions[index]
    assert state.leader in followers and state.leader_epoch == 1
    assert produce(cluster.nodes[state.leader].port, "orders", index, b"epoch 1") == 0
    log = cluster.nodes[state.leader].manager.get("orders", index)
    assert [b.partition_leader_epoch for b in iter_batches((log.dir / "00000000000000000000.log").read_bytes())] == [
        0, 1]  # the first leader's batch, replicated, then its own


def segment_bytes(node: KafkaServer, topic: str, partition: int) -> bytes:
    return (node.manager.get(topic, partition).dir / "00000000000000000000.log").read_bytes()


def every_replica(cluster: Cluster, topic: str, partition: int, holds) -> None:
    """Wait until `holds(log)` is true of every running node's replica of the partition."""
    eventually(lambda: all(holds(n.manager.get(topic, partition)) for n in cluster.nodes.values()),
               "the replicas did not get there")


def replicated(cluster: Cluster, topic: str, partition: int, end: int) -> None:
    """Wait until every running node's replica of the partition ends at `end`."""
    every_replica(cluster, topic, partition, lambda log: log.log_end_offset >= end)


def three_records_replicated(cluster: Cluster) -> tuple[int, int]:
    """A topic "orders" of 3 partitions on every node, and 3 records replicated in one led by a
    broker that is not the controller: (that partition, its leader)."""
    create_topic(cluster.nodes[1].port, "orders", 3, 3)
    cluster.caught_up()
    partitions = cluster.controller.image.topic("orders").partitions
    index, first = next((i, p.leader) for i, p in sorted(partitions.items()) if p.leader != 1)
    for value in (b"a", b"b", b"c"):
        assert produce(cluster.nodes[first].port, "orders", index, value) == 0
    replicated(cluster, "orders", index, 3)
    return index, first


def test_followers_copy_the_leader_byte_for_byte_and_a_returning_leader_follows_its_successor(cluster):
    index, first = three_records_replicated(cluster)
    assert len({segment_bytes(n, "orders", index) for n in cluster.nodes.values()}) == 1

    cluster.stop(first)
    cluster.caught_up()
    successor = cluster.controller.image.topic("orders").partitions[index].leader
    for value in (b"d", b"e"):
        assert produce(cluster.nodes[successor].port, "orders", index, value) == 0
    cluster.start(first)  # it follows now: it reconciles its epochs with the successor, then fetches
    cluster.caught_up()
    replicated(cluster, "orders", index, 5)
    copies = {segment_bytes(n, "orders", index) for n in cluster.nodes.values()}
    assert len(copies) == 1
    batches = list(iter_batches(copies.pop()))
    assert [(b.base_offset, b.partition_leader_epoch) for b in batches] == [(0, 0), (1, 0), (2, 0), (3, 1), (4, 1)]


def settled(cluster: Cluster, topic: str, partition: int, high_watermark: int) -> None:
    """Wait until every running node's replica has the partition's high watermark at `high_watermark`."""
    every_replica(cluster, topic, partition, lambda log: log.high_watermark == high_watermark)


def test_the_high_watermark_moves_as_the_isr_fetches_and_reaches_the_followers(cluster):
    create_topic(cluster.nodes[1].port, "orders", 3, 3)
    cluster.caught_up()
    partitions = cluster.controller.image.topic("orders").partitions
    index, leader = next((i, p.leader) for i, p in sorted(partitions.items()) if p.leader != 1)
    for value in (b"a", b"b"):
        assert produce(cluster.nodes[leader].port, "orders", index, value) == 0
    settled(cluster, "orders", index, 2)  # the followers fetched past both: committed, and told so
    follower = next(n for n in (2, 3) if n != leader)
    cluster.stop(follower)  # fenced: it leaves the ISR, and the leader stops waiting for it
    cluster.caught_up()
    assert follower not in cluster.controller.image.topic("orders").partitions[index].isr
    assert produce(cluster.nodes[leader].port, "orders", index, b"c") == 0
    settled(cluster, "orders", index, 3)


def test_acks_all_is_answered_once_the_isr_holds_the_records_and_refused_below_min_isr(cluster):
    create_topic(cluster.nodes[1].port, "orders", 3, 3, {"min.insync.replicas": "3"})
    cluster.caught_up()
    partitions = cluster.controller.image.topic("orders").partitions
    index, leader = next((i, p.leader) for i, p in sorted(partitions.items()) if p.leader != 1)
    assert produce(cluster.nodes[leader].port, "orders", index, b"a", acks=-1) == 0
    assert cluster.nodes[leader].manager.get("orders", index).high_watermark == 1  # committed when answered
    cluster.stop(next(n for n in (2, 3) if n != leader))  # fenced: the ISR falls to 2 of 3
    cluster.caught_up()
    assert produce(cluster.nodes[leader].port, "orders", index, b"b", acks=-1) == 19  # NOT_ENOUGH_REPLICAS
    assert cluster.nodes[leader].manager.get("orders", index).log_end_offset == 1  # nothing was written
    assert produce(cluster.nodes[leader].port, "orders", index, b"c", acks=1) == 0


def fetch_partition(port: int, topic: str, partition: int, offset: int, current_leader_epoch: int,
                    last_fetched_epoch: int = -1):
    """One Fetch v12 of `topic`-`partition` at node `port`: the partition's answer."""
    request = FetchRequest[12]
    with WireClient(port) as client:
        response = client.call(request(
            replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
            session_epoch=-1, forgotten_topics_data=[], rack_id="", topics=[request.FetchTopic(topic=topic, partitions=[
                request.FetchTopic.FetchPartition(partition=partition, current_leader_epoch=current_leader_epoch,
                                                  fetch_offset=offset, last_fetched_epoch=last_fetched_epoch,
                                                  log_start_offset=-1, partition_max_bytes=1 << 20)])]),
            FetchResponse[12])
    return response.responses[0].partitions[0]


def test_a_returning_leader_with_unreplicated_records_truncates_them_on_its_successors_diverging_epoch(cluster):
    index, first = three_records_replicated(cluster)
    directory = cluster.nodes[first].manager.get("orders", index).dir
    cluster.stop(first)
    cluster.caught_up()
    successor = cluster.controller.image.topic("orders").partitions[index].leader
    for value in (b"d", b"e"):
        assert produce(cluster.nodes[successor].port, "orders", index, value) == 0
    port = cluster.nodes[successor].port
    assert fetch_partition(port, "orders", index, 0, 0).error_code == 74  # FENCED_LEADER_EPOCH
    assert fetch_partition(port, "orders", index, 0, 2).error_code == 75  # UNKNOWN_LEADER_EPOCH
    answer = fetch_partition(port, "orders", index, 6, 1, last_fetched_epoch=0)
    assert (answer.error_code, answer.diverging_epoch.epoch, answer.diverging_epoch.end_offset) == (0, 0, 3)
    assert not answer.records  # nothing to append before the follower truncates
    assert fetch_partition(port, "orders", index, 3, 1, last_fetched_epoch=0).diverging_epoch is None

    log = Log.open(directory)  # the old leader had written three more records in epoch 0 that no one fetched
    for value in (b"x", b"y", b"z"):
        log.append(build_batch([Record(0, NOW, None, value)]), leader_epoch=0)
    log.close()
    cluster.start(first)
    cluster.caught_up()
    expected = segment_bytes(cluster.nodes[successor], "orders", index)
    every_replica(cluster, "orders", index, lambda log: (log.dir / "00000000000000000000.log").read_bytes() == expected)
    batches = list(iter_batches(expected))
    assert [(b.base_offset, b.partition_leader_epoch) for b in batches] == [(0, 0), (1, 0), (2, 0), (3, 1), (4, 1)]

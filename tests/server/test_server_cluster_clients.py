"""Issue 27's acceptance, with confluent-kafka, kafka-python and aiokafka on three `logstore
serve` processes (node 1 broker and controller, nodes 2 and 3 brokers): a topic created with
replication factor 3 by the client's admin API, an acks=all producer that loses no acknowledged
record while the leader of a partition is SIGKILLed, a consumer group that keeps consuming and a
transaction in flight that commits or aborts as Kafka's would when that node (its coordinator)
dies; afterwards every replica holds the same records and `logstore verify` passes on each
node's data directory."""

from __future__ import annotations

import subprocess
import sys
import traceback
from pathlib import Path

import pytest
from kafka.protocol.admin import ElectLeadersRequest, ElectLeadersResponse
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from logstore.records import iter_batches
from logstore.server.cluster import KafkaCluster
from tests.server.cluster_clients import CLIENTS
from tests.support.paths import REPO_ROOT
from tests.support.waiting import eventually
from tests.support.wire import WireClient

CONTROLLER = 1  # the single-voter quorum's node: the one node a cluster cannot lose
GROUP, TRANSACTION = 0, 1  # FindCoordinator key types
PREFERRED = 0  # ElectLeaders election type
# coordinator topics of several partitions, so that some group and transactional ids are coordinated by each
# node; a killed broker is fenced after 1.5 s (Kafka: 9 s; KafkaCluster: 3 s)
CONFIG = {"offsets.topic.num.partitions": 6, "transaction.state.log.num.partitions": 6, "min.insync.replicas": 2,
          "broker.heartbeat.interval.ms": 300, "broker.session.timeout.ms": 1500}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Three `logstore serve` processes shared by the clients' tests (each kills a node and
    restarts it); once they are done and the nodes stopped, `logstore verify` passes on every
    node's data directory."""
    cluster = KafkaCluster(3, data_dir=tmp_path_factory.mktemp("cluster"), processes=True, config=CONFIG).start()
    try:
        yield cluster
    finally:
        cluster.stop()
    directories = [str(node.data_dir) for node in cluster.nodes.values()]
    result = subprocess.run([sys.executable, "-m", "logstore", "verify", *directories],
                            capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture
def all_nodes_up(cluster):
    """The shared cluster, every node of which runs again after the test, even one that failed
    before restarting the node it killed (so the next client's test starts on three nodes)."""
    yield cluster
    for node in cluster.nodes.values():
        if not node.running:
            node.start()


def partitions_in_sync(cluster: KafkaCluster, topic: str, replicas: int) -> list | None:
    """The topic's partitions as the controller's node lists them, once each has `replicas`
    replicas, a leader and all of them in its ISR (None before)."""
    response = cluster.metadata(CONTROLLER, [topic])
    partitions = response.topics[0].partitions
    if partitions and all(p.leader_id >= 0 and len(p.replica_nodes) == replicas
                          and sorted(p.isr_nodes) == sorted(p.replica_nodes) for p in partitions):
        return partitions
    return None


def find_coordinator(port: int, key: str, key_type: int) -> int:
    with WireClient(port) as client:
        response = client.call(FindCoordinatorRequest(version=3, key=key, key_type=key_type), FindCoordinatorResponse[3])
    return response.node_id if response.error_code == 0 else -1


def coordinated_by(cluster: KafkaCluster, node_id: int, key_type: int, prefix: str) -> str:
    """A group id or transactional id whose coordinator is `node_id`, as the cluster answers
    FindCoordinator (the leader of its __consumer_offsets / __transaction_state partition)."""
    keys = [f"{prefix}-{n}" for n in range(100)]
    found = {}
    eventually(lambda: found.update((k, find_coordinator(cluster.node(CONTROLLER).port, k, key_type)) for k in keys)
               or -1 not in found.values(), "the coordinators are known")
    chosen = [key for key, node in found.items() if node == node_id]
    assert chosen, f"no {prefix} is coordinated by node {node_id}: {sorted(set(found.values()))}"
    return chosen[0]


def preferred_leaders_elected(cluster: KafkaCluster) -> bool:
    """Ask for a preferred-leader election of every partition (as Kafka's auto leader rebalance
    does), so a restarted node leads its share again; True once none was left to hold."""
    with WireClient(cluster.node(CONTROLLER).port) as client:
        response = client.call(ElectLeadersRequest[2](election_type=PREFERRED, topic_partitions=None, timeout_ms=10_000),
                               ElectLeadersResponse[2])
    return all(p.error_code == 0 for t in response.replica_election_results for p in t.partition_result)


def replica_batches(data_dir: Path, topic: str, partition: int) -> list[bytes]:
    """The batches of a replica, read from its segment files as they are on disk."""
    directory = data_dir / f"{topic}-{partition}"
    return [bytes(batch.view) for segment in sorted(directory.glob("*.log"))
            for batch in iter_batches(segment.read_bytes())]


def replicas_agree(cluster: KafkaCluster, topic: str, partitions: list) -> bool:
    return all(len({tuple(replica_batches(cluster.node(n).data_dir, topic, p.partition_index))
                    for n in p.replica_nodes}) == 1 for p in partitions)


@pytest.mark.slow
@pytest.mark.parametrize("client_class", CLIENTS, ids=lambda c: c.name)
def test_a_client_rides_through_the_sigkill_of_a_leader_and_coordinator(all_nodes_up, client_class):
    cluster = all_nodes_up
    with client_class(cluster.bootstrap_servers) as client:
        topic = f"orders-{client.name}"
        client.create_topic(topic, 3, 3)  # the client asks for replication factor 3
        partitions = None

        def in_sync() -> bool:
            nonlocal partitions
            partitions = partitions_in_sync(cluster, topic, 3)
            return partitions is not None
        eventually(in_sync, "a topic with replication factor 3, every replica in sync")
        victim = next(p.leader_id for p in partitions if p.leader_id != CONTROLLER)
        group = coordinated_by(cluster, victim, GROUP, f"billing-{client.name}")
        coordinator = victim if client.transaction_survives_coordinator else CONTROLLER
        transactional_id = coordinated_by(cluster, coordinator, TRANSACTION, f"payments-{client.name}")

        consuming = client.consume(topic, group)
        in_flight = [b"txn-%d" % n for n in range(20)]
        finish_transaction = client.begin_transaction(transactional_id, topic, in_flight)
        values = [b"acked-%d" % n for n in range(600)]
        acked = client.produce(topic, values, midway=cluster.node(victim).kill)
        committed = finish_transaction()  # its coordinator died with the victim

        assert acked, "nothing was acknowledged"
        expected = acked | set(in_flight) if committed else acked
        eventually(lambda: consuming.seen >= expected or consuming.error is not None,
                   "the group consumed every acknowledged record")
        assert consuming.error is None, "".join(traceback.format_exception(consuming.error))
        assert consuming.seen & set(in_flight) == (set(in_flight) if committed else set())

        cluster.node(victim).start()
        eventually(lambda: partitions_in_sync(cluster, topic, 3) is not None, "the restarted node back in every ISR")
        eventually(lambda: replicas_agree(cluster, topic, partitions), "every replica holds the same batches")
        consuming.stop()
        eventually(lambda: preferred_leaders_elected(cluster), "the restarted node leads its partitions again")

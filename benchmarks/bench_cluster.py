"""A 3-node cluster of `logstore serve` processes (node 1 broker and controller, 2 and 3
brokers; `KafkaCluster(processes=True)`) under confluent-kafka, beside a cluster of one node (a
broker and controller): what replication costs and how long a leader's death stalls producers.

- produce throughput, 100 B values, acks=all, linger.ms 5: a topic of replication factor 3
  (min.insync.replicas 2) on 3 nodes against replication factor 1 on one node;
- p99 produce latency at 1,000 messages/s, acks=all, on each (extra_info `p99_ms`);
- failover time: SIGKILL the leader of the partition a producer writes to (acks=all, a record
  every millisecond) and time until the first record sent after the kill is acknowledged
  (extra_info `failover_s`); the cluster runs with broker.session.timeout.ms 3000 and
  heartbeats every 500 ms, so most of it is the controller waiting for the session to expire.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from benchmarks.bench_server import LATENCY_RATE, LATENCY_SECONDS, measure_latency, produce_all  # noqa: E402
from logstore.server.cluster import KafkaCluster  # noqa: E402

MESSAGES = 30_000
ROUNDS = 3
FAILOVER_ROUNDS = 3
WARM_S = 0.5  # records acknowledged steadily before the kill
MIN_INSYNC_REPLICAS = 2  # of 3 (one node: 1); and KafkaCluster's FAST_FAILOVER


class Nodes:
    """A KafkaCluster of `count` `logstore serve` processes and the topics made on it."""

    def __init__(self, root: Path, count: int):
        config = {"min.insync.replicas": min(MIN_INSYNC_REPLICAS, count)}
        self.cluster = KafkaCluster(count, data_dir=root, processes=True, config=config).start()

    @property
    def size(self) -> int:
        return len(self.cluster.nodes)

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap_servers

    def create_topic(self, name: str) -> int:
        """Create `name` (one partition, replicated on every node) by a client and return its
        leader, once a producer has had a record acknowledged by it."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(name, 1, self.size)])[name].result(60)
        leader = self.cluster.wait_for_leader(name, 0)
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all"})
        producer.produce(name, b"warm")
        assert producer.flush(60) == 0
        return leader

    def stop(self) -> None:
        self.cluster.stop()


@pytest.fixture(scope="module", params=[3, 1], ids=["3 nodes", "1 node"])
def nodes(request, tmp_path_factory):
    nodes = Nodes(tmp_path_factory.mktemp(f"bench-cluster-{request.param}"), request.param)
    try:
        yield nodes
    finally:
        nodes.stop()


def tag(benchmark, group: str, nodes: Nodes, items: int, unit: str) -> None:
    benchmark.group = group
    benchmark.extra_info.update(items=items, unit=unit, role="ours" if nodes.size > 1 else "baseline")


def test_produce_acks_all(benchmark, nodes):
    topics = (f"throughput-{i}" for i in range(100))
    producers: list[Producer] = []

    def setup():
        producers.clear()  # the last round's producer, all delivered, goes here
        topic = next(topics)
        nodes.create_topic(topic)
        producers.append(Producer({"bootstrap.servers": nodes.bootstrap, "linger.ms": 5, "acks": "all",
                                   "queue.buffering.max.messages": 1_000_000}))
        producers[0].produce(topic, b"warm", partition=0)
        assert producers[0].flush(60) == 0
        return (producers[0], topic, b"v" * 100, MESSAGES), {}

    tag(benchmark, "cluster produce 100 B acks=all", nodes, MESSAGES * 100, "bytes")
    benchmark.pedantic(produce_all, setup=setup, rounds=ROUNDS, warmup_rounds=1)


def test_produce_latency_acks_all_at_1000_per_second(benchmark, nodes):
    """Delivery-report latency of 100 B records sent at 1,000/s, acks=all, linger.ms 5."""
    nodes.create_topic("latency")
    tag(benchmark, "cluster produce latency acks=all at 1,000 msg/s", nodes, LATENCY_RATE * LATENCY_SECONDS, "records")
    measure_latency(benchmark, nodes.bootstrap, "latency")


def failover_seconds(nodes: Nodes, topic: str, leader: int) -> float:
    """SIGKILL `leader` while a record of `topic` goes out every millisecond; seconds from the
    kill to the acknowledgement of the first record sent after it."""
    producer = Producer({"bootstrap.servers": nodes.bootstrap, "linger.ms": 0, "acks": "all",
                         "message.timeout.ms": 60_000, "retry.backoff.ms": 10, "retry.backoff.max.ms": 100})
    acknowledged: list[float] = []

    def send(after_kill: bool) -> None:
        producer.produce(topic, b"x" * 100, partition=0, on_delivery=lambda err, _msg: (
            after_kill and err is None and acknowledged.append(time.perf_counter())))
        producer.poll(0.001)

    steady = time.monotonic() + WARM_S
    while time.monotonic() < steady:
        send(False)
    nodes.cluster.node(leader).kill()
    killed_at = time.perf_counter()
    deadline = time.monotonic() + 60
    while not acknowledged:
        assert time.monotonic() < deadline, "no record sent after the leader's kill was acknowledged"
        send(True)
    producer.flush(60)
    return acknowledged[0] - killed_at


def test_failover(benchmark, tmp_path_factory):
    seconds: list[float] = []

    def run() -> None:
        nodes = Nodes(tmp_path_factory.mktemp("bench-failover"), 3)
        try:
            for attempt in range(10):  # the single-voter controller cannot fail over: a topic led elsewhere
                topic = f"failover-{attempt}"
                leader = nodes.create_topic(topic)
                if leader != 1:
                    break
            seconds.append(failover_seconds(nodes, topic, leader))
        finally:
            nodes.stop()

    benchmark.group = "cluster failover"
    benchmark.pedantic(run, rounds=FAILOVER_ROUNDS, iterations=1)
    benchmark.extra_info["failover_s"] = round(sorted(seconds)[len(seconds) // 2], 3)
    benchmark.extra_info["failover_s_rounds"] = [round(s, 3) for s in seconds]

"""KafkaCluster: `logstore serve` nodes forming one KRaft cluster, for tests of what clients do
when brokers die, links break, leaders move or requests fail (franz-go's kfake, librdkafka's
mock cluster and Kafka's KafkaClusterTestKit do this for Go, C and the JVM).

Node 1 is the controller and a broker (the quorum has a single voter), nodes 2.. are brokers;
their data directories sit under one directory, formatted with one cluster id, in Kafka's format.
Nodes run in this process (each KafkaServer on its own event-loop thread) or as `logstore serve`
processes. Faults: `node(n).stop() / kill() / power_loss() / restart()`, `cut(a, b)` and
`cut_clients(n)` (with `heal`), `control(api, action)` per-API hooks, `move_leader`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from logstore.clock import Clock
from logstore.errors import LogstoreError
from logstore.kafka_uuid import random_uuid
from logstore.server.apis import APIS
from logstore.server.cluster.nodes import HOST, ClusterMember, InProcessNode, ProcessNode
from logstore.server.control_hooks import Action, Answer, Hook
from logstore.server.kraft.controller_api import CONTROLLER_APIS
from logstore.server.kraft.node_channel import NodeChannel
from logstore.server.protocol import admin, metadata

# Quick failover for tests: a killed broker is fenced (and its partitions get new leaders) after
# 3 s, not Kafka's 9; a heartbeat every half second keeps live brokers well inside that.
FAST_FAILOVER = {"broker.heartbeat.interval.ms": "500", "broker.session.timeout.ms": "3000"}
# A process node's power loss reads the recovery points from their checkpoint: written from the
# start and every 200 ms (not after 30 s and every 60), it lags the logs' own by little.
PROCESS_CHECKPOINTS = {"log.initial.task.delay.ms": "0", "log.flush.offset.checkpoint.interval.ms": "200"}
READY_TIMEOUT_S = 60
WIRE_TIMEOUT_S = 10
METADATA_VERSION, CREATE_TOPICS_VERSION = 12, 7
CLIENT_ID = "kafka-cluster"  # a client of the nodes, not a node: cut_clients cuts it off too


def coordinator_replication(nodes: int) -> dict[str, str]:
    """The coordinator topics' replication factor and __transaction_state's min ISR: Kafka's 3
    and 2, at most the cluster's nodes (the controller refuses more replicas than brokers, and
    groups and transactions would never find a coordinator on a smaller cluster)."""
    factor = str(min(3, nodes))
    return {"offsets.topic.replication.factor": factor, "transaction.state.log.replication.factor": factor,
            "transaction.state.log.min.isr": str(min(2, nodes))}


class ClusterFaultError(LogstoreError):
    """A fault the cluster cannot inject in its mode (hooks and link cuts live in the nodes' process)."""


class KafkaCluster:
    """`nodes` nodes of one KRaft cluster over `data_dir` (a temporary directory, removed on
    stop, when not given). `processes` runs each node as a `logstore serve` process; otherwise
    they run in this process, on `clock` (a ManualClock is driven with `check_timers`).
    `config` holds Kafka broker configs for every node (over FAST_FAILOVER, and for processes
    PROCESS_CHECKPOINTS), `node_configs` those of single nodes by id. A context manager;
    `start()` returns once every broker serves."""

    def __init__(self, nodes: int = 3, *, data_dir: str | os.PathLike[str] | None = None, processes: bool = False,
                 config: Mapping[str, Any] | None = None, node_configs: Mapping[int, Mapping[str, Any]] | None = None,
                 clock: Clock | None = None, cluster_id: str | None = None):
        if nodes < 1:
            raise ValueError("a cluster needs at least one node")
        if processes and clock is not None:
            raise ValueError("a clock can be injected only into nodes that run in this process")
        self._temporary = data_dir is None
        self.data_dir = Path(tempfile.mkdtemp(prefix="logstore-cluster-") if data_dir is None else data_dir)
        self.cluster_id = cluster_id or random_uuid()
        self.processes = processes
        self.nodes: dict[int, ClusterMember] = {}
        common = {**FAST_FAILOVER, **coordinator_replication(nodes), **(PROCESS_CHECKPOINTS if processes else {}),
                  **{k: str(v) for k, v in (config or {}).items()}}
        for node_id in range(1, nodes + 1):
            own = {k: str(v) for k, v in (node_configs or {}).get(node_id, {}).items()}
            args = (node_id, "broker,controller" if node_id == 1 else "broker", self.data_dir / f"node-{node_id}",
                    {**common, **own}, self.cluster_id, self.nodes.get(1))
            self.nodes[node_id] = ProcessNode(*args) if processes else InProcessNode(*args, clock=clock)

    # ------------------------------------------------------------------ life cycle

    def start(self) -> KafkaCluster:
        """Start every node (the controller first) and wait until every broker serves."""
        try:
            if self.processes:  # every process at once: the controller listener's port chosen first
                for node in self.nodes.values():
                    node.reserve_ports()
                    node.launch()
                for node in self.nodes.values():
                    node.wait_serving()
            for node in self.nodes.values():
                node.start()
            self.wait_until_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every running node cleanly (brokers first), then remove a temporary data directory.
        A node whose stop fails does not keep the others running: the first error is raised once
        every node has stopped."""
        errors: list[BaseException] = []
        for node in sorted(self.nodes.values(), key=lambda n: -n.node_id):
            try:
                node.stop()
            except BaseException as exc:  # raised below, once the other nodes have stopped
                errors.append(exc)
        if self._temporary:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        if errors:
            raise errors[0]

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def node(self, node_id: int) -> ClusterMember:
        """Node `node_id`: stop(), kill(), power_loss(), restart(), its port and data directory."""
        return self.nodes[node_id]

    @property
    def controller(self) -> ClusterMember:
        """The node running the (single-voter) controller quorum."""
        return self.nodes[1]

    def running_brokers(self) -> list[int]:
        return [n.node_id for n in self.nodes.values() if n.running and n.is_broker]

    @property
    def bootstrap_servers(self) -> str:
        """Every running broker's address, for a client's bootstrap.servers."""
        return ",".join(self.nodes[n].bootstrap_servers for n in self.running_brokers())

    def check_timers(self) -> None:
        """Every running node's timers, at once (after driving a ManualClock)."""
        for node_id in self.nodes:
            if self.nodes[node_id].running:
                self._in_process_node(node_id).server.check_timers()

    def _in_process_node(self, node_id: int) -> InProcessNode:
        """Node `node_id`'s server, running in this process; ClusterFaultError in a cluster of processes."""
        node = self.nodes[node_id]
        if not isinstance(node, InProcessNode):
            raise ClusterFaultError("this reaches into the nodes' servers: run the cluster's nodes in this process")
        if node.server is None:
            raise ClusterFaultError(f"node {node_id} is not running")
        return node

    # ------------------------------------------------------------------ what clients see

    def metadata(self, node_id: int | None = None, topics: Iterable[str] | None = None) -> Any:
        """A Metadata (v12) answer of node `node_id` (default: the first running broker)."""
        node = self.nodes[node_id if node_id is not None else self.running_brokers()[0]]
        request = metadata.MetadataRequest(
            version=METADATA_VERSION, allow_auto_topic_creation=False, include_topic_authorized_operations=False,
            topics=None if topics is None else [metadata.MetadataRequest.MetadataRequestTopic(
                name=t, topic_id=uuid.UUID(int=0)) for t in topics])
        return wire_call(node.port, request, METADATA_VERSION, metadata.MetadataResponse)

    def wait_until_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Wait until every running broker lists every running broker (each registered and
        unfenced, and has learned that of the others); TimeoutError after `timeout_s`."""
        wanted = sorted(self.running_brokers())
        self._wait(lambda: all(sorted(b.node_id for b in self.metadata(n).brokers) == wanted for n in wanted),
                   timeout_s, f"brokers {wanted} did not all register and unfence")

    def leader(self, topic: str, partition: int, node_id: int | None = None) -> int:
        """The leader of `topic`-`partition` as node `node_id` knows it (-1: none, or no such partition)."""
        for t in self.metadata(node_id, [topic]).topics:
            for p in t.partitions:
                if p.partition_index == partition and p.error_code == 0:
                    return p.leader_id
        return -1

    def wait_for_leader(self, topic: str, partition: int, *, not_on: Iterable[int] = (),
                        timeout_s: float = READY_TIMEOUT_S) -> int:
        """Wait until every running broker names the same live leader of `topic`-`partition`,
        none of `not_on`; returns it."""
        excluded, found = set(not_on), []

        def agreed() -> bool:
            live = self.running_brokers()
            leaders = {self.leader(topic, partition, n) for n in live}
            found[:] = leaders
            return len(leaders) == 1 and leaders <= set(live) - excluded

        self._wait(agreed, timeout_s, f"{topic}-{partition} got no leader outside {sorted(excluded)}")
        return found[0]

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int | None = None,
                     configs: Mapping[str, str] | None = None) -> None:
        """Create `name` (replicated on every broker by default) and wait until each partition
        has a leader every running broker knows. Raises ClusterFaultError with the error code."""
        cls = admin.CreateTopicsRequest
        topic = cls.CreatableTopic(
            name=name, num_partitions=partitions, assignments=[],
            replication_factor=len(self.running_brokers()) if replication_factor is None else replication_factor,
            configs=[cls.CreatableTopic.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])
        response = wire_call(self.nodes[self.running_brokers()[0]].port,
                             cls(version=CREATE_TOPICS_VERSION, topics=[topic], timeout_ms=30_000, validate_only=False),
                             CREATE_TOPICS_VERSION, admin.CreateTopicsResponse)
        error = response.topics[0].error_code
        if error:
            raise ClusterFaultError(f"creating topic {name!r} failed with error code {error}")
        for partition in range(partitions):
            self.wait_for_leader(name, partition)

    @staticmethod
    def _wait(condition, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if condition():
                    return
            except (OSError, ConnectionError):
                pass  # a node between a restart and its first answer
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} within {timeout_s} s")
            time.sleep(0.02)

    # ------------------------------------------------------------------ faults

    def control(self, api: int | str, action: Action, *, node: int | None = None, times: int | None = 1) -> Hook:
        """Install a hook: requests of `api` (key or name, "Produce") on node `node` (default:
        every node) get `action` (Answer(code), Delay(seconds), Drop() or Observe()), `times` of
        them (None: every one until `hook.remove()`). What the hook took is in `hook.requests`."""
        hook = Hook(api_key(api), action, times)
        for member in self._hooked([node] if node is not None else list(self.nodes)):
            member.hooks.add(hook)
        return hook

    def push_errors(self, api: int | str, *error_codes: int, node: int | None = None) -> list[Hook]:
        """Answer the next requests of `api` with `error_codes`, one each, in order (librdkafka's
        rd_kafka_mock_push_request_errors): one-shot Answer hooks, the first installed asked first."""
        return [self.control(api, Answer(code), node=node) for code in error_codes]

    def move_leader(self, topic: str, partition: int, to_node: int) -> int:
        """Move the leadership of `topic`-`partition` to `to_node` (a live in-sync replica) at the
        controller, and wait until every running broker knows; returns the new leader epoch.
        InvalidReplicationError when `to_node` may not lead."""
        controller = self._in_process_node(self.controller.node_id)
        epoch = controller.server.move_leader(topic, partition, to_node)
        self.wait_for_leader(topic, partition, not_on=set(self.nodes) - {to_node})
        return epoch

    def cut(self, a: int, b: int) -> None:
        """Cut the link between nodes `a` and `b`: replica fetches, heartbeats, AlterPartition
        and forwarding between them lose their connections until `heal(a, b)`."""
        for one, other in self._pair(a, b):
            one.hooks.cut(other)

    def heal(self, a: int, b: int) -> None:
        """Restore the link `cut(a, b)` cut."""
        for one, other in self._pair(a, b):
            one.hooks.heal(other)

    def cut_clients(self, node: int) -> None:
        """Cut node `node` off from its clients: every request not from a node loses its
        connection (the nodes still reach it) until `heal_clients(node)`."""
        self._hooked([node])[0].hooks.cut(None)

    def heal_clients(self, node: int) -> None:
        self._hooked([node])[0].hooks.heal(None)

    def _pair(self, a: int, b: int) -> list[tuple[ClusterMember, int]]:
        first, second = self._hooked([a, b])
        return [(first, b), (second, a)]

    def _hooked(self, node_ids: list[int]) -> list[ClusterMember]:
        """The nodes whose hooks a fault is installed in; ClusterFaultError for nodes in processes of their own."""
        if self.processes:
            raise ClusterFaultError("hooks and link cuts act inside the nodes' process: run the cluster's "
                                    "nodes in this process (processes=False)")
        return [self.nodes[n] for n in node_ids]


def api_key(api: int | str) -> int:
    """The key of an API given by key or by name ("Produce", "BrokerHeartbeat")."""
    if isinstance(api, int):
        return api
    for spec in (*APIS.values(), *CONTROLLER_APIS.values()):
        if spec.name == api:
            return spec.key
    raise ValueError(f"no API is named {api!r}")


def wire_call(port: int, request: Any, version: int, response_class: Any) -> Any:
    """Send one request to the node listening on `port` and return its decoded response, over a
    NodeChannel of its own (NodeUnreachableError, a ConnectionError, when the connection fails;
    TimeoutError after WIRE_TIMEOUT_S)."""
    async def call() -> Any:
        channel = NodeChannel(HOST, port, CLIENT_ID)
        try:
            return await asyncio.wait_for(channel.send(request, version, response_class), WIRE_TIMEOUT_S)
        finally:
            await channel.close()

    return asyncio.run(call())

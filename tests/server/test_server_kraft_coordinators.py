"""Group and transaction coordinators on a KRaft cluster follow the leadership of their
`__consumer_offsets` / `__transaction_state` partitions: FindCoordinator names the leader of a
key's partition, other nodes answer NOT_COORDINATOR, an acknowledged commit is held by the ISR
and served by the next leader once the coordinator's node stops, and a transaction in flight is
completed by the successor (PrepareCommit committed, Ongoing aborted at its timeout)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses

import pytest
from kafka.protocol.admin import (
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
)
from kafka.protocol.consumer import OffsetFetchRequest, OffsetFetchResponse
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.producer import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)

from logstore.records import Record, build_batch, iter_batches
from logstore.records.control import CONTROL_KEY
from logstore.server import KafkaCluster, group_store
from logstore.server.control_hooks import Drop
from logstore.server.coordinator_records import partition_for, transaction_record
from tests.server.group_wire import Wire
from tests.server.test_server_kraft_cluster import Cluster, create_topic, eventually
from tests.support.clock import NOW
from tests.support.wire import WireClient

PARTITIONS = 3
CONFIGS = {"offsets.topic.num.partitions": PARTITIONS, "transaction.state.log.num.partitions": PARTITIONS}
GROUP_KEY, TRANSACTION_KEY = 0, 1
NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE = 16, 14, 15
TXN_TIMEOUT_MS = 5000


@pytest.fixture
def cluster(tmp_path):
    cluster = Cluster(tmp_path, CONFIGS)
    yield cluster
    cluster.close()


def find_coordinator(port: int, key: str, key_type: int) -> FindCoordinatorResponse:
    with WireClient(port) as client:
        return client.call(FindCoordinatorRequest[3](key=key, key_type=key_type), FindCoordinatorResponse[3])


def coordinator_of(cluster: Cluster, key: str, key_type: int, asked: int = 1) -> int:
    """The node FindCoordinator at node `asked` names for `key`, once there is one (the first
    ask has the controller create the coordinator topic)."""
    found = []

    def answered() -> bool:
        response = find_coordinator(cluster.nodes[asked].port, key, key_type)
        if response.error_code == 0:
            found.append(response)
        else:
            assert response.error_code == COORDINATOR_NOT_AVAILABLE
        return response.error_code == 0

    eventually(answered)
    response = found[0]
    assert response.port == cluster.nodes[response.node_id].port
    return response.node_id


def key_led_by_a_broker(cluster: Cluster, topic: str, prefix: str) -> tuple[str, int]:
    """A key whose coordinator partition a broker other than the controller's node leads
    (the failover tests stop broker nodes only): (key, its partition)."""
    cluster.caught_up()
    partitions = cluster.controller.image.topic(topic).partitions
    key = next(f"{prefix}-{i}" for i in range(100) if partitions[partition_for(f"{prefix}-{i}", PARTITIONS)].leader != 1)
    return key, partition_for(key, PARTITIONS)


def fetch_offset(port: int, group: str, topic: str, partition: int):
    with WireClient(port) as client:
        request = OffsetFetchRequest[7](group_id=group, topics=[OffsetFetchRequest[7].OffsetFetchRequestTopic(
            name=topic, partition_indexes=[partition])], require_stable=False)
        return client.call(request, OffsetFetchResponse[7])


def test_committed_offsets_survive_the_coordinators_node_and_are_served_by_the_next_leader(cluster):
    create_topic(cluster.nodes[1].port, "orders", 1, 3)
    coordinator_of(cluster, "anything", GROUP_KEY)  # creates __consumer_offsets through the controller
    group, partition = key_led_by_a_broker(cluster, "__consumer_offsets", "billing")
    first = coordinator_of(cluster, group, GROUP_KEY, asked=2)
    assert cluster.controller.image.topic("__consumer_offsets").partitions[partition].replicas.__len__() == 3
    others = [n for n in (1, 2, 3) if n != first]
    eventually(lambda: fetch_offset(cluster.nodes[first].port, group, "orders", 0).error_code == 0)
    for node in others:  # they hold the partition's replica, not its coordinator
        assert fetch_offset(cluster.nodes[node].port, group, "orders", 0).error_code == NOT_COORDINATOR
        with Wire(cluster.nodes[node].port) as wire:
            assert wire.commit(group, -1, "", None, {("orders", 0): 7}) == [NOT_COORDINATOR]
    with Wire(cluster.nodes[first].port) as wire:
        assert wire.commit(group, -1, "", None, {("orders", 0): 42}) == [0]
    log = cluster.nodes[first].manager.get("__consumer_offsets", partition)
    assert log.high_watermark == log.log_end_offset  # answered once the ISR held it

    cluster.stop(first)
    successor = coordinator_of(cluster, group, GROUP_KEY, asked=others[0])
    assert successor in others
    eventually(lambda: fetch_offset(cluster.nodes[successor].port, group, "orders", 0).error_code == 0)
    answer = fetch_offset(cluster.nodes[successor].port, group, "orders", 0)
    assert answer.topics[0].partitions[0].committed_offset == 42


def txn_call(port: int, request, response_cls):
    with WireClient(port) as client:
        return client.call(request, response_cls)


def transaction_on_every_partition(cluster: Cluster, txn_id: str, coordinator: int,
                                   indexes: tuple[int, ...] = (0, 1, 2)) -> tuple[int, int]:
    """A transaction of `txn_id` that wrote one record to each partition of "orders" (one led by
    each node; those of `indexes` only): (producer id, epoch)."""
    init = txn_call(cluster.nodes[coordinator].port, InitProducerIdRequest[3](
        transactional_id=txn_id, transaction_timeout_ms=TXN_TIMEOUT_MS, producer_id=-1, producer_epoch=-1),
        InitProducerIdResponse[3])
    assert init.error_code == 0
    ids = {"transactional_id": txn_id, "producer_id": init.producer_id, "producer_epoch": init.producer_epoch}
    add = AddPartitionsToTxnRequest[3].AddPartitionsToTxnTopic
    added = txn_call(cluster.nodes[coordinator].port, AddPartitionsToTxnRequest[3](
        **{f"v3_and_below_{k}": v for k, v in ids.items()},
        v3_and_below_topics=[add(name="orders", partitions=list(indexes))]), AddPartitionsToTxnResponse[3])
    assert {p.partition_error_code for t in added.results_by_topic_v3_and_below for p in t.results_by_partition} == {0}
    partitions = cluster.controller.image.topic("orders").partitions
    request = ProduceRequest[7]
    for index, state in ((i, partitions[i]) for i in indexes):
        batch = build_batch([Record(0, NOW, None, b"in the txn")], producer_id=init.producer_id,
                            producer_epoch=init.producer_epoch, base_sequence=0, is_transactional=True)
        produced = txn_call(cluster.nodes[state.leader].port, request(transactional_id=txn_id, acks=-1,
                            timeout_ms=10_000, topic_data=[request.TopicProduceData(name="orders", partition_data=[
                                request.TopicProduceData.PartitionProduceData(index=index, records=batch)])]),
                            ProduceResponse[7])
        assert produced.responses[0].partition_responses[0].error_code == 0
    return init.producer_id, init.producer_epoch


def marked(cluster: Cluster, kind: int) -> bool:
    """Whether the leader of every partition of "orders" ends with a `kind` marker (0 abort,
    1 commit) that its last stable offset has passed."""
    for index, state in cluster.controller.image.topic("orders").partitions.items():
        log = cluster.nodes[state.leader].manager.get("orders", index)
        batches = list(iter_batches((log.dir / "00000000000000000000.log").read_bytes()))
        last = batches[-1]
        if not last.is_control or CONTROL_KEY.unpack_from(last.records()[0].key)[1] != kind:
            return False
        if log.last_stable_offset != log.log_end_offset:
            return False
    return True


def state_at(cluster: Cluster, node: int, txn_id: str) -> str:
    answer = txn_call(cluster.nodes[node].port, DescribeTransactionsRequest[0](transactional_ids=[txn_id]),
                      DescribeTransactionsResponse[0]).transaction_states[0]
    return answer.transaction_state if answer.error_code == 0 else f"error {answer.error_code}"


async def prepare(txns, prepared) -> None:
    txns.coordinated.append(prepared.transactional_id, [transaction_record(prepared)], NOW)


def stop_coordinator_and_find_successor(cluster: Cluster, txn_id: str, coordinator: int) -> int:
    cluster.stop(coordinator)
    asked = next(n for n in cluster.nodes if n != coordinator)
    successor = coordinator_of(cluster, txn_id, TRANSACTION_KEY, asked=asked)
    assert successor != coordinator
    return successor


def test_a_transaction_prepared_to_commit_when_its_coordinator_stops_is_committed_by_the_successor(cluster):
    create_topic(cluster.nodes[1].port, "orders", 3, 3)  # one partition led by each node
    coordinator_of(cluster, "anything", TRANSACTION_KEY)  # creates __transaction_state through the controller
    txn_id, _ = key_led_by_a_broker(cluster, "__transaction_state", "payments")
    coordinator = coordinator_of(cluster, txn_id, TRANSACTION_KEY)
    eventually(lambda: state_at(cluster, coordinator, txn_id) in ("error 105", "Empty"))  # loaded
    transaction_on_every_partition(cluster, txn_id, coordinator)
    assert state_at(cluster, coordinator, txn_id) == "Ongoing"
    # the coordinator's node stops between writing PrepareCommit and writing the markers: the
    # record is written (on the node's loop) as EndTxn writes it, the markers never are
    node = cluster.nodes[coordinator]
    txns, partition = node._txns, partition_for(txn_id, PARTITIONS)
    txn = next(t for t in txns.transactions() if t.transactional_id == txn_id)
    prepared = dataclasses.replace(txn, state=2)  # PrepareCommit
    asyncio.run_coroutine_threadsafe(prepare(txns, prepared), node._loop).result()
    end = txns.coordinated.log(partition).log_end_offset
    eventually(lambda: all(n.manager.get("__transaction_state", partition).log_end_offset == end
                           for n in cluster.nodes.values()))
    assert not marked(cluster, 1)

    successor = stop_coordinator_and_find_successor(cluster, txn_id, coordinator)
    cluster.caught_up()
    assert any(p.leader != successor for p in cluster.controller.image.topic("orders").partitions.values())
    eventually(lambda: marked(cluster, 1))  # markers written here and, by WriteTxnMarkers, at the other leader
    eventually(lambda: state_at(cluster, successor, txn_id) == "CompleteCommit")


def test_an_ongoing_transaction_whose_coordinator_stops_is_aborted_by_the_successor_at_its_timeout(cluster):
    create_topic(cluster.nodes[1].port, "orders", 3, 3)
    coordinator_of(cluster, "anything", TRANSACTION_KEY)
    txn_id, _ = key_led_by_a_broker(cluster, "__transaction_state", "refunds")
    coordinator = coordinator_of(cluster, txn_id, TRANSACTION_KEY)
    eventually(lambda: state_at(cluster, coordinator, txn_id) in ("error 105", "Empty"))
    transaction_on_every_partition(cluster, txn_id, coordinator)

    successor = stop_coordinator_and_find_successor(cluster, txn_id, coordinator)
    eventually(lambda: state_at(cluster, successor, txn_id) == "Ongoing")  # loaded, not yet timed out
    cluster.pass_time(TXN_TIMEOUT_MS + 1)
    eventually(lambda: marked(cluster, 0))
    eventually(lambda: state_at(cluster, successor, txn_id) == "CompleteAbort")


def test_a_coordinator_topic_wider_than_the_cluster_is_refused_and_no_coordinator_is_named(tmp_path):
    cluster = Cluster(tmp_path, {**CONFIGS, "offsets.topic.replication.factor": 4})
    try:
        assert find_coordinator(cluster.nodes[2].port, "billing", GROUP_KEY).error_code == COORDINATOR_NOT_AVAILABLE
        # forwarded after the creation FindCoordinator asked for, over the same channel: answered after it
        assert create_topic(cluster.nodes[2].port, "orders", 1, 3).topics[0].error_code == 0
        assert cluster.controller.image.topic("__consumer_offsets") is None  # 4 replicas, 3 brokers
        assert find_coordinator(cluster.nodes[2].port, "billing", GROUP_KEY).error_code == COORDINATOR_NOT_AVAILABLE
    finally:
        cluster.close()


def test_a_one_node_kafka_cluster_gives_its_coordinator_topics_one_replica(tmp_path):
    with KafkaCluster(1, data_dir=tmp_path, config=CONFIGS) as kafka_cluster:
        port = kafka_cluster.node(1).port
        for key_type in (GROUP_KEY, TRANSACTION_KEY):
            eventually(lambda key_type=key_type: find_coordinator(port, "billing", key_type).error_code == 0)
            assert find_coordinator(port, "billing", key_type).node_id == 1


def init_producer_id(port: int, txn_id: str) -> int:
    return txn_call(port, InitProducerIdRequest[3](transactional_id=txn_id, transaction_timeout_ms=TXN_TIMEOUT_MS,
                                                   producer_id=-1, producer_epoch=-1), InitProducerIdResponse[3]).error_code


def test_transaction_writes_are_refused_below_the_transaction_logs_min_isr_and_group_commits_are_not(cluster):
    create_topic(cluster.nodes[1].port, "orders", 1, 3)
    coordinator_of(cluster, "anything", TRANSACTION_KEY)
    coordinator_of(cluster, "anything", GROUP_KEY)
    cluster.stop(2)
    cluster.stop(3)  # node 1 leads every partition now, alone in each ISR (transaction.state.log.min.isr is 2)
    port = cluster.nodes[1].port
    eventually(lambda: init_producer_id(port, "payments") == COORDINATOR_NOT_AVAILABLE)
    with Wire(port) as wire:
        eventually(lambda: wire.commit("billing", -1, "", None, {("orders", 0): 5}) == [0])


def group_state(port: int, group: str) -> str:
    with WireClient(port) as client:
        answer = client.call(DescribeGroupsRequest[3](groups=[group], include_authorized_operations=False),
                             DescribeGroupsResponse[3]).groups[0]
    return answer.group_state if answer.error_code == 0 else f"error {answer.error_code}"


def test_a_coordinator_that_loses_its_partition_sends_its_waiting_members_to_the_new_one(cluster):
    create_topic(cluster.nodes[1].port, "orders", 1, 3)
    coordinator_of(cluster, "anything", GROUP_KEY)
    group, partition = key_led_by_a_broker(cluster, "__consumer_offsets", "billing")
    first = coordinator_of(cluster, group, GROUP_KEY)
    port = cluster.nodes[first].port
    eventually(lambda: group_state(port, group) == "Dead")  # loaded: an unknown group
    with Wire(port) as wire, concurrent.futures.ThreadPoolExecutor(1) as pool:
        member_id = wire.join(group, None).member_id  # MEMBER_ID_REQUIRED, then the join that waits
        joining = pool.submit(wire.join, group, None, member_id)  # for group.initial.rebalance.delay.ms
        eventually(lambda: group_state(port, group) == "PreparingRebalance")
        successor = next(n for n in (1, 2, 3) if n != first)
        cluster.kafka.move_leader("__consumer_offsets", partition, successor)
        assert joining.result(10).error_code == NOT_COORDINATOR
    assert group_state(port, group) == f"error {NOT_COORDINATOR}"
    assert coordinator_of(cluster, group, GROUP_KEY) == successor


def committed(port: int, group: str) -> int | None:
    """The offset `group` committed for orders-0, as the node at `port` answers (None: an error)."""
    answer = fetch_offset(port, group, "orders", 0)
    return None if answer.error_code else answer.topics[0].partitions[0].committed_offset


def group_with_a_commit(cluster: Cluster, offset: int) -> tuple[str, int, int]:
    """A group whose __consumer_offsets partition a broker leads, once it committed `offset` for
    orders-0 there: (group, its partition, the coordinator)."""
    create_topic(cluster.nodes[1].port, "orders", 1, 3)
    coordinator_of(cluster, "anything", GROUP_KEY)
    group, partition = key_led_by_a_broker(cluster, "__consumer_offsets", "billing")
    first = coordinator_of(cluster, group, GROUP_KEY)
    with Wire(cluster.nodes[first].port) as wire:
        eventually(lambda: wire.commit(group, -1, "", None, {("orders", 0): offset}) == [0])
    return group, partition, first


def test_a_coordinator_led_away_and_back_within_one_metadata_change_reloads_its_partition(cluster):
    group, partition, first = group_with_a_commit(cluster, 42)
    other = next(n for n in (1, 2, 3) if n != first)
    # the coordinators of `first` see both moves at once, as from one metadata batch
    listeners = cluster.nodes[first].cluster.metadata_listeners
    follow = listeners.pop()
    cluster.kafka.move_leader("__consumer_offsets", partition, other)
    with Wire(cluster.nodes[other].port) as wire:
        eventually(lambda: wire.commit(group, -1, "", None, {("orders", 0): 43}) == [0])
    cluster.kafka.move_leader("__consumer_offsets", partition, first)
    listeners.append(follow)
    create_topic(cluster.nodes[1].port, "more", 1, 3)  # the next metadata change
    eventually(lambda: committed(cluster.nodes[first].port, group) == 43)


def test_a_failed_coordinator_load_is_tried_again_and_clients_are_told_to_wait(tmp_path, monkeypatch):
    failing: set[int] = set()  # the __consumer_offsets partitions whose loads fail
    failures: list[int] = []

    def flaky(log):
        if log.partition in failing:
            failures.append(log.partition)
            raise OSError("the disk hiccuped")
        return replay(log)

    replay = group_store.replay_groups
    monkeypatch.setattr(group_store, "replay_groups", flaky)
    cluster = Cluster(tmp_path, CONFIGS)
    try:
        group, partition, first = group_with_a_commit(cluster, 6)
        failing.add(partition)
        successor = next(n for n in (1, 2, 3) if n != first)
        cluster.kafka.move_leader("__consumer_offsets", partition, successor)
        eventually(lambda: len(failures) >= 2)  # tried again with no metadata change to prompt it
        with Wire(cluster.nodes[successor].port) as wire:
            assert wire.commit(group, -1, "", None, {("orders", 0): 7}) == [COORDINATOR_LOAD_IN_PROGRESS]
            failing.clear()
            eventually(lambda: wire.commit(group, -1, "", None, {("orders", 0): 7}) == [0])
        assert committed(cluster.nodes[successor].port, group) == 7
    finally:
        cluster.close()


def test_a_commit_waiting_for_the_isr_when_the_coordinator_moves_is_refused_not_acknowledged(cluster):
    group, partition, first = group_with_a_commit(cluster, 6)
    # the followers cannot fetch the commit of 7; the successor takes one of 8 at its offset
    starved = cluster.kafka.control("Fetch", Drop(), node=first, times=None)
    followers = {n for n in (1, 2, 3) if n != first}
    eventually(lambda: {r.body.replica_state.replica_id for _, r in starved.requests} == followers)
    old = cluster.nodes[first].manager.get("__consumer_offsets", partition)
    end = old.log_end_offset
    with Wire(cluster.nodes[first].port) as wire, concurrent.futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(wire.commit, group, -1, "", None, {("orders", 0): 7})
        eventually(lambda: old.log_end_offset > end)
        successor = next(iter(followers))
        cluster.kafka.move_leader("__consumer_offsets", partition, successor)
        starved.remove()
        with Wire(cluster.nodes[successor].port) as other:
            eventually(lambda: other.commit(group, -1, "", None, {("orders", 0): 8}) == [0])
        eventually(lambda: old.high_watermark > end)
        assert waiting.result(30) == [NOT_COORDINATOR]
    assert committed(cluster.nodes[successor].port, group) == 8

"""The APIs behind Kafka's admin tools, through the clients that expose them: DescribeCluster
and authorized operations (confluent-kafka), DescribeLogDirs, OffsetDelete, ListTransactions,
DescribeTransactions and DescribeProducers (kafka-python's admin client, as
`kafka-log-dirs.sh`, `kafka-consumer-groups.sh --delete-offsets` and `kafka-transactions.sh`
use them), and DescribeTopicPartitions' cursor at the wire (only the Java client sends it)."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AclOperation, AdminClient
from hypothesis import given
from hypothesis import strategies as st
from kafka import KafkaAdminClient
from kafka.errors import GroupIdNotFoundError, NoError, UnknownTopicOrPartitionError
from kafka.protocol.admin import DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse
from kafka.structs import TopicPartition as KafkaPythonPartition

from logstore.server.describe_api import partition_page
from tests.support.wire import WireClient

pytestmark = pytest.mark.kafka_broker_config({"offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": 1})


@pytest.fixture(scope="module", autouse=True)
def seeded(module_server) -> None:
    for name, partitions in [("alpha", 3), ("beta", 2), ("tx", 2)]:
        module_server.context.topics.create(name, partitions)


@pytest.fixture(scope="module")
def admin(module_server):
    client = KafkaAdminClient(bootstrap_servers=module_server.bootstrap_servers)
    yield client
    client.close()


def test_describe_cluster_with_authorized_operations(module_server):
    admin = AdminClient({"bootstrap.servers": module_server.bootstrap_servers})
    cluster = admin.describe_cluster(include_authorized_operations=True).result(10)
    assert cluster.cluster_id == module_server.context.meta.cluster_id
    assert [(n.id, n.port) for n in cluster.nodes] == [(module_server.context.node_id, module_server.port)]
    assert {AclOperation.DESCRIBE, AclOperation.ALTER, AclOperation.IDEMPOTENT_WRITE} <= set(
        cluster.authorized_operations)
    [topic] = admin.describe_topics(TopicCollection(["alpha"]), include_authorized_operations=True).values()
    described = topic.result(10)
    assert len(described.partitions) == 3
    assert {AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE} <= set(described.authorized_operations)


def test_kafka_python_describe_cluster_uses_describe_cluster(module_server, admin):
    cluster = admin.describe_cluster()
    assert cluster["cluster_id"] == module_server.context.meta.cluster_id
    assert [b["broker_id"] for b in cluster["brokers"]] == [module_server.context.node_id]


def test_describe_log_dirs_lists_each_partition_and_its_size(module_server, admin):
    module_server.manager.get("beta", 1).append([(None, b"x" * 100)])
    [broker] = admin.describe_log_dirs()
    [log_dir] = broker["log_dirs"]
    assert log_dir["log_dir"] == str(module_server.data_dir.resolve())
    sizes = {(t["name"], p["partition_index"]): p["partition_size"] for t in log_dir["topics"]
             for p in t["partitions"]}
    assert sizes[("beta", 1)] == module_server.manager.get("beta", 1).size > 0
    assert sizes[("alpha", 0)] == 0 and ("alpha", 2) in sizes
    assert log_dir["usable_bytes"] > 0


def test_offset_delete_removes_an_empty_groups_offsets(module_server, admin):
    consumer = Consumer({"bootstrap.servers": module_server.bootstrap_servers, "group.id": "deleting"})
    consumer.commit(offsets=[TopicPartition("alpha", 0, 5), TopicPartition("alpha", 1, 7)], asynchronous=False)
    consumer.close()
    errors = admin.delete_group_offsets("deleting", [KafkaPythonPartition("alpha", 0),
                                                     KafkaPythonPartition("missing", 0)])
    assert errors == {KafkaPythonPartition("alpha", 0): NoError,
                      KafkaPythonPartition("missing", 0): UnknownTopicOrPartitionError}
    remaining = admin.list_group_offsets({"deleting": None})["deleting"]
    assert {tp.partition: om.offset for tp, om in remaining.items()} == {1: 7}
    with pytest.raises(GroupIdNotFoundError):
        admin.delete_group_offsets("no-such-group", [KafkaPythonPartition("alpha", 0)])


def test_a_hanging_transaction_is_found_and_described(module_server, admin):
    producer = Producer({"bootstrap.servers": module_server.bootstrap_servers, "transactional.id": "hanging"})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce("tx", b"undecided", partition=1)
    assert producer.flush(10) == 0
    [listing] = [t for ts in admin.list_transactions().values() for t in ts if t.transactional_id == "hanging"]
    assert listing.state.value == "Ongoing"
    described = admin.describe_transactions(["hanging"])["hanging"]
    assert (described.state.value, described.producer_id) == ("Ongoing", listing.producer_id)
    assert described.topic_partitions == {KafkaPythonPartition("tx", 1)}
    producers = admin.describe_producers([KafkaPythonPartition("tx", 1)])[KafkaPythonPartition("tx", 1)]
    [state] = producers.active_producers
    assert (state.producer_id, state.current_transaction_start_offset) == (listing.producer_id, 0)
    producer.commit_transaction(10)
    assert admin.list_transactions(state_filters=["Ongoing"]) in ({}, {module_server.context.node_id: []})
    [done] = admin.describe_producers([KafkaPythonPartition("tx", 1)])[KafkaPythonPartition("tx", 1)].active_producers
    assert done.current_transaction_start_offset == -1


def describe_partitions(server, names: list[str], limit: int, cursor=None):
    request = DescribeTopicPartitionsRequest[0](
        topics=[DescribeTopicPartitionsRequest[0].TopicRequest(name=n) for n in names],
        response_partition_limit=limit, cursor=cursor)
    with WireClient(server.port, client_id="java-like") as client:
        return client.call(request, DescribeTopicPartitionsResponse[0])


def test_describe_topic_partitions_pages_with_a_cursor(module_server):
    first = describe_partitions(module_server, ["beta", "alpha", "unknown"], limit=4)
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in first.topics] == \
        [("alpha", [0, 1, 2]), ("beta", [0])]
    assert (first.next_cursor.topic_name, first.next_cursor.partition_index) == ("beta", 1)
    cursor = DescribeTopicPartitionsRequest[0].Cursor(topic_name="beta", partition_index=1)
    rest = describe_partitions(module_server, ["beta", "alpha", "unknown"], limit=4, cursor=cursor)
    assert [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in rest.topics] == \
        [("beta", 0, [1]), ("unknown", 3, [])]
    assert rest.next_cursor is None
    assert rest.topics[0].topic_id == module_server.context.topics.topic_id("beta")


@given(counts=st.dictionaries(st.text("abc", min_size=1, max_size=3), st.one_of(st.none(), st.integers(0, 7)),
                              max_size=6),
       limit=st.integers(1, 10))
def test_paging_with_the_cursor_shows_every_partition_once_in_order(counts, limit):
    shown, cursor, pages = [], None, 0
    while True:
        page, cursor = partition_page(counts, cursor, limit)
        assert sum(end - start for _, start, end in page) <= limit
        shown += [(name, p) for name, start, end in page for p in range(start, end)]
        pages += 1
        if cursor is None:
            break
    model = [(name, p) for name in sorted(counts) for p in range(counts[name] or 0)]
    assert shown == model
    assert pages <= len(model) // limit + 1

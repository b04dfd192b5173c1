"""CreateTopics with a manual replica assignment, through kafka-python's admin client: an
assignment of the live node is accepted; unknown ids, duplicates and gaps are refused with
INVALID_REPLICA_ASSIGNMENT, as Kafka's controller refuses them."""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient

NONE, INVALID_REQUEST, INVALID_REPLICA_ASSIGNMENT = 0, 42, 39


@pytest.fixture(scope="module")
def admin(module_server):
    client = KafkaAdminClient(bootstrap_servers=module_server.bootstrap_servers)
    yield client
    client.close()


def create(admin, name: str, assignments: dict, **options) -> int:
    result = admin.create_topics({name: {"assignments": assignments, **options}}, raise_errors=False)
    return result["topics"][0]["error_code"]


def test_an_assignment_of_the_live_node_creates_the_topic(module_server, admin):
    node = module_server.context.node_id
    assert create(admin, "assigned", {0: [node], 1: [node], 2: [node]}) == NONE
    assert module_server.context.topics.partition_count("assigned") == 3


@pytest.mark.parametrize("assign", [
    lambda node: {0: [4242]},
    lambda node: {0: [node, node]},
    lambda node: {0: [node], 2: [node]},
    lambda node: {0: []},
], ids=["unknown-broker", "duplicate-replica", "partition-gap", "empty-replicas"])
def test_a_bad_assignment_is_refused_as_kafka_refuses_it(module_server, admin, request, assign):
    name = "bad-" + request.node.callspec.id
    assert create(admin, name, assign(module_server.context.node_id)) == INVALID_REPLICA_ASSIGNMENT
    assert name not in module_server.context.topics


def test_an_assignment_with_a_partition_count_is_an_invalid_request(module_server, admin):
    assert create(admin, "both", {0: [module_server.context.node_id]}, num_partitions=1) == INVALID_REQUEST

"""Fetch v13-17 as Kafka 4.0's followers send it: topics by id (KIP-516) and, from v15, the
follower's broker epoch in ReplicaState (KIP-903). A leader refuses a fetch from an earlier
incarnation of a follower than one it has seen (NOT_LEADER_OR_FOLLOWER), and consumers keep
being offered v12, the last version by topic name."""

from __future__ import annotations

import uuid

from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from logstore.server import error_codes as ec
from tests.server.test_server_kraft_cluster import (  # noqa: F401 (the cluster fixture)
    cluster,
    create_topic,
    metadata,
    produce,
    three_records_replicated,
)
from tests.support.wire import WireClient


def fetch_by_id(port: int, topic_id: uuid.UUID, partition: int, offset: int, *, replica: int = -1,
                replica_epoch: int = -1, version: int = 17):
    request = FetchRequest[version]
    state = {"replica_state": request.ReplicaState(replica_id=replica, replica_epoch=replica_epoch)} \
        if version >= 15 else {"replica_id": replica}
    with WireClient(port) as client:
        response = client.call(request(
            max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
            forgotten_topics_data=[], rack_id="", topics=[request.FetchTopic(topic_id=topic_id, partitions=[
                request.FetchTopic.FetchPartition(partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                                                  last_fetched_epoch=-1, log_start_offset=-1,
                                                  partition_max_bytes=1 << 20)])], **state), FetchResponse[version])
    topic = response.responses[0]
    return topic.topic_id, topic.partitions[0]


def test_a_fetch_by_topic_id_reads_the_topic_and_an_unknown_id_is_answered_as_such(server):
    create_topic(server.port, "orders", 1, 1)
    assert produce(server.port, "orders", 0, b"a") == ec.NONE
    topic_id = metadata(server.port, ["orders"]).topics[0].topic_id
    for version in (13, 15, 17):
        answer_id, answer = fetch_by_id(server.port, topic_id, 0, 0, version=version)
        assert (answer_id, answer.error_code, answer.high_watermark) == (topic_id, ec.NONE, 1) and answer.records
    missing = uuid.UUID(int=12345)
    assert fetch_by_id(server.port, missing, 0, 0)[0] == missing
    assert fetch_by_id(server.port, missing, 0, 0)[1].error_code == ec.UNKNOWN_TOPIC_ID
    zero = uuid.UUID(int=0)  # no topic's id: answered, not a crash of the connection (found by the fuzz)
    assert fetch_by_id(server.port, zero, 0, 0)[1].error_code == ec.UNKNOWN_TOPIC_ID
    with WireClient(server.port) as client:
        versions = client.call(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"),
                               ApiVersionsResponse[3])
    assert next(k.max_version for k in versions.api_keys if k.api_key == FetchRequest.API_KEY) == 12


def test_a_leader_refuses_a_fetch_from_an_earlier_incarnation_of_its_follower(cluster):  # noqa: F811 (fixture)
    index, leader = three_records_replicated(cluster)  # the followers fetched at their current epochs
    follower = next(n for n in (1, 2, 3) if n != leader)
    current = cluster.controller.image.brokers[follower].broker_epoch
    topic_id = cluster.controller.image.topic_ids["orders"]
    port = cluster.nodes[leader].port
    _, stale = fetch_by_id(port, topic_id, index, 3, replica=follower, replica_epoch=current - 1)
    assert stale.error_code == ec.NOT_LEADER_OR_FOLLOWER and not stale.records
    _, fresh = fetch_by_id(port, topic_id, index, 3, replica=follower, replica_epoch=current)
    assert (fresh.error_code, fresh.high_watermark) == (ec.NONE, 3)

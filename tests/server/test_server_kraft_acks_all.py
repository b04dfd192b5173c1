"""acks=all on a KRaft cluster: the leader's append wakes its followers' waiting fetches, so a
produce is acknowledged once they have fetched again, not when their long poll runs out."""

from __future__ import annotations

from kafka.protocol.producer import ProduceRequest, ProduceResponse

from logstore.records import Record, build_batch
from logstore.server.kraft import replica_fetcher
from tests.server.test_server_kraft_cluster import Cluster, create_topic
from tests.support.clock import NOW
from tests.support.wire import WireClient

PRODUCE_TIMEOUT_MS = 10_000


def produce_all(port: int, topic: str, partitions: list[int]) -> list[int]:
    """One acks=all Produce of a record to each of `partitions`: their error codes."""
    request = ProduceRequest[7]
    data = [request.TopicProduceData.PartitionProduceData(index=p, records=build_batch([Record(0, NOW, None, b"x")]))
            for p in partitions]
    with WireClient(port, timeout=PRODUCE_TIMEOUT_MS / 1000 * 3) as client:
        response = client.call(request(transactional_id=None, acks=-1, timeout_ms=PRODUCE_TIMEOUT_MS, topic_data=[
            request.TopicProduceData(name=topic, partition_data=data)]), ProduceResponse[7])
    return [p.error_code for p in response.responses[0].partition_responses]


def test_an_acks_all_produce_is_answered_without_waiting_out_the_followers_long_poll(tmp_path, monkeypatch):
    # the followers' fetches wait for data far longer than the produce's timeout: only a wake-up
    # from the append lets them fetch the records before REQUEST_TIMED_OUT
    monkeypatch.setattr(replica_fetcher, "FETCH_MAX_WAIT_MS", PRODUCE_TIMEOUT_MS * 60)
    cluster = Cluster(tmp_path)
    try:
        create_topic(cluster.nodes[1].port, "orders", 6, 3)  # two partitions led by each broker
        cluster.caught_up()
        partitions = cluster.controller.image.topic("orders").partitions
        leader = partitions[0].leader
        led = sorted(i for i, p in partitions.items() if p.leader == leader)
        assert produce_all(cluster.nodes[leader].port, "orders", led) == [0, 0]
        assert produce_all(cluster.nodes[leader].port, "orders", led[:1]) == [0]
        assert [cluster.nodes[leader].manager.get("orders", i).high_watermark for i in led] == [2, 1]
    finally:
        cluster.close()

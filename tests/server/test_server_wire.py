"""Wire-level behaviour no client library pins down by itself: long-polling fetches woken by
a produce, acks=0 produces that get no answer, read_committed ListOffsets at the LSO, produce
requests spanning partitions, request headers with tagged fields."""

from __future__ import annotations

import struct
import threading
import time

import pytest
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from logstore.records import Record, build_batch, iter_batches
from logstore.server import KafkaServer
from tests.support.wire import WireClient


@pytest.fixture(scope="module", autouse=True)
def wire_topic(module_server) -> None:
    module_server.context.topics.create("wire", 1)


def produce_request(acks: int, value: bytes, transactional: bool = False):
    batch = build_batch([Record(0, int(time.time() * 1000), None, value)])
    topic = ProduceRequest[7].TopicProduceData
    return ProduceRequest[7](transactional_id=None, acks=acks, timeout_ms=1000, topic_data=[
        topic(name="wire", partition_data=[topic.PartitionProduceData(index=0, records=batch)])])


def fetch_request(offset: int, max_wait_ms: int, min_bytes: int = 1, isolation: int = 0):
    topic = FetchRequest[11].FetchTopic
    return FetchRequest[11](replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20,
                            isolation_level=isolation, session_id=0, session_epoch=-1, topics=[
                                topic(topic="wire", partitions=[topic.FetchPartition(
                                    partition=0, current_leader_epoch=-1, fetch_offset=offset,
                                    log_start_offset=-1, partition_max_bytes=1 << 20)])],
                            forgotten_topics_data=[], rack_id="")


def test_a_waiting_fetch_returns_as_soon_as_a_produce_lands(module_server):
    end = module_server.manager.get("wire", 0).log_end_offset
    with WireClient(module_server.port) as sock:
        timer = threading.Timer(0.3, lambda: _produce_elsewhere(module_server, b"wake up"))
        started = time.monotonic()
        timer.start()
        sock.send(fetch_request(end, max_wait_ms=120_000), 1)
        response = sock.receive(FetchResponse[11])
        elapsed = time.monotonic() - started
    partition = response.responses[0].partitions[0]
    assert partition.error_code == 0 and len(partition.records) > 0
    assert 0.25 < elapsed < 60  # woken by the produce, long before its two-minute max wait


def test_a_fetch_with_nothing_to_return_waits_out_max_wait(module_server):
    end = module_server.manager.get("wire", 0).log_end_offset
    with WireClient(module_server.port) as sock:
        started = time.monotonic()
        sock.send(fetch_request(end, max_wait_ms=400), 1)
        response = sock.receive(FetchResponse[11])
    assert time.monotonic() - started >= 0.35
    assert len(response.responses[0].partitions[0].records or b"") == 0


@pytest.mark.parametrize("min_bytes", [0, -1, -2**31])
def test_a_fetch_wanting_no_bytes_is_answered_at_once(module_server, min_bytes):
    end = module_server.manager.get("wire", 0).log_end_offset
    with WireClient(module_server.port) as sock:
        started = time.monotonic()
        sock.send(fetch_request(end, max_wait_ms=2**31 - 1, min_bytes=min_bytes), 1)
        response = sock.receive(FetchResponse[11])
    assert time.monotonic() - started < 60  # not parked for max_wait (24 days)
    assert response.responses[0].partitions[0].error_code == 0


def test_a_fetch_of_no_partitions_is_answered_at_once(module_server):
    request = fetch_request(0, max_wait_ms=2**31 - 1)
    request.topics = []
    with WireClient(module_server.port) as sock:
        started = time.monotonic()
        sock.send(request, 1)
        response = sock.receive(FetchResponse[11])
    assert time.monotonic() - started < 60  # not parked for max_wait (24 days)
    assert response.error_code == 0 and response.responses == []


def _produce_elsewhere(server, value: bytes) -> None:
    with WireClient(server.port) as sock:
        sock.send(produce_request(1, value), 9)
        assert sock.receive(ProduceResponse[7]).responses[0].partition_responses[0].error_code == 0


def test_acks_zero_gets_no_answer_but_is_written(module_server):
    log = module_server.manager.get("wire", 0)
    before = log.log_end_offset
    with WireClient(module_server.port) as sock:
        sock.send(produce_request(0, b"fire and forget"), 1)
        sock.send(ApiVersionsRequest[1](), 2)  # the next answer on the wire is this one's
        assert sock.receive(ApiVersionsResponse[1]).header.correlation_id == 2
    assert log.log_end_offset == before + 1


def test_list_offsets_latest_is_the_lso_for_read_committed(module_server):
    log = module_server.manager.get("wire", 0)
    batch = build_batch([Record(0, int(time.time() * 1000), None, b"open")], producer_id=900,
                        producer_epoch=0, base_sequence=0, is_transactional=True)
    log.append(bytearray(batch))
    topic = ListOffsetsRequest[5].ListOffsetsTopic
    answers = []
    with WireClient(module_server.port) as sock:
        for isolation in (0, 1):
            sock.send(ListOffsetsRequest[5](replica_id=-1, isolation_level=isolation, topics=[
                topic(name="wire", partitions=[topic.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                                           timestamp=-1)])]), isolation)
            answers.append(sock.receive(ListOffsetsResponse[5]).topics[0].partitions[0].offset)
    assert answers == [log.high_watermark, log.last_stable_offset]
    assert answers[1] < answers[0]


def test_metadata_creates_topics_only_when_auto_creation_is_enabled(tmp_path):
    from kafka.protocol.metadata import MetadataRequest, MetadataResponse

    request = MetadataRequest[8](topics=[MetadataRequest[8].MetadataRequestTopic(name="wanted")],
                                 allow_auto_topic_creation=True, include_cluster_authorized_operations=False,
                                 include_topic_authorized_operations=False)
    for enabled, partitions in ((False, 0), (True, 3)):
        config = {"auto.create.topics.enable": enabled, "num.partitions": 3}
        with KafkaServer(tmp_path / str(enabled), port=0, config=config) as srv, \
                WireClient(srv.port) as sock:
            sock.send(request, 1)
            topic = sock.receive(MetadataResponse[8]).topics[0]
            assert (topic.error_code == 0) == enabled
            assert len(topic.partitions) == partitions
            assert ("wanted" in srv.context.topics) == enabled


def _values(log, offset: int = 0) -> list[bytes]:
    return [r.value for batch in iter_batches(log.read(offset, 1 << 20).records) for r in batch.records()]


def test_one_produce_request_appends_each_partitions_own_records(module_server):
    module_server.context.topics.create("multi", 2)
    topic = ProduceRequest[9].TopicProduceData
    partitions = [topic.PartitionProduceData(index=i, records=build_batch([Record(0, int(time.time() * 1000), None,
                                                                               b"to %d" % i)]))
                  for i in (1, 0)]
    with WireClient(module_server.port) as sock:
        sock.send(ProduceRequest[9](transactional_id=None, acks=-1, timeout_ms=1000,
                                     topic_data=[topic(name="multi", partition_data=partitions)]), 3)
        answers = sock.receive(ProduceResponse[9]).responses[0].partition_responses
    assert [(a.index, a.error_code, a.base_offset) for a in answers] == [(1, 0, 0), (0, 0, 0)]
    assert [_values(module_server.manager.get("multi", i)) for i in (0, 1)] == [[b"to 0"], [b"to 1"]]


def test_a_request_header_with_tagged_fields_and_a_long_client_id_is_read(module_server):
    log = module_server.manager.get("wire", 0)
    end = log.log_end_offset
    client_id = b"c" * 3000
    header = struct.pack(">hhih", 0, 9, 41, len(client_id)) + client_id + b"\x01\x05\x02ok"  # one unknown tag
    topic = ProduceRequest[9].TopicProduceData
    batch = build_batch([Record(0, int(time.time() * 1000), None, b"tagged header")])
    body = ProduceRequest[9](transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
        topic(name="wire", partition_data=[topic.PartitionProduceData(index=0, records=batch)])]).encode()
    with WireClient(module_server.port) as sock:
        sock.sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        response = sock.receive(ProduceResponse[9])
    assert response.header.correlation_id == 41
    assert response.responses[0].partition_responses[0].base_offset == end
    assert _values(log, end) == [b"tagged header"]

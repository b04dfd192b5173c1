"""Malformed, oversized and hostile requests: each gets Kafka's error code or a closed
connection, never an unbounded allocation or a dead server."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct

import pytest
from kafka.protocol.admin import (
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kafka.protocol.consumer import FetchRequest, OffsetCommitRequest, OffsetCommitResponse
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import (
    ProduceRequest,
    ProduceResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)

from logstore.descriptor_pool import process_pool
from logstore.records import Record, build_batch
from logstore.server import KafkaServer, topics
from logstore.server.apis import APIS
from logstore.server.connection import InFlightBudget
from tests.support.wire import WireClient

UNSUPPORTED_VERSION, INVALID_TOPIC, KAFKA_STORAGE_ERROR = 35, 17, 56
UNKNOWN_TOPIC_OR_PARTITION, OFFSET_METADATA_TOO_LARGE, INVALID_GROUP_ID = 3, 12, 24
INVALID_REQUIRED_ACKS, INVALID_CONFIG, INVALID_REQUEST = 21, 40, 42


pytestmark = pytest.mark.kafka_broker_config({"socket.request.max.bytes": 1024 * 1024})


def connect(server) -> WireClient:
    return WireClient(server.port, timeout=5, client_id="bad-input")


def still_serving(server) -> bool:
    with connect(server) as sock:
        response = sock.call(ApiVersionsRequest[0](), ApiVersionsResponse[0])
    return response.error_code == 0


@pytest.mark.parametrize("size", [2**31 - 1, 1024 * 1024 + 1, -1, 3])
def test_a_size_field_out_of_bounds_closes_the_connection(module_server, size):
    with connect(module_server) as sock:
        sock.sock.sendall(struct.pack(">i", size) + b"\x00" * 16)
        assert sock.closed_by_broker()
    assert still_serving(module_server)


@pytest.mark.parametrize("body", [
    struct.pack(">hhi", 3, 1, 5) + b"\xff",  # Metadata v1 cut inside the client id
    struct.pack(">hhih", 3, 1, 5, -1) + struct.pack(">i", 2**31 - 1),  # 2 billion topics, no bytes
    struct.pack(">hhih", 3, 1, 5, -1) + struct.pack(">ih", 1, 32767),  # a string longer than the frame
    struct.pack(">hhih", 0, 9, 5, -1) + b"\x00" * 3 + b"\xff" * 40,  # flexible Produce, garbage varints
])
def test_a_malformed_body_closes_the_connection_and_allocates_nothing_large(module_server, body):
    with connect(module_server) as sock:
        sock.sock.sendall(struct.pack(">i", len(body)) + body)
        assert sock.closed_by_broker()
    assert still_serving(module_server)


def test_an_unknown_api_closes_and_an_unknown_api_versions_version_gets_unsupported_version(module_server):
    with connect(module_server) as sock:
        body = struct.pack(">hhih", 9999, 0, 5, -1)
        sock.sock.sendall(struct.pack(">i", len(body)) + body)
        assert sock.closed_by_broker()
    with connect(module_server) as sock:
        body = struct.pack(">hhih", 18, 99, 42, -1)
        sock.sock.sendall(struct.pack(">i", len(body)) + body)
        response = sock.receive(ApiVersionsResponse[0])
    assert response.error_code == UNSUPPORTED_VERSION
    assert {k.api_key for k in response.api_keys} == set(APIS)


def test_api_versions_advertises_exactly_the_implemented_table(module_server):
    with connect(module_server) as sock:
        response = sock.call(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"),
                             ApiVersionsResponse[3])
    assert {(k.api_key, k.min_version, k.max_version) for k in response.api_keys} == \
        {(key, *spec.advertised_versions) for key, spec in APIS.items()}
    assert set(APIS) == set(module_server.context.implemented)


@pytest.mark.parametrize("name", ["../escape", "..", ".", "a/b", "x" * 250, "sp ace", "nul\x00"])
def test_no_topic_name_reaches_outside_the_data_directory(module_server, name):
    before = set(module_server.data_dir.parent.iterdir())
    with connect(module_server) as sock:
        metadata = sock.call(MetadataRequest[4](topics=[MetadataRequest[4].MetadataRequestTopic(name=name)],
                                                      allow_auto_topic_creation=True), MetadataResponse[4])
        assert metadata.topics[0].error_code == INVALID_TOPIC
        batch = build_batch([Record(0, 1000, None, b"x")])
        topic = ProduceRequest[7].TopicProduceData
        produce = ProduceRequest[7](transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
            topic(name=name, partition_data=[topic.PartitionProduceData(index=0, records=batch)])])
        response = sock.call(produce, ProduceResponse[7])
        assert response.responses[0].partition_responses[0].error_code != 0
    assert set(module_server.data_dir.parent.iterdir()) == before
    assert name not in module_server.context.topics


def test_pipelined_requests_are_answered_in_order(module_server):
    with connect(module_server) as sock:
        frames = []
        for correlation_id in range(20):
            request = ApiVersionsRequest[1]()
            request.with_header(correlation_id=correlation_id, client_id="pipe")
            frames.append(request.encode(header=True, framed=True))
        sock.sock.sendall(b"".join(frames))
        seen = []
        for _ in range(20):
            seen.append(sock.receive(ApiVersionsResponse[1]).header.correlation_id)
    assert seen == list(range(20))


def test_the_in_flight_budget_holds_requests_that_do_not_fit():
    async def scenario() -> list[str]:
        budget = InFlightBudget(100)
        events = []

        async def hold(name: str, size: int, seconds: float) -> None:
            async with budget.reserve(size):
                events.append(f"{name} in ({budget.used})")
                await asyncio.sleep(seconds)
            events.append(f"{name} out")

        await asyncio.gather(hold("a", 80, 0.05), hold("b", 80, 0.0), hold("c", 500, 0.0))
        return events

    events = asyncio.run(scenario())
    assert events[:2] == ["a in (80)", "a out"]  # b waited for a's bytes
    assert "c in (500)" in events  # a request larger than the budget runs alone
    assert max(int(e.split("(")[1][:-1]) for e in events if "in" in e) <= 500


def test_a_topic_of_the_longest_legal_name_can_be_deleted(module_server):
    name = "x" * 249  # `<name>-0.<uuid>-delete` would pass the 255-byte file name limit
    server_topics = module_server.context.topics
    with connect(module_server) as sock:
        metadata = sock.call(MetadataRequest[4](topics=[MetadataRequest[4].MetadataRequestTopic(name=name)],
                                                      allow_auto_topic_creation=True), MetadataResponse[4])
        assert metadata.topics[0].error_code == 0
        deleted = sock.call(DeleteTopicsRequest[4](topic_names=[name], timeout_ms=1000), DeleteTopicsResponse[4])
    assert deleted.responses[0].error_code == 0
    assert name not in server_topics
    assert still_serving(module_server)


def test_partitions_past_the_descriptor_budget_are_served_from_the_pool(tmp_path, monkeypatch):
    """Partitions hold no descriptor while unused: a node whose segments may hold 8 descriptors
    serves 12 partitions; with every descriptor pinned, a produce answers KAFKA_STORAGE_ERROR."""
    pool = process_pool()
    capacity, others = pool.capacity, pool.in_use  # the module's broker holds some
    monkeypatch.setattr(topics, "segment_descriptor_budget", lambda: others + 8)
    creatable = CreateTopicsRequest[5].CreatableTopic
    produce = ProduceRequest[7].TopicProduceData
    try:
        with KafkaServer(tmp_path / "data", port=0) as srv, connect(srv) as sock:
            created = sock.call(CreateTopicsRequest[5](topics=[creatable(
                name="many", num_partitions=12, replication_factor=1, assignments=[], configs=[])],
                timeout_ms=1000, validate_only=False), CreateTopicsResponse[5])
            assert created.topics[0].error_code == 0

            def send(partitions: range) -> list[int]:
                response = sock.call(ProduceRequest[7](transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
                    produce(name="many", partition_data=[produce.PartitionProduceData(
                        index=p, records=build_batch([Record(0, 0, None, b"%d" % p)])) for p in partitions])]),
                    ProduceResponse[7])
                return [r.error_code for r in response.responses[0].partition_responses]

            assert send(range(12)) == [0] * 12
            assert pool.capacity == others + 8 and pool.in_use <= others + 8
            logs = [srv.context.topics.log("many", p) for p in range(12)]
            assert [[r.value for r in log.records()] for log in logs] == [[b"%d" % p] for p in range(12)]
            logs[0].segments[-1].release_descriptors()  # partition 0 holds none; the others' get pinned
            holding = [s.descriptors for log in logs[1:] for s in log.segments if s.descriptors.held]
            with contextlib.ExitStack() as pins:
                for account in holding:
                    pins.enter_context(pool.pinned(account))
                pool.resize(1)  # everything else gives its descriptors back
                pool.resize(pool.in_use)
                assert send(range(1)) == [KAFKA_STORAGE_ERROR]
            pool.resize(others + 8)
            assert send(range(12)) == [0] * 12
            assert still_serving(srv)
    finally:
        pool.resize(capacity)


def test_a_long_poll_holds_no_in_flight_budget(tmp_path):
    topic = FetchRequest[11].FetchTopic
    waiting = FetchRequest[11](replica_id=-1, max_wait_ms=60_000, min_bytes=2**31 - 1, max_bytes=1 << 20,
                               isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=[],
                               rack_id="", topics=[topic(topic="t", partitions=[topic.FetchPartition(
                                   partition=0, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                                   partition_max_bytes=1 << 20)])] * 60)
    waiting.with_header(correlation_id=1, client_id="long-poll")
    frame = waiting.encode(header=True, framed=True)
    assert len(frame) > 1024  # the whole budget: nothing else would fit while it is held
    with KafkaServer(tmp_path / "data", port=0, config={"queued.max.request.bytes": 1024}) as srv:
        srv.context.topics.create("t", 1)
        with connect(srv) as parked:
            parked.sock.sendall(frame)
            assert still_serving(srv)


def commit_errors(server, group_id: str, partitions: list[tuple[str, int, str]]) -> list[int]:
    """A simple (memberless) OffsetCommit v8 of (topic, partition, metadata): each partition's error."""
    topic = OffsetCommitRequest[8].OffsetCommitRequestTopic
    request = OffsetCommitRequest[8](group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
                                     group_instance_id=None, topics=[topic(name=name, partitions=[
                                         topic.OffsetCommitRequestPartition(
                                             partition_index=p, committed_offset=1, committed_leader_epoch=-1,
                                             committed_metadata=metadata)]) for name, p, metadata in partitions])
    with connect(server) as sock:
        response = sock.call(request, OffsetCommitResponse[8])
    return [p.error_code for t in response.topics for p in t.partitions]


def test_offsets_of_partitions_the_node_lacks_or_with_oversized_metadata_are_refused_one_by_one(module_server):
    with connect(module_server) as sock:
        sock.call(MetadataRequest[4](topics=[MetadataRequest[4].MetadataRequestTopic(name="commits")],
                                           allow_auto_topic_creation=True), MetadataResponse[4])
    assert commit_errors(module_server, "committer", [("commits", 0, "ok"), ("commits", 1, ""), ("nowhere", 0, ""),
                                               ("w" * 40_000, 0, "")]) == \
        [0, UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_OR_PARTITION]
    assert commit_errors(module_server, "committer", [("commits", 0, "m" * 4097)]) == [OFFSET_METADATA_TOO_LARGE]


def test_a_group_id_longer_than_its_record_key_holds_is_an_invalid_group_id(module_server):
    with connect(module_server) as sock:
        sock.call(MetadataRequest[4](topics=[MetadataRequest[4].MetadataRequestTopic(name="commits")],
                                           allow_auto_topic_creation=True), MetadataResponse[4])
    assert commit_errors(module_server, "é" * 20_000, [("commits", 0, "")]) == [INVALID_GROUP_ID]  # 40,000 bytes
    topic = TxnOffsetCommitRequest[3].TxnOffsetCommitRequestTopic
    for group_id in ("", "é" * 20_000):
        request = TxnOffsetCommitRequest[3](
            transactional_id="tx", group_id=group_id, producer_id=0, producer_epoch=0, generation_id=-1,
            member_id="", group_instance_id=None, topics=[topic(name="commits", partitions=[
                topic.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                                      committed_leader_epoch=-1, committed_metadata="")])])
        with connect(module_server) as sock:
            response = sock.call(request, TxnOffsetCommitResponse[3])
        assert response.topics[0].partitions[0].error_code == INVALID_GROUP_ID
    assert still_serving(module_server)


def create_topics(sock: WireClient, *topics: tuple[str, dict]) -> list[int]:
    """CreateTopics v5 of (name, {config: value}), one partition each: each topic's error."""
    creatable = CreateTopicsRequest[5].CreatableTopic
    response = sock.call(CreateTopicsRequest[5](topics=[creatable(
        name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[
            creatable.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])
        for name, configs in topics], timeout_ms=1000, validate_only=False), CreateTopicsResponse[5])
    return [t.error_code for t in response.topics]


def test_invalid_acks_are_invalid_required_acks_and_append_nothing(module_server):
    batch = build_batch([Record(0, 1000, None, b"x")])
    topic = ProduceRequest[7].TopicProduceData
    with connect(module_server) as sock:
        assert create_topics(sock, ("acks", {})) == [0]
        produce = ProduceRequest[7](transactional_id=None, acks=2, timeout_ms=1000, topic_data=[
            topic(name=name, partition_data=[topic.PartitionProduceData(index=0, records=batch)])
            for name in ("acks", "no-such-topic")])
        response = sock.call(produce, ProduceResponse[7])
    assert [t.partition_responses[0].error_code for t in response.responses] == \
        [INVALID_REQUIRED_ACKS, UNKNOWN_TOPIC_OR_PARTITION]
    assert module_server.manager.get("acks", 0).log_end_offset == 0


def test_create_topics_refuses_duplicates_and_null_configs_as_kafka_does(module_server):
    with connect(module_server) as sock:
        assert create_topics(sock, ("twin", {}), ("twin", {}), ("single", {})) == [INVALID_REQUEST, INVALID_REQUEST, 0]
        assert create_topics(sock, ("null-config", {"retention.ms": None})) == [INVALID_CONFIG]
        assert create_topics(sock, ("bad-config", {"no.such.config": "1"})) == [INVALID_CONFIG]
    assert "twin" not in module_server.context.topics and "null-config" not in module_server.context.topics


def test_delete_topics_refuses_duplicates_and_deletes_none_of_them(module_server):
    with connect(module_server) as sock:
        assert create_topics(sock, ("kept-twice", {})) == [0]
        deleted = sock.call(DeleteTopicsRequest[4](topic_names=["kept-twice", "kept-twice"], timeout_ms=1000),
                            DeleteTopicsResponse[4])
    assert [r.error_code for r in deleted.responses] == [INVALID_REQUEST, INVALID_REQUEST]
    assert "kept-twice" in module_server.context.topics


@pytest.mark.parametrize(("resources", "errors"), [
    ([("altered", [("retention.ms", 0, "5")]), ("altered", [("retention.ms", 0, "6")])],
     [INVALID_REQUEST, INVALID_REQUEST]),
    ([("altered", [("retention.ms", 0, "5"), ("retention.ms", 1, None)])], [INVALID_REQUEST]),
    ([("altered", [("retention.ms", 9, "5")])], [INVALID_REQUEST]),
    ([("altered", [("no.such.config", 0, "5")])], [INVALID_CONFIG]),
    ([("altered", [("retention.ms", 0, "soon")])], [INVALID_CONFIG]),
])
def test_incremental_alter_configs_refuses_as_kafka_does(module_server, resources, errors):
    resource = IncrementalAlterConfigsRequest[1].AlterConfigsResource
    with connect(module_server) as sock:
        create_topics(sock, ("altered", {}))
        response = sock.call(IncrementalAlterConfigsRequest[1](resources=[resource(
            resource_type=2, resource_name=name, configs=[resource.AlterableConfig(
                name=key, config_operation=op, value=value) for key, op, value in ops])
            for name, ops in resources], validate_only=False), IncrementalAlterConfigsResponse[1])
    assert [r.error_code for r in response.responses] == errors
    assert "retention.ms" not in module_server.context.topics.overrides("altered")


@pytest.mark.parametrize("request_", [
    OffsetCommitRequest[8](group_id=None, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                           topics=[]),
    DeleteTopicsRequest[4](topic_names=None, timeout_ms=1000),
    DeleteTopicsRequest[4](topic_names=["a", None], timeout_ms=1000),
], ids=["null-string", "null-array", "null-array-entry"])
def test_a_null_where_the_schema_forbids_it_does_not_decode(module_server, request_, caplog):
    request_.with_header(correlation_id=7, client_id="bad-input")
    with caplog.at_level(logging.INFO, logger="logstore.server"), connect(module_server) as sock:
        sock.sock.sendall(request_.encode(header=True, framed=True))
        assert sock.closed_by_broker()  # as Kafka's generated readers refuse to parse it
    assert still_serving(module_server)
    assert [r.levelname for r in caplog.records if r.name == "logstore.server"] == ["WARNING"]  # the close, named; no handler crashed


def test_creating_thousands_of_partitions_leaves_other_clients_served(module_server, monkeypatch):
    creatable = CreateTopicsRequest[5].CreatableTopic
    request = CreateTopicsRequest[5](topics=[creatable(name="wide", num_partitions=1500, replication_factor=1,
                                                       assignments=[], configs=[])], timeout_ms=1000,
                                     validate_only=False)
    request.with_header(correlation_id=7, client_id="bad-input")
    seen_while_creating = []  # partitions open when another client's request was answered
    with connect(module_server) as creating, connect(module_server) as other:
        creating.sock.settimeout(60)
        creating.sock.sendall(request.encode(header=True, framed=True))
        topics = module_server.context.topics
        while "wide" not in topics or topics.partition_count("wide") < 1500:
            assert other.call(ApiVersionsRequest[0](), ApiVersionsResponse[0]).error_code == 0
            seen_while_creating.append(topics.partition_count("wide") if "wide" in topics else 0)
        created = creating.receive(CreateTopicsResponse[5])
    assert created.topics[0].error_code == 0
    # opening 1500 partitions takes seconds: the other client was answered in between, not after
    assert any(count < 1500 for count in seen_while_creating)
    manager = module_server.manager
    writes = []
    write_checkpoints = manager._write_checkpoints
    monkeypatch.setattr(manager, "_write_checkpoints", lambda: writes.append(1) or write_checkpoints())
    with connect(module_server) as sock:
        deleted = sock.call(DeleteTopicsRequest[4](topic_names=["wide"], timeout_ms=1000), DeleteTopicsResponse[4])
    assert deleted.responses[0].error_code == 0
    assert len(writes) == 1  # one checkpoint write for all 1500, not one each

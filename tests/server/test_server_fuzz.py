"""Well-formed requests with hostile field values, for every API and version the server
implements (request_strategies walks kafka-python's schema of each): each is answered with a
response of its version, or its connection closed, and never crashes a handler (an ERROR
record on the `logstore.server` logger), kills the server or loses what it stored.

Reproducible by default (derandomized); `--hypothesis-seed N` explores other examples."""

from __future__ import annotations

import logging
import struct
import time

import pytest
from hypothesis import HealthCheck, given, settings
from kafka.protocol.admin import (
    CreateTopicsRequest,
    CreateTopicsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kafka.protocol.consumer import OffsetCommitRequest, OffsetCommitResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.producer import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)

from logstore.records import Record, build_batch
from logstore.server.admin_api import OP_DELETE, TOPIC_KEYS, TOPIC_RESOURCE
from logstore.server.apis import APIS
from logstore.server.error_codes import TOPIC_ALREADY_EXISTS, UNKNOWN_TOPIC_OR_PARTITION
from tests.server.request_strategies import Plausible, requests
from tests.support.wire import WireClient, recv_exactly

TOPIC, KEPT_TOPIC, GROUP, TXN = "fuzz-topic", "fuzz-kept", "fuzz-group", "fuzz-txn"
SEEDED_RECORDS = 10
SESSION_MAX_MS = 3000  # members a fuzzed JoinGroup leaves behind expire within this
REQUEST_TIMEOUT_S = 10.0  # a client's request.timeout.ms: any request must be answered by then
PARK_S = 0.3  # how long to wait for a request the broker may hold (a long poll, a rebalance)
DEFAULT_EXAMPLES, SLOW_EXAMPLES = 600, 5000
PRODUCE, FETCH, JOIN_GROUP, SYNC_GROUP, CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 0, 1, 11, 14, 19, 20, 37
# Partitions are opened (files created and fsynced) before CreateTopics/CreatePartitions answer,
# where Kafka answers once the metadata is committed: a fuzzed count of thousands takes seconds.
PARTITION_OPEN_S = 0.01


class ErrorRecords(logging.Handler):
    """Keeps every ERROR or worse record: log.exception marks a handler that crashed."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def report(self) -> str:
        formatter = logging.Formatter()
        return "\n".join(formatter.format(r) for r in self.records)


def seed_topic(sock: WireClient, name: str, partitions: int) -> None:
    """Create `name` (if a fuzzed DeleteTopics took it, again) with SEEDED_RECORDS records in each partition."""
    creatable = CreateTopicsRequest[5].CreatableTopic
    created = sock.call(CreateTopicsRequest[5](topics=[creatable(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=5000, validate_only=False), CreateTopicsResponse[5])
    if created.topics[0].error_code == TOPIC_ALREADY_EXISTS:
        return
    assert created.topics[0].error_code == 0
    records = [Record(i, 1_700_000_000_000 + i, b"k%d" % i, b"seed-%d" % i) for i in range(SEEDED_RECORDS)]
    data = ProduceRequest[7].TopicProduceData
    produced = sock.call(ProduceRequest[7](transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        data(name=name, partition_data=[data.PartitionProduceData(index=p, records=build_batch(records))
                                        for p in range(partitions)])]), ProduceResponse[7])
    assert {p.error_code for t in produced.responses for p in t.partition_responses} == {0}


def seed(port: int) -> int:
    """Two topics with records, a group with committed offsets and an open transaction;
    returns the transaction's producer id."""
    with WireClient(port, timeout=REQUEST_TIMEOUT_S, client_id="fuzz-seed") as sock:
        seed_topic(sock, TOPIC, 2)
        seed_topic(sock, KEPT_TOPIC, 1)
        records = [Record(i, 1_700_000_000_000 + i, b"k%d" % i, b"seed-%d" % i) for i in range(2)]
        data = ProduceRequest[7].TopicProduceData
        part = data.PartitionProduceData
        commit = OffsetCommitRequest[7].OffsetCommitRequestTopic
        committed = sock.call(OffsetCommitRequest[7](
            group_id=GROUP, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
            topics=[commit(name=TOPIC, partitions=[commit.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=3, committed_leader_epoch=-1, committed_metadata="")])]),
            OffsetCommitResponse[7])
        assert committed.topics[0].partitions[0].error_code == 0
        init = sock.call(InitProducerIdRequest[3](transactional_id=TXN, transaction_timeout_ms=60_000,
                                                   producer_id=-1, producer_epoch=-1), InitProducerIdResponse[3])
        assert init.error_code == 0
        add = AddPartitionsToTxnRequest[3].AddPartitionsToTxnTopic
        added = sock.call(AddPartitionsToTxnRequest[3](
            v3_and_below_transactional_id=TXN, v3_and_below_producer_id=init.producer_id,
            v3_and_below_producer_epoch=init.producer_epoch,
            v3_and_below_topics=[add(name=TOPIC, partitions=[0])]), AddPartitionsToTxnResponse[3])
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
        batch = build_batch(records, producer_id=init.producer_id, producer_epoch=init.producer_epoch,
                            base_sequence=0, is_transactional=True)
        produced = sock.call(ProduceRequest[7](transactional_id=TXN, acks=-1, timeout_ms=5000, topic_data=[
            data(name=TOPIC, partition_data=[part(index=0, records=batch)])]), ProduceResponse[7])
        assert produced.responses[0].partition_responses[0].error_code == 0
        return init.producer_id


@pytest.fixture(scope="module")
def errors():
    """ERROR records of the server's logger and of asyncio's (a task that died, an accept that
    failed for want of file descriptors)."""
    handler = ErrorRecords()
    loggers = [logging.getLogger("logstore.server"), logging.getLogger("asyncio")]
    for logger in loggers:
        logger.addHandler(handler)
    yield handler
    for logger in loggers:
        logger.removeHandler(handler)


pytestmark = pytest.mark.kafka_broker_config({
    "group.min.session.timeout.ms": 1, "group.max.session.timeout.ms": SESSION_MAX_MS,
    "offsets.topic.num.partitions": 3, "transaction.state.log.num.partitions": 3,
    "socket.request.max.bytes": 8 * 1024 * 1024})


@pytest.fixture(scope="module")
def seeded_server(errors, module_server):
    """The module's broker (started after `errors` listens) with two topics, a group and an open
    transaction, and the values the fuzz draws from in `plausible`."""
    producer_id = seed(module_server.port)
    module_server.plausible = Plausible({"topic": [TOPIC], "group": [GROUP], "txn": [TXN], "member": [""],
                                         "protocol": ["consumer"], "producer": [producer_id], "epoch": [0],
                                         "partition": [0, 1], "offset": [0, 3, SEEDED_RECORDS],
                                         "timeout": [SESSION_MAX_MS, 60_000]})
    return module_server


def answer_deadline_s(key: int, body) -> float:
    """How long a client would wait for this answer: request.timeout.ms, and for a request that
    creates partitions, time to open each of them."""
    if key == CREATE_TOPICS:
        partitions = sum(max(t.num_partitions, len(t.assignments or ()), 1) for t in body.topics or ())
    elif key == CREATE_PARTITIONS:
        partitions = sum(max(t.count, 0) for t in body.topics or ())
    else:
        partitions = 0
    return REQUEST_TIMEOUT_S + PARTITION_OPEN_S * partitions


def may_park(key: int, body) -> bool:
    """Whether Kafka may hold this request: a fetch that waits for data it asks for, or a
    JoinGroup/SyncGroup that waits for the rest of the group's rebalance."""
    if key == FETCH:
        wants = any(t.partitions for t in body.topics or ()) or body.session_epoch > 0
        return body.max_wait_ms > 0 and body.min_bytes > 0 and wants
    return key in (JOIN_GROUP, SYNC_GROUP)


def answers_api_versions(sock: WireClient) -> bool:
    try:
        response = sock.call(ApiVersionsRequest[0](), ApiVersionsResponse[0], correlation_id=99)
    except (ConnectionError, struct.error, TypeError):
        return False
    return response.error_code == 0 and response.header.correlation_id == 99


def send_fuzzed(port: int, key: int, version: int, body, plausible: Plausible) -> str:
    """Send one request; 'answered', 'closed' or 'parked' (given up on, as a client would)."""
    with WireClient(port, timeout=REQUEST_TIMEOUT_S, client_id="fuzz") as client:
        try:
            client.send(body, 0x5EED)
        except (BrokenPipeError, ConnectionResetError):
            return "closed"
        if key == PRODUCE and body.acks == 0:  # no answer is due; the connection goes on serving
            return "answered" if answers_api_versions(client) else "closed"
        parks = may_park(key, body)
        deadline = answer_deadline_s(key, body)
        client.sock.settimeout(PARK_S if parks else deadline)
        try:
            head = recv_exactly(client.sock, 4)
        except TimeoutError:
            assert parks, f"api {key} v{version} unanswered after {deadline}s: {body!r:.2000}"
            return "parked"
        client.sock.settimeout(REQUEST_TIMEOUT_S)
        payload = None if head is None else recv_exactly(client.sock, struct.unpack(">i", head)[0])
        if payload is None:
            return "closed"
    response = APIS[key].response.decode(payload, version=version, header=True)
    assert response.header.correlation_id == 0x5EED
    plausible.learn_from(response)
    return "answered"


def still_serving(port: int) -> bool:
    with WireClient(port, timeout=REQUEST_TIMEOUT_S, client_id="fuzz-seed") as sock:
        return answers_api_versions(sock)


def fuzz(server, errors: ErrorRecords, examples: int, seed_option: str | None) -> dict[str, int]:
    """Run `examples` fuzzed requests; how many were answered, closed and parked."""
    outcomes = {"answered": 0, "closed": 0, "parked": 0}

    @settings(max_examples=examples, deadline=None, derandomize=seed_option is None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(request=requests(server.plausible))
    def one_request(request) -> None:
        key, version, body = request
        outcomes[send_fuzzed(server.port, key, version, body, server.plausible)] += 1
        if key == DELETE_TOPICS:  # keep the seeded topic for the requests to come
            with WireClient(server.port, timeout=REQUEST_TIMEOUT_S, client_id="fuzz-seed") as sock:
                seed_topic(sock, TOPIC, 2)
        assert still_serving(server.port)
        assert not errors.records, f"api {key} v{version} {body!r:.2000}\n{errors.report()}"

    one_request()
    return outcomes


def test_fuzzed_requests_get_answers_never_crashes(seeded_server, errors, pytestconfig):
    outcomes = fuzz(seeded_server, errors, DEFAULT_EXAMPLES, pytestconfig.getoption("hypothesis_seed"))
    assert outcomes["answered"] > outcomes["closed"] + outcomes["parked"]


@pytest.mark.slow
def test_many_fuzzed_requests_get_answers_never_crashes(seeded_server, errors, pytestconfig):
    fuzz(seeded_server, errors, SLOW_EXAMPLES, pytestconfig.getoption("hypothesis_seed"))


def reset_topic_configs(port: int, topic: str) -> None:
    """Delete every config override of `topic`: what the fuzz set as an administrator (a
    max.message.bytes of 0, say) may legitimately keep records out."""
    resource = IncrementalAlterConfigsRequest[1].AlterConfigsResource
    deletes = [resource.AlterableConfig(name=key.name, config_operation=OP_DELETE, value=None) for key in TOPIC_KEYS]
    with WireClient(port, timeout=REQUEST_TIMEOUT_S, client_id="fuzz-seed") as sock:
        response = sock.call(IncrementalAlterConfigsRequest[1](resources=[resource(
            resource_type=TOPIC_RESOURCE, resource_name=topic, configs=deletes)], validate_only=False),
            IncrementalAlterConfigsResponse[1])
    assert response.responses[0].error_code in (0, UNKNOWN_TOPIC_OR_PARTITION)  # the fuzz may have deleted it


def test_after_the_fuzz_clients_still_produce_and_consume(seeded_server, errors):
    from kafka import KafkaConsumer, KafkaProducer

    kept = seeded_server.manager.get(KEPT_TOPIC, 0)
    stored = [r.value for batch in kept.read(0, 1 << 20).batches() for r in batch.records()]
    assert stored == [b"seed-%d" % i for i in range(SEEDED_RECORDS)]
    reset_topic_configs(seeded_server.port, TOPIC)
    producer = KafkaProducer(bootstrap_servers=seeded_server.bootstrap_servers, acks="all")
    producer.send(TOPIC, value=b"after-the-fuzz", partition=0).get(timeout=20)
    producer.close()
    # A group the fuzz never named: its ConsumerGroupHeartbeats may have made GROUP a consumer-protocol
    # group with live members, which a classic member cannot join (no online migration, README).
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=seeded_server.bootstrap_servers, group_id=f"{GROUP}-after",
                             auto_offset_reset="earliest", session_timeout_ms=SESSION_MAX_MS,
                             heartbeat_interval_ms=500, consumer_timeout_ms=20_000)
    try:
        deadline = time.monotonic() + 30
        seen = False
        while not seen and time.monotonic() < deadline:
            seen = any(r.value == b"after-the-fuzz" for rs in consumer.poll(timeout_ms=500).values() for r in rs)
    finally:
        consumer.close()
    assert seen
    # the coordinators' background tasks (member and offset expiry, transaction timeouts) still run
    assert not seeded_server._groups._timers.done() and not seeded_server._txns._timeouts.done()
    assert not errors.records, errors.report()

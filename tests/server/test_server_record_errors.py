"""KIP-467 per-record errors: a batch refused for some of its records names them, so a client
fails the invalid records with the broker's reason and the others as their batch-mates (null
keys on a compacted topic; timestamps outside message.timestamp.before/after.max.ms, which are
INVALID_TIMESTAMP as in Kafka)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from logstore.records import Record, build_batch
from tests.support.wire import WireClient

DAY_MS = 86_400_000


@pytest.fixture(scope="module", autouse=True)
def seeded(module_server) -> None:
    admin = AdminClient({"bootstrap.servers": module_server.bootstrap_servers})
    topics = [NewTopic("compacted", 1, 1, config={"cleanup.policy": "compact"}),
              NewTopic("recent", 1, 1, config={"message.timestamp.before.max.ms": "60000"})]
    for future in admin.create_topics(topics).values():
        future.result(10)


def test_null_keys_on_a_compacted_topic_are_named_record_by_record(module_server):
    producer = Producer({"bootstrap.servers": module_server.bootstrap_servers, "linger.ms": 200, "retries": 0})
    reports = []
    for key in [b"a", None, b"c", None]:
        producer.produce("compacted", value=b"v", key=key,
                         on_delivery=lambda err, msg: reports.append((msg.key(), err.code())))
    assert producer.flush(20) == 0
    assert reports == [(b"a", KafkaError._INVALID_DIFFERENT_RECORD), (None, KafkaError.INVALID_RECORD),
                       (b"c", KafkaError._INVALID_DIFFERENT_RECORD), (None, KafkaError.INVALID_RECORD)]
    assert module_server.manager.get("compacted", 0).log_end_offset == 0


def test_records_timestamped_too_long_ago_are_invalid_timestamp(module_server):
    producer = Producer({"bootstrap.servers": module_server.bootstrap_servers, "linger.ms": 200, "retries": 0})
    now_ms = int(time.time() * 1000)
    codes = []
    for timestamp in [now_ms, now_ms - DAY_MS, now_ms]:
        producer.produce("recent", value=b"v", timestamp=timestamp, on_delivery=lambda err, msg: codes.append(err.code()))
    assert producer.flush(20) == 0
    assert codes == [KafkaError.INVALID_TIMESTAMP] * 3  # librdkafka names records only for INVALID_RECORD
    assert module_server.manager.get("recent", 0).log_end_offset == 0


def test_the_produce_response_names_each_late_record_by_its_batch_index(module_server):
    now_ms = int(time.time() * 1000)
    batch = build_batch([Record(i, t, None, b"v") for i, t in enumerate([now_ms, now_ms - DAY_MS, now_ms,
                                                                         now_ms - DAY_MS])])
    topic = ProduceRequest[8].TopicProduceData
    request = ProduceRequest[8](transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
        topic(name="recent", partition_data=[topic.PartitionProduceData(index=0, records=batch)])])
    with WireClient(module_server.port, client_id="kip-467") as client:
        response = client.call(request, ProduceResponse[8])
    [partition] = response.responses[0].partition_responses
    assert partition.error_code == KafkaError.INVALID_TIMESTAMP
    assert [e.batch_index for e in partition.record_errors] == [1, 3]
    assert all("out of range" in e.batch_index_error_message for e in partition.record_errors)
    assert "message.timestamp.before.max.ms=60000" in partition.error_message

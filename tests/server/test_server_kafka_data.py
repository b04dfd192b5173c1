"""`logstore serve` over a log directory Apache Kafka wrote: real clients read Kafka's records
as Kafka's producer handed them over, appends continue Kafka's offsets, and nothing is deleted
although the records are years past the default retention, until the topic is given configs.
A KRaft broker's metadata log in the same directory is neither served nor touched."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kafka.record import MemoryRecords

from compaction import LogCleaner
from logstore.cli import main as logstore_main
from logstore.server import KafkaServer
from retention import apply_retention
from tests.support.files import directory_digest
from tests.support.kafka_dirs import SAMPLES, broker_dir, kafka_sample

Message = tuple[bytes | None, bytes | None, tuple, int]
APPENDED = 5


def kafka_inputs() -> list[Message]:
    """Every record Kafka was asked to append (key, value, headers, timestamp), in offset
    order, decoded by kafka-python from the batches handed to Kafka's leader append."""
    data = (SAMPLES / "inputs" / "plain-0.records").read_bytes()
    messages: list[Message] = []
    for call in json.loads((SAMPLES / "inputs" / "plain-0.json").read_text()):
        batch = MemoryRecords(data[call["position"]:call["position"] + call["size"]]).next_batch()
        messages += [(r.key, r.value, tuple((k, v) for k, v in r.headers), r.timestamp) for r in batch]
    return messages


def consume(bootstrap: str, count: int) -> list[Message]:
    """The first `count` records of plain-0 as librdkafka fetches them from offset 0."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "sample-reader",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("plain", 0, 0)])
    messages: list[Message] = []
    deadline = time.monotonic() + 30
    while len(messages) < count and time.monotonic() < deadline:
        for m in consumer.consume(500, 0.5):
            assert m.error() is None, m.error()
            assert m.offset() == len(messages)
            messages.append((m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1]))
    consumer.close()
    return messages


def test_clients_read_kafkas_records_and_append_after_them_and_nothing_is_deleted(tmp_path):
    partition = kafka_sample(tmp_path / "logdir")
    expected = kafka_inputs()
    assert len(expected) == 720
    before = directory_digest(partition, "*.log")
    # Retention and the cleaner pass every 50 ms from the start.
    config = {"log.initial.task.delay.ms": 0, "log.retention.check.interval.ms": 50, "log.cleaner.backoff.ms": 50}
    with KafkaServer(partition.parent, port=0, config=config, cleaner=LogCleaner,
                     retention=apply_retention) as server:
        assert consume(server.bootstrap_servers, 720) == expected
        producer = Producer({"bootstrap.servers": server.bootstrap_servers, "acks": "all"})
        offsets: list[int] = []
        for i in range(APPENDED):
            producer.produce("plain", value=b"after %d" % i, partition=0,
                             on_delivery=lambda err, m: offsets.append(m.offset()))
        assert producer.flush(20) == 0
        time.sleep(0.5)  # several retention and cleaner passes
        after = consume(server.bootstrap_servers, 720 + APPENDED)
        kept = directory_digest(partition, "*.log")
        # Once the topic has configs, the same passes act: Kafka's old segments expire.
        admin = AdminClient({"bootstrap.servers": server.bootstrap_servers})
        retention = ConfigResource("topic", "plain", incremental_configs=[
            ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([retention])[retention].result(10)
        deadline = time.monotonic() + 10
        while set(directory_digest(partition, "*.log")) & set(before) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not set(directory_digest(partition, "*.log")) & set(before)
    assert offsets == list(range(720, 720 + APPENDED))
    assert after[:720] == expected
    assert [m[1] for m in after[720:]] == [b"after %d" % i for i in range(APPENDED)]
    assert set(before) <= set(kept)  # nothing deleted while the configs were unknown
    active = max(before)
    assert {name: kept[name] for name in before if name != active} == \
        {name: digest for name, digest in before.items() if name != active}
    assert logstore_main(["verify", str(partition)]) == 0


def test_a_kraft_brokers_metadata_log_is_not_a_topic_and_is_left_as_it_was(tmp_path):
    root = broker_dir(tmp_path / "broker")
    metadata = root / "__cluster_metadata-0"
    before = directory_digest(metadata, "*")
    with KafkaServer(root, port=0) as server:
        admin = AdminClient({"bootstrap.servers": server.bootstrap_servers})
        topics = admin.list_topics(timeout=10).topics
        assert "orders" in topics and "__cluster_metadata" not in topics
        created = admin.create_topics([NewTopic("__cluster_metadata", 1)])["__cluster_metadata"]
        with pytest.raises(KafkaException) as refused:
            created.result(10)
        assert refused.value.args[0].code() == KafkaError.INVALID_REQUEST
        producer = Producer({"bootstrap.servers": server.bootstrap_servers, "message.timeout.ms": 2000})
        failures: list[KafkaError] = []
        producer.produce("__cluster_metadata", b"not metadata", partition=0,
                         on_delivery=lambda err, _m: failures.append(err))
        producer.flush(10)
        assert failures and failures[0] is not None
    assert directory_digest(metadata, "*") == before
    assert logstore_main(["verify", str(root)]) == 0

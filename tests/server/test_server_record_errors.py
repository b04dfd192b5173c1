"""KIP-467 per-record errors: a batch refused for some of its records names them, so a client
fails the invalid records with the broker's reason and the others as their batch-mates."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic


@pytest.fixture(scope="module", autouse=True)
def seeded(module_server) -> None:
    admin = AdminClient({"bootstrap.servers": module_server.bootstrap_servers})
    for future in admin.create_topics([NewTopic("compacted", 1, 1, config={"cleanup.policy": "compact"})]).values():
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

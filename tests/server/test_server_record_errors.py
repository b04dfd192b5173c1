"""KIP-467 per-record errors: a batch refused for some of its records names them, so a client
fails the invalid records with the broker's reason and the others as their batch-mates."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from logstore.server import KafkaServer


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with KafkaServer(tmp_path_factory.mktemp("record-errors"), port=0) as srv:
        admin = AdminClient({"bootstrap.servers": srv.bootstrap_servers})
        for future in admin.create_topics([NewTopic("compacted", 1, 1, config={"cleanup.policy": "compact"})]).values():
            future.result(10)
        yield srv


def test_null_keys_on_a_compacted_topic_are_named_record_by_record(server):
    producer = Producer({"bootstrap.servers": server.bootstrap_servers, "linger.ms": 200, "retries": 0})
    reports = []
    for key in [b"a", None, b"c", None]:
        producer.produce("compacted", value=b"v", key=key,
                         on_delivery=lambda err, msg: reports.append((msg.key(), err.code())))
    assert producer.flush(20) == 0
    assert reports == [(b"a", KafkaError._INVALID_DIFFERENT_RECORD), (None, KafkaError.INVALID_RECORD),
                       (b"c", KafkaError._INVALID_DIFFERENT_RECORD), (None, KafkaError.INVALID_RECORD)]
    assert server.manager.get("compacted", 0).log_end_offset == 0

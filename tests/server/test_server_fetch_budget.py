"""KIP-74's response budget as a real consumer meets it: librdkafka drops a response larger
than `receive.message.max.bytes`, so the first partition read must respect `fetch.max.bytes`."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition

VALUE = b"v" * 10_000
COUNT = 100  # about 1 MB in one partition, ten times the consumer's response budget


def test_first_partition_is_read_only_up_to_the_response_max_bytes(module_server):
    producer = Producer({"bootstrap.servers": module_server.bootstrap_servers, "linger.ms": 0, "batch.size": 12_000})
    for _ in range(COUNT):
        producer.produce("budget", VALUE)
    assert producer.flush(20) == 0
    consumer = Consumer({"bootstrap.servers": module_server.bootstrap_servers, "group.id": "budget",
                         "fetch.max.bytes": 100_000, "message.max.bytes": 100_000,
                         "receive.message.max.bytes": 100_512,
                         "max.partition.fetch.bytes": 10_000_000})
    consumer.assign([TopicPartition("budget", 0, 0)])
    values = []
    deadline = time.monotonic() + 20
    try:
        while len(values) < COUNT and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                values.append(message.value())
    finally:
        consumer.close()
    assert values == [VALUE] * COUNT


def test_a_first_batch_larger_than_the_budget_is_still_returned_whole(module_server):
    producer = Producer({"bootstrap.servers": module_server.bootstrap_servers, "linger.ms": 0})
    big = b"b" * 200_000
    producer.produce("big-first", big)
    assert producer.flush(20) == 0
    consumer = Consumer({"bootstrap.servers": module_server.bootstrap_servers, "group.id": "budget",
                         "fetch.max.bytes": 100_000, "message.max.bytes": 100_000,
                         "receive.message.max.bytes": 1_000_000})
    consumer.assign([TopicPartition("big-first", 0, 0)])
    deadline = time.monotonic() + 20
    message = None
    try:
        while message is None and time.monotonic() < deadline:
            polled = consumer.poll(0.2)
            if polled is not None and not polled.error():
                message = polled
    finally:
        consumer.close()
    assert message is not None and message.value() == big

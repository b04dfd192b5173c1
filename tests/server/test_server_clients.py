"""Three real Kafka clients (librdkafka via confluent-kafka, kafka-python, aiokafka) produce
to and consume from `logstore.server.KafkaServer`."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

from logstore.server import KafkaServer  # noqa: E402

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


pytestmark = pytest.mark.kafka_broker_config({"offsets.topic.num.partitions": 4,
                                               "transaction.state.log.num.partitions": 4})


def consume_confluent(bootstrap: str, topic: str, count: int, *, partition: int = 0,
                      timeout_s: float = 20, **conf) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False,
                         **conf})
    consumer.assign([TopicPartition(topic, partition, 0)])
    messages = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(messages) < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                messages.append(message)
    finally:
        consumer.close()
    return messages


def poll_kafka_python(consumer, count: int, timeout_s: float = 20) -> list[bytes]:
    """Values polled by a kafka-python consumer until `count` arrived or the time is up."""
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(values) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            values += [r.value for r in records]
    return values


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_produces_and_consumes_every_codec(module_server, codec):
    topic = f"codec-{codec}"
    producer = Producer({"bootstrap.servers": module_server.bootstrap_servers, "compression.type": codec,
                         "linger.ms": 5})
    for i in range(200):
        producer.produce(topic, key=b"k%d" % i, value=b"value-%d-" % i + b"x" * 300, headers=[("h", b"%d" % i)])
    assert producer.flush(20) == 0
    messages = consume_confluent(module_server.bootstrap_servers, topic, 200)
    assert [m.value() for m in messages] == [b"value-%d-" % i + b"x" * 300 for i in range(200)]
    assert [m.key() for m in messages] == [b"k%d" % i for i in range(200)]
    assert [m.offset() for m in messages] == list(range(200))
    assert messages[7].headers() == [("h", b"7")]
    log = module_server.manager.get(topic, 0)
    stored = {batch.compression for batch in log.read(0, 10_000_000).batches()}
    assert stored == {codec}


PYTHON_CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


@pytest.mark.parametrize("codec", PYTHON_CODECS)
def test_kafka_python_produces_and_consumes(module_server, codec):
    from kafka import KafkaConsumer, KafkaProducer

    topic = f"kp-{codec}"
    producer = KafkaProducer(bootstrap_servers=module_server.bootstrap_servers, compression_type=codec)
    for i in range(50):
        producer.send(topic, key=b"%d" % i, value=b"kp-%d" % i)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=module_server.bootstrap_servers, auto_offset_reset="earliest",
                             group_id=f"kp-group-{codec}")
    # kafka-python's group leader assigns from the metadata it has when the join completes;
    # with group.initial.rebalance.delay.ms=0 that can precede the topic's metadata, so fetch it first
    assert consumer.partitions_for_topic(topic) == {0}
    consumer.subscribe([topic])
    values = poll_kafka_python(consumer, 50)
    consumer.commit()
    consumer.close()
    assert values == [b"kp-%d" % i for i in range(50)]
    log = module_server.manager.get(topic, 0)
    # kafka-python sends a batch uncompressed when compressing does not shrink it
    assert (codec or "none") in {batch.compression for batch in log.read(0, 10_000_000).batches()}


@pytest.mark.parametrize("codec", PYTHON_CODECS)
def test_aiokafka_produces_and_consumes(module_server, codec):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic = f"aio-{codec}"

    async def roundtrip() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=module_server.bootstrap_servers, compression_type=codec,
                                    enable_idempotence=True)
        await producer.start()
        try:
            for i in range(50):
                await producer.send(topic, b"aio-%d" % i)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=module_server.bootstrap_servers,
                                    auto_offset_reset="earliest", group_id=f"aio-group-{codec}")
        await consumer.start()
        values = []
        try:
            async for message in consumer:
                values.append(message.value)
                if len(values) == 50:
                    break
            await consumer.commit()
        finally:
            await consumer.stop()
        return values

    assert asyncio.run(asyncio.wait_for(roundtrip(), 30)) == [b"aio-%d" % i for i in range(50)]
    log = module_server.manager.get(topic, 0)
    assert {batch.compression for batch in log.read(0, 10_000_000).batches()} == {codec or "none"}


def test_one_client_reads_what_another_wrote(module_server):
    from kafka import KafkaConsumer

    producer = Producer({"bootstrap.servers": module_server.bootstrap_servers, "compression.type": "gzip"})
    for i in range(20):
        producer.produce("cross", value=b"c%d" % i)
    producer.flush(10)
    consumer = KafkaConsumer("cross", bootstrap_servers=module_server.bootstrap_servers, auto_offset_reset="earliest")
    assert poll_kafka_python(consumer, 20) == [b"c%d" % i for i in range(20)]
    consumer.close()


def test_metadata_lists_topics_and_the_node(module_server):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": module_server.bootstrap_servers})
    producer = Producer({"bootstrap.servers": module_server.bootstrap_servers})
    producer.produce("listed", value=b"x")
    producer.flush(10)
    metadata = admin.list_topics(timeout=10)
    assert "listed" in metadata.topics
    assert list(metadata.brokers) == [module_server.context.node_id]
    assert metadata.cluster_id == module_server.context.meta.cluster_id


def test_list_offsets_and_fetch_from_the_middle(module_server):
    producer = Producer({"bootstrap.servers": module_server.bootstrap_servers})
    for i in range(10):
        producer.produce("middle", value=b"%d" % i, timestamp=1_000_000 + i * 1000)
    producer.flush(10)
    consumer = Consumer({"bootstrap.servers": module_server.bootstrap_servers, "group.id": "offsets"})
    low, high = consumer.get_watermark_offsets(TopicPartition("middle", 0), timeout=10)
    assert (low, high) == (0, 10)
    found = consumer.offsets_for_times([TopicPartition("middle", 0, 1_004_500)], timeout=10)
    assert found[0].offset == 5
    consumer.close()
    messages = consume_confluent(module_server.bootstrap_servers, "middle", 3)
    assert [m.value() for m in messages] == [b"0", b"1", b"2"]


def test_meta_properties_keep_node_and_cluster_ids(tmp_path):
    with KafkaServer(tmp_path, port=0, config={"node.id": 3}) as srv:
        cluster = srv.context.meta.cluster_id
    text = (tmp_path / "meta.properties").read_text()
    assert "node.id=3" in text and f"cluster.id={cluster}" in text and "version=1" in text
    with KafkaServer(tmp_path, port=0, config={"node.id": 3}) as srv:
        assert srv.context.meta.cluster_id == cluster


def test_a_busy_port_fails_start_and_releases_the_directory(tmp_path):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(OSError):
            KafkaServer(tmp_path, port=busy.getsockname()[1]).start()
    with KafkaServer(tmp_path, port=0) as srv:
        assert srv.port > 0

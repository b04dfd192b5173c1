"""Topic administration through confluent-kafka's AdminClient: CreateTopics with configs,
DescribeConfigs, IncrementalAlterConfigs, CreatePartitions, DeleteRecords, DeleteTopics."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)


@pytest.fixture
def admin(module_server):
    return AdminClient({"bootstrap.servers": module_server.bootstrap_servers})


def describe(admin: AdminClient, topic: str) -> dict:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return {k: v.value for k, v in admin.describe_configs([resource])[resource].result(10).items()}


def test_create_topic_with_configs_then_alter_and_describe(module_server, admin):
    admin.create_topics([NewTopic("configured", 3, 1, config={"retention.ms": "1000",
                                                             "cleanup.policy": "compact"})])["configured"].result(10)
    assert module_server.context.topics.partition_count("configured") == 3
    configs = describe(admin, "configured")
    assert configs["retention.ms"] == "1000" and configs["cleanup.policy"] == "compact"
    assert configs["segment.bytes"] == str(1024 ** 3)
    resource = ConfigResource(ConfigResource.Type.TOPIC, "configured", incremental_configs=[
        ConfigEntry("retention.ms", "5000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.APPEND)])
    admin.incremental_alter_configs([resource])[resource].result(10)
    configs = describe(admin, "configured")
    assert configs["retention.ms"] == "5000" and configs["cleanup.policy"] == "compact,delete"
    assert module_server.manager.get("configured", 2).config.retention_ms == 5000


def test_bad_topic_requests_get_kafkas_errors(admin):
    with pytest.raises(KafkaException, match="INVALID_CONFIG|InvalidConfig|config"):
        admin.create_topics([NewTopic("badconf", 1, 1, config={"segment.bytes": "-5"})])["badconf"].result(10)
    with pytest.raises(KafkaException, match="REPLICATION|replication"):
        admin.create_topics([NewTopic("rf3", 1, 3)])["rf3"].result(10)
    admin.create_topics([NewTopic("twice", 1, 1)])["twice"].result(10)
    with pytest.raises(KafkaException, match="TOPIC_ALREADY_EXISTS|already exists"):
        admin.create_topics([NewTopic("twice", 1, 1)])["twice"].result(10)


def test_create_partitions_delete_records_and_delete_topic(module_server, admin):
    admin.create_topics([NewTopic("grow", 1, 1)])["grow"].result(10)
    admin.create_partitions([NewPartitions("grow", 4)])["grow"].result(10)
    assert module_server.context.topics.partition_count("grow") == 4
    producer = Producer({"bootstrap.servers": module_server.bootstrap_servers})
    for i in range(10):
        producer.produce("grow", value=b"%d" % i, partition=0)
    producer.flush(10)
    result = admin.delete_records([TopicPartition("grow", 0, 6)])
    assert list(result.values())[0].result(10).low_watermark == 6
    assert module_server.manager.get("grow", 0).log_start_offset == 6
    admin.delete_topics(["grow"])["grow"].result(10)
    assert "grow" not in admin.list_topics(timeout=10).topics
    assert module_server.manager.get("grow", 0) is None


@pytest.mark.parametrize("name", ["../outside", "..", "a/b", "x" * 250])
def test_create_topics_keeps_names_inside_the_data_directory(module_server, admin, name):
    before = set(module_server.data_dir.parent.iterdir())
    with pytest.raises(KafkaException, match="TOPIC_EXCEPTION"):
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(10)
    assert set(module_server.data_dir.parent.iterdir()) == before
    assert name not in module_server.context.topics

"""AlterConfigs (key 33), the non-incremental API KafkaJS and older admin clients use: a
topic's configs become exactly the ones sent (kafka-python's admin client sends every modified
key along, as AlterConfigs resets what it leaves out)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import ConfigResource as ConfluentResource
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic


@pytest.fixture(scope="module")
def admin(module_server):
    client = KafkaAdminClient(bootstrap_servers=module_server.bootstrap_servers)
    yield client
    client.close()


def test_kafka_python_alter_configs_sets_a_topic_config_and_keeps_the_others(module_server, admin):
    admin.create_topics([NewTopic("altered", 1, 1, topic_configs={"cleanup.policy": "compact",
                                                                  "retention.ms": "1000"})])
    result = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "altered",
                                                 configs={"retention.ms": "5000"})], incremental=False)
    assert result == {"topic": {"altered": "OK"}}
    assert module_server.context.topics.overrides("altered") == {"cleanup.policy": "compact", "retention.ms": "5000"}
    assert module_server.manager.get("altered", 0).config.retention_ms == 5000


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_configs_left_out_revert_to_the_default(module_server):
    module_server.context.topics.create("replaced", 1, {"retention.ms": "1000", "segment.bytes": "100000"})
    admin = AdminClient({"bootstrap.servers": module_server.bootstrap_servers})
    resource = ConfluentResource(ConfluentResource.Type.TOPIC, "replaced", set_config={"retention.ms": "7000"})
    admin.alter_configs([resource])[resource].result(10)
    assert module_server.context.topics.overrides("replaced") == {"retention.ms": "7000"}


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_an_unknown_config_name_changes_nothing(module_server):
    module_server.context.topics.create("kept", 1, {"retention.ms": "1000"})
    admin = AdminClient({"bootstrap.servers": module_server.bootstrap_servers})
    resource = ConfluentResource(ConfluentResource.Type.TOPIC, "kept", set_config={"no.such.config": "1"})
    with pytest.raises(KafkaException, match="no.such.config"):
        admin.alter_configs([resource])[resource].result(10)
    assert module_server.context.topics.overrides("kept") == {"retention.ms": "1000"}

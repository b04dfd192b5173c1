"""DescribeConfigs as Kafka answers it: topic configs with their broker-level synonyms and
sources (confluent-kafka's admin client), a BROKER resource listing the broker's own names,
and config types and documentation when asked (at the wire: librdkafka does not expose them)."""

from __future__ import annotations

import dataclasses

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic
from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse

from logstore.server.broker_config import BrokerConfig
from logstore.server.config_entries import BROKER_SETTINGS, QUORUM_SETTINGS
from logstore.server.kraft.quorum_config import QuorumConfig
from tests.server.test_server_quorum_config import COMBINED
from tests.support.wire import WireClient

TYPE_BOOLEAN, TYPE_INT, TYPE_LONG, TYPE_LIST = 1, 3, 5, 7


pytestmark = pytest.mark.kafka_broker_config({"log.retention.ms": 1_000_000, "num.partitions": 2})


@pytest.fixture(scope="module")
def admin(module_server):
    client = AdminClient({"bootstrap.servers": module_server.bootstrap_servers})
    for future in client.create_topics([NewTopic("described", 1, 1, config={"cleanup.policy": "compact"})]).values():
        future.result(10)
    return client


def describe(admin: AdminClient, kind: ConfigResource.Type, name: str) -> dict:
    resource = ConfigResource(kind, name)
    return admin.describe_configs([resource])[resource].result(10)


def test_topic_configs_name_their_source_and_broker_synonyms(admin):
    configs = describe(admin, ConfigResource.Type.TOPIC, "described")
    policy, retention, segment = configs["cleanup.policy"], configs["retention.ms"], configs["segment.bytes"]
    assert (policy.value, policy.source) == ("compact", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert set(policy.synonyms) == {"cleanup.policy", "log.cleanup.policy"}
    assert (retention.value, retention.source) == ("1000000", ConfigSource.STATIC_BROKER_CONFIG.value)
    assert "log.retention.ms" in retention.synonyms
    assert segment.is_default and list(segment.synonyms) == ["log.segment.bytes"]


def test_a_broker_resource_lists_the_brokers_config_names(module_server, admin):
    configs = describe(admin, ConfigResource.Type.BROKER, str(module_server.context.node_id))
    assert {"log.retention.ms", "num.partitions", "log.segment.bytes", "message.max.bytes",
            "auto.create.topics.enable", "log.cleaner.enable"} <= set(configs)
    assert "retention.ms" not in configs and "segment.bytes" not in configs
    assert (configs["log.retention.ms"].value, configs["num.partitions"].value) == ("1000000", "2")
    assert configs["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["log.segment.bytes"].is_default and configs["log.retention.ms"].is_read_only


def test_every_broker_setting_is_described():
    fields = {f.name.replace("_", ".") for f in dataclasses.fields(BrokerConfig)} - {"log.defaults", "quorum"}
    assert fields == set(BROKER_SETTINGS)
    assert set(QuorumConfig.from_properties(COMBINED, 1).settings()) == set(QUORUM_SETTINGS)


def describe_wire(server, resource_type: int, name: str, *, documentation: bool) -> dict:
    request = DescribeConfigsRequest[4](resources=[DescribeConfigsRequest[4].DescribeConfigsResource(
        resource_type=resource_type, resource_name=name, configuration_keys=None)],
        include_synonyms=False, include_documentation=documentation)
    with WireClient(server.port, client_id="java-like") as client:
        response = client.call(request, DescribeConfigsResponse[4])
    return {c.name: c for c in response.results[0].configs}


def test_config_types_and_documentation_as_asked(module_server, admin):
    with_docs = describe_wire(module_server, 2, "described", documentation=True)
    assert {name: with_docs[name].config_type for name in ("segment.bytes", "retention.ms", "cleanup.policy",
                                                           "preallocate")} == {
        "segment.bytes": TYPE_INT, "retention.ms": TYPE_LONG, "cleanup.policy": TYPE_LIST, "preallocate": TYPE_BOOLEAN}
    assert all(c.documentation for c in with_docs.values())
    without = describe_wire(module_server, 4, str(module_server.context.node_id), documentation=False)
    assert without["num.partitions"].config_type == TYPE_INT
    assert all(c.documentation is None and c.synonyms == [] for c in without.values())

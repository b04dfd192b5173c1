"""What only the Java client asks of Metadata, checked at the wire: lookups by topic id
(`Admin.describeTopics(TopicCollection.ofTopicIds(...))`) and authorized operations at v12."""

from __future__ import annotations

import uuid

import pytest
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from tests.support.wire import WireClient

UNKNOWN_TOPIC_ID = 100
TOPIC_OPERATIONS = {3, 4, 5, 6, 7, 8, 10, 11}  # read write create delete alter describe describe/alter configs


@pytest.fixture(scope="module", autouse=True)
def seeded(module_server) -> None:
    module_server.context.topics.create("by-id", 3)


def metadata(server, topics, *, operations: bool = False):
    request = MetadataRequest[12](topics=topics, allow_auto_topic_creation=False,
                                  include_topic_authorized_operations=operations)
    with WireClient(server.port, client_id="java-like") as client:
        return client.call(request, MetadataResponse[12])


def by_id(topic_id: uuid.UUID):
    return MetadataRequest[12].MetadataRequestTopic(topic_id=topic_id, name=None)


def test_a_known_topic_id_returns_the_topic(module_server):
    topic_id = module_server.context.topics.topic_id("by-id")
    [topic] = metadata(module_server, [by_id(topic_id)]).topics
    assert (topic.error_code, topic.name, topic.topic_id, len(topic.partitions)) == (0, "by-id", topic_id, 3)


def test_an_unknown_topic_id_is_unknown_topic_id(module_server):
    missing = uuid.uuid4()
    [topic] = metadata(module_server, [by_id(missing)]).topics
    assert (topic.error_code, topic.name, topic.topic_id) == (UNKNOWN_TOPIC_ID, None, missing)


def test_authorized_operations_are_every_topic_operation_when_asked_for(module_server):
    [asked] = metadata(module_server, [by_id(module_server.context.topics.topic_id("by-id"))], operations=True).topics
    [not_asked] = metadata(module_server, None).topics
    assert asked.authorized_operations == TOPIC_OPERATIONS
    assert not_asked.authorized_operations is None  # Integer.MIN_VALUE on the wire

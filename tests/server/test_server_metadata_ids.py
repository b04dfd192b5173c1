"""What only the Java client asks of Metadata, checked at the wire: lookups by topic id
(`Admin.describeTopics(TopicCollection.ofTopicIds(...))`) and authorized operations at v12."""

from __future__ import annotations

import socket
import struct
import uuid

import pytest
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from logstore.server import KafkaServer

UNKNOWN_TOPIC_ID = 100
TOPIC_OPERATIONS = {3, 4, 5, 6, 7, 8, 10, 11}  # read write create delete alter describe describe/alter configs


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with KafkaServer(tmp_path_factory.mktemp("ids"), port=0) as srv:
        srv.context.topics.create("by-id", 3)
        yield srv


def metadata(server, topics, *, operations: bool = False):
    request = MetadataRequest[12](topics=topics, allow_auto_topic_creation=False,
                                  include_topic_authorized_operations=operations)
    request.with_header(correlation_id=1, client_id="java-like")
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(request.encode(header=True, framed=True))
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        return MetadataResponse[12].decode(sock.recv(size, socket.MSG_WAITALL), header=True)


def by_id(topic_id: uuid.UUID):
    return MetadataRequest[12].MetadataRequestTopic(topic_id=topic_id, name=None)


def test_a_known_topic_id_returns_the_topic(server):
    topic_id = server.context.topics.topic_id("by-id")
    [topic] = metadata(server, [by_id(topic_id)]).topics
    assert (topic.error_code, topic.name, topic.topic_id, len(topic.partitions)) == (0, "by-id", topic_id, 3)


def test_an_unknown_topic_id_is_unknown_topic_id(server):
    missing = uuid.uuid4()
    [topic] = metadata(server, [by_id(missing)]).topics
    assert (topic.error_code, topic.name, topic.topic_id) == (UNKNOWN_TOPIC_ID, None, missing)


def test_authorized_operations_are_every_topic_operation_when_asked_for(server):
    [asked] = metadata(server, [by_id(server.context.topics.topic_id("by-id"))], operations=True).topics
    [not_asked] = metadata(server, None).topics
    assert asked.authorized_operations == TOPIC_OPERATIONS
    assert not_asked.authorized_operations is None  # Integer.MIN_VALUE on the wire

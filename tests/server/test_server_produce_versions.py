"""Produce v0-v2 are listed in ApiVersions and refused when sent, as Kafka 4.0 does
(KAFKA-18659): librdkafka before 2.10 reads a Produce range starting above v0 as a broker
without compression support and sends gzip, snappy and lz4 batches uncompressed."""

from __future__ import annotations

import contextlib
import socket
import struct

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.producer import ProduceRequest

from logstore.server import KafkaServer

PRODUCE = ProduceRequest.API_KEY


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with KafkaServer(tmp_path_factory.mktemp("produce-versions"), port=0) as srv:
        yield srv


def test_api_versions_lists_produce_from_v0(server):
    request = ApiVersionsRequest[3](client_software_name="librdkafka", client_software_version="2.0.2")
    request.with_header(correlation_id=1, client_id="kcat")
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(request.encode(header=True, framed=True))
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        response = ApiVersionsResponse[3].decode(sock.recv(size, socket.MSG_WAITALL), header=True)
    [produce] = [k for k in response.api_keys if k.api_key == PRODUCE]
    assert (produce.min_version, produce.max_version) == (0, 11)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_a_produce_below_v3_is_refused(server, version):
    topic = ProduceRequest[version].TopicProduceData
    request = ProduceRequest[version](acks=1, timeout_ms=1000, topic_data=[topic(
        name="old", partition_data=[topic.PartitionProduceData(index=0, records=b"")])])
    request.with_header(correlation_id=1, client_id="old")
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(request.encode(header=True, framed=True))
        with contextlib.suppress(ConnectionResetError):
            assert sock.recv(4) == b""  # closed unanswered, as for any version not served
    assert "old" not in server.context.topics

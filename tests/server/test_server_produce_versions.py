"""Produce v0-v2 are listed in ApiVersions and refused when sent, as Kafka 4.0 does
(KAFKA-18659): librdkafka before 2.10 reads a Produce range starting above v0 as a broker
without compression support and sends gzip, snappy and lz4 batches uncompressed."""

from __future__ import annotations

import contextlib
import socket

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.producer import ProduceRequest

from tests.support.wire import WireClient

PRODUCE = ProduceRequest.API_KEY


def test_api_versions_lists_produce_from_v0(module_server):
    request = ApiVersionsRequest[3](client_software_name="librdkafka", client_software_version="2.0.2")
    with WireClient(module_server.port, client_id="kcat") as client:
        response = client.call(request, ApiVersionsResponse[3])
    [produce] = [k for k in response.api_keys if k.api_key == PRODUCE]
    assert (produce.min_version, produce.max_version) == (0, 11)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_a_produce_below_v3_is_refused(module_server, version):
    topic = ProduceRequest[version].TopicProduceData
    request = ProduceRequest[version](acks=1, timeout_ms=1000, topic_data=[topic(
        name="old", partition_data=[topic.PartitionProduceData(index=0, records=b"")])])
    request.with_header(correlation_id=1, client_id="old")
    with socket.create_connection(("127.0.0.1", module_server.port), timeout=10) as sock:
        sock.sendall(request.encode(header=True, framed=True))
        with contextlib.suppress(ConnectionResetError):
            assert sock.recv(4) == b""  # closed unanswered, as for any version not served
    assert "old" not in module_server.context.topics

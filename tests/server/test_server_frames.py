"""Request frames however the bytes arrive: pipelined in one send, cut at any byte, larger
and smaller than what the connection reads ahead. Every request is answered once, in order,
and the records land in the order they were sent (the model: the list of values sent)."""

from __future__ import annotations

import socket
import struct
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from logstore.records import Record, build_batch, iter_batches
from logstore.server.connection import READ_AHEAD_BYTES
from tests.support.wire import recv_exactly

TOPIC = "frames"
# value sizes around what one read ahead holds, and small ones that share it
SIZES = st.one_of(st.integers(0, 300), st.integers(READ_AHEAD_BYTES - 200, READ_AHEAD_BYTES + 200),
                  st.integers(3 * READ_AHEAD_BYTES, 5 * READ_AHEAD_BYTES))


@pytest.fixture(scope="module", autouse=True)
def frames_topic(module_server) -> None:
    module_server.context.topics.create(TOPIC, 1)


def framed_produce(value: bytes, correlation_id: int) -> bytes:
    batch = build_batch([Record(0, int(time.time() * 1000), None, value)])
    topic = ProduceRequest[7].TopicProduceData
    request = ProduceRequest[7](transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        topic(name=TOPIC, partition_data=[topic.PartitionProduceData(index=0, records=batch)])])
    request.with_header(correlation_id=correlation_id, client_id="frames")
    return request.encode(header=True, framed=True)


def values_from(log, offset: int) -> list[bytes]:
    data = log.read(offset, 1 << 30).records
    return [record.value for batch in iter_batches(bytes(data)) for record in batch]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(SIZES, min_size=1, max_size=12), cuts=st.lists(st.floats(0, 1), max_size=8),
       pause=st.booleans())
def test_pipelined_requests_cut_anywhere_are_each_answered_in_order(module_server, sizes, cuts, pause):
    log = module_server.manager.get(TOPIC, 0)
    start = log.log_end_offset
    values = [bytes([i % 251]) * size for i, size in enumerate(sizes)]
    stream = b"".join(framed_produce(value, i + 1) for i, value in enumerate(values))
    positions = sorted({0, len(stream), *(int(c * len(stream)) for c in cuts)})
    with socket.create_connection(("127.0.0.1", module_server.port), timeout=20) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for a, b in zip(positions, positions[1:], strict=False):
            sock.sendall(stream[a:b])
            if pause:
                time.sleep(0.005)  # each piece arrives on its own
        answered = []
        for _ in values:
            size = struct.unpack(">i", recv_exactly(sock, 4))[0]
            response = ProduceResponse[7].decode(recv_exactly(sock, size), header=True)
            assert response.responses[0].partition_responses[0].error_code == 0
            answered.append(response.header.correlation_id)
    assert answered == list(range(1, len(values) + 1))
    assert values_from(log, start) == values


def test_a_request_read_ahead_with_the_next_ones_size_field_cut_is_answered(module_server):
    """The read ahead ends two bytes into the next request's size field; the rest follows later."""
    log = module_server.manager.get(TOPIC, 0)
    start = log.log_end_offset
    first, second = framed_produce(b"first", 1), framed_produce(b"second", 2)
    with socket.create_connection(("127.0.0.1", module_server.port), timeout=20) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(first + second[:2])
        time.sleep(0.05)
        sock.sendall(second[2:])
        ids = []
        for _ in range(2):
            size = struct.unpack(">i", recv_exactly(sock, 4))[0]
            ids.append(ProduceResponse[7].decode(recv_exactly(sock, size), header=True).header.correlation_id)
    assert ids == [1, 2]
    assert values_from(log, start) == [b"first", b"second"]

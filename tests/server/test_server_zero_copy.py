"""The fetch path sends record bytes from the segment file with sendfile (Kafka's
FileRecords.transferTo), the response's framing written around them: real clients read exactly
what was produced, fetch sessions and read_committed included; budgets still cut at whole
batches; aborted-transaction lists come from the transaction index, no record decoded; a
connection that cannot sendfile gets the records copied."""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import os
import time

import pytest
from confluent_kafka import Producer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from logstore.errors import LogClosedError
from logstore.file_slice import FileSlice
from logstore.records import Record, build_batch
from logstore.records.batch import RecordBatch
from logstore.server.connection import FrameProtocol
from tests.server.test_server_clients import consume_confluent, poll_kafka_python
from tests.server.test_server_transactions import read_all, read_all_kafka_python
from tests.support.wire import WireClient

COUNT = 2000
VALUE = bytes(range(256)) * 4  # 1 KiB


class Spies:
    """Bytes the process sent with os.sendfile and read with os.pread, and records decoded."""

    def __init__(self) -> None:
        self.sent = 0
        self.read = 0
        self.decoded = 0

    def reset(self) -> None:
        self.sent = self.read = self.decoded = 0


@pytest.fixture
def spies(monkeypatch) -> Spies:
    found = Spies()
    sendfile, pread, records_bytes = os.sendfile, os.pread, RecordBatch.records_bytes

    def spy_sendfile(out_fd, in_fd, offset, count):
        # counted before the call: the client may read the last byte before the server's
        # thread returns from it
        found.sent += count
        sent = 0
        try:
            sent = sendfile(out_fd, in_fd, offset, count)
            return sent
        finally:
            found.sent -= count - sent

    def spy_pread(fd, size, position):
        data = pread(fd, size, position)
        found.read += len(data)
        return data

    def spy_records_bytes(batch, **options):
        found.decoded += 1
        return records_bytes(batch, **options)

    monkeypatch.setattr(os, "sendfile", spy_sendfile)
    monkeypatch.setattr(os, "pread", spy_pread)
    monkeypatch.setattr(RecordBatch, "records_bytes", spy_records_bytes)
    return found


def produce(bootstrap: str, topic: str, values: list[bytes], **conf) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(30) == 0


def values_for(topic: str) -> list[bytes]:
    return [b"%s-%d-" % (topic.encode(), i) + VALUE for i in range(COUNT)]


def aiokafka_values(bootstrap: str, topic: str, count: int) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def read() -> list[bytes]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0)])
            values = []
            while len(values) < count:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    values += [r.value for r in records]
            return values
        finally:
            await consumer.stop()

    return asyncio.run(asyncio.wait_for(read(), 30))


def kafka_python_values(bootstrap: str, topic: str, count: int) -> list[bytes]:
    from kafka import KafkaConsumer, TopicPartition

    # kafka-python opens a fetch session (KIP-227): the fetches after the first are incremental
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    try:
        return poll_kafka_python(consumer, count)
    finally:
        consumer.close()


READERS = {
    "confluent": lambda bootstrap, topic, count: [m.value() for m in consume_confluent(bootstrap, topic, count)],
    "kafka-python": kafka_python_values,
    "aiokafka": aiokafka_values,
}


@pytest.mark.slow
@pytest.mark.parametrize("client", sorted(READERS))
def test_clients_read_exactly_the_records_produced_and_the_bytes_go_through_sendfile(module_server, spies,
                                                                                      client):
    topic = f"zero-copy-{client}"
    expected = values_for(topic)
    produce(module_server.bootstrap_servers, topic, expected)
    spies.reset()
    assert READERS[client](module_server.bootstrap_servers, topic, COUNT) == expected
    stored = module_server.manager.get(topic, 0).size
    assert spies.sent >= stored  # every record byte went out through sendfile
    assert spies.read < stored / 4  # only batch headers were read into Python
    assert spies.decoded == 0


@pytest.mark.slow
def test_read_committed_skips_aborted_transactions_without_the_server_decoding_a_record(module_server, spies):
    bootstrap = module_server.bootstrap_servers
    topic = "zero-copy-txn"
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "zero-copy", "linger.ms": 5})
    producer.init_transactions(20)
    committed = []
    for round_, commit in enumerate([True, False, True, False, True]):
        producer.begin_transaction()
        values = [b"%d-%d-" % (round_, i) + VALUE for i in range(300)]
        for value in values:
            producer.produce(topic, value, partition=0)
        producer.flush(20)
        if commit:
            producer.commit_transaction(20)
            committed += values
        else:
            producer.abort_transaction(20)
    spies.reset()
    assert read_all(bootstrap, topic, committed=True) == committed
    assert read_all_kafka_python(bootstrap, topic, committed=True) == committed
    assert spies.sent >= 2 * module_server.manager.get(topic, 0).size
    assert spies.decoded == 0


def test_a_connection_that_cannot_sendfile_gets_the_records_copied_and_says_so(module_server, monkeypatch, caplog):
    def refuse(*args):
        raise OSError(errno.EINVAL, "sendfile refused")  # as for a socket sendfile cannot write to

    topic = "zero-copy-fallback"
    expected = values_for(topic)[:300]
    produce(module_server.bootstrap_servers, topic, expected)
    monkeypatch.setattr(os, "sendfile", refuse)
    with caplog.at_level(logging.INFO, logger="logstore.server"):
        assert kafka_python_values(module_server.bootstrap_servers, topic, len(expected)) == expected
    assert "sendfile is not available on this connection, fetched records are copied" in caplog.text


def test_a_slice_cut_short_under_its_send_closes_the_connection(tmp_path, caplog):
    """The response's framing promised the slice's size: when the file holds less by the time
    it is sent (a truncated segment), the connection closes and the slice is released."""
    path = tmp_path / "segment.log"
    path.write_bytes(b"x" * 5000)

    async def send() -> tuple[bytes, FileSlice]:
        loop = asyncio.get_running_loop()
        received, closed = bytearray(), loop.create_future()

        class Client(asyncio.Protocol):
            def data_received(self, data: bytes) -> None:
                received.extend(data)

            def connection_lost(self, exc: Exception | None) -> None:
                closed.set_result(None)

        listener = await loop.create_server(Client, "127.0.0.1", 0)
        protocol = FrameProtocol(lambda _: None)
        await loop.create_connection(lambda: protocol, "127.0.0.1", listener.sockets[0].getsockname()[1])
        fd = os.open(path, os.O_RDONLY)
        piece = FileSlice(fd, 0, 10_000, functools.partial(os.close, fd))
        with pytest.raises(ConnectionError, match="truncated"):
            await protocol.write([b"framing", piece])
        protocol.transport.close()
        await closed
        listener.close()
        return bytes(received), piece

    with caplog.at_level(logging.WARNING, logger="logstore.server"):
        received, piece = asyncio.run(asyncio.wait_for(send(), 10))
    assert received == b"framing" + b"x" * 5000
    assert "truncated to 5000 bytes during the send" in caplog.text
    with pytest.raises(LogClosedError):
        piece.fileno()


# ---------------------------------------------------------------- budgets, at the wire

SIZES = [40, 3000, 9000, 200, 5000, 15000, 100, 7000, 60, 20000, 4100, 300]  # values: inline and sliced


@pytest.fixture(scope="module")
def edges(module_server) -> list[tuple[int, bytes]]:
    """Partitions 0 and 1 of topic `edges` hold the same batches: [(base offset, batch bytes)]."""
    module_server.context.topics.create("edges", 2)
    batches = []
    with WireClient(module_server.port) as client:
        for i, size in enumerate(SIZES):
            now = int(time.time() * 1000)
            batch = build_batch([Record(0, now, b"k", bytes([i]) * size), Record(1, now, None, b"x")])
            topic = ProduceRequest[7].TopicProduceData
            parts = [topic.PartitionProduceData(index=p, records=batch) for p in (0, 1)]
            answer = client.call(ProduceRequest[7](transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
                topic(name="edges", partition_data=parts)]), ProduceResponse[7])
            offsets = {p.base_offset for p in answer.responses[0].partition_responses}
            assert offsets == {2 * i}
            batches.append((2 * i, bytes(module_server.manager.get("edges", 0).read(2 * i, 1).records)))
    return batches


def expected_records(batches: list[tuple[int, bytes]], offset: int, limit: int, min_one: bool) -> bytes:
    """Whole batches from the one holding `offset`, at most `limit` bytes, the first whole
    whatever its size when `min_one` (KIP-74)."""
    start = max(i for i, (base, _) in enumerate(batches) if base <= offset)
    out, used = [], 0
    for _, data in batches[start:]:
        if used + len(data) > limit and not (min_one and not out):
            break
        out.append(data)
        used += len(data)
    return b"".join(out)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(offset=st.integers(0, 2 * len(SIZES) - 1), first_max=st.integers(0, 60_000),
       second_max=st.integers(0, 60_000), max_bytes=st.integers(0, 80_000),
       version=st.sampled_from([4, 7, 11, 12]))
def test_fetch_budgets_cut_at_whole_batches_whether_sliced_or_inline(module_server, edges, offset, first_max,
                                                                     second_max, max_bytes, version):
    topic = FetchRequest[version].FetchTopic
    partitions = [topic.FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                                       partition_max_bytes=m) for p, m in ((0, first_max), (1, second_max))]
    request = FetchRequest[version](replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes,
                                    isolation_level=0, session_id=0, session_epoch=-1,
                                    topics=[topic(topic="edges", partitions=partitions)],
                                    forgotten_topics_data=[], rack_id="")
    with WireClient(module_server.port) as client:
        answer = client.call(request, FetchResponse[version])
    got = [bytes(p.records or b"") for p in answer.responses[0].partitions]
    first = expected_records(edges, offset, min(first_max, max_bytes), first_max > 0) if first_max else b""
    left = max(max_bytes - len(first), 0)
    second = expected_records(edges, offset, min(second_max, left), not first and second_max > 0) \
        if second_max else b""
    assert got == [first, second]

"""Transactions and idempotence against `logstore.server.KafkaServer`: commits and aborts as
read_committed consumers (librdkafka's and kafka-python's) see them, consume-transform-produce
with send_offsets_to_transaction (librdkafka, aiokafka and kafka-python),
duplicate produce retries, and a data directory that `logstore verify` passes afterwards."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from kafka.protocol.producer import ProduceRequest, ProduceResponse  # noqa: E402

from logstore.cli import main as logstore_main  # noqa: E402
from logstore.clock import ManualClock  # noqa: E402
from logstore.records import Record, build_batch  # noqa: E402
from logstore.server import KafkaServer  # noqa: E402
from tests.support.wire import WireClient

FIRST_MESSAGE_WAIT_S = 10  # how long read_all waits for a first message on a loaded machine
CONFIG = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 2,
          "transaction.state.log.num.partitions": 2}
pytestmark = pytest.mark.kafka_broker_config(CONFIG)


@pytest.fixture(autouse=True)
def verified(request, tmp_path):
    """After each test that ran the `server` fixture's broker (over `tmp_path / "data"`), its
    directory passes `logstore verify --deep`."""
    yield
    if "server" in request.fixturenames:
        assert logstore_main(["verify", "--deep", str(tmp_path / "data")]) == 0


def read_all(bootstrap: str, topic: str, *, committed: bool, partitions: int = 1, idle_s: float = 1.5) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False,
                         "isolation.level": "read_committed" if committed else "read_uncommitted"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values, last = [], time.monotonic() + FIRST_MESSAGE_WAIT_S - idle_s
    while time.monotonic() - last < idle_s:
        message = consumer.poll(0.1)
        if message is not None and not message.error():
            values.append(message.value())
            last = time.monotonic()
    consumer.close()
    return values


def test_read_committed_sees_commits_and_never_aborts(server):
    bootstrap = server.bootstrap_servers
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "t-commit-abort"})
    producer.init_transactions(10)
    for round_, commit in enumerate([True, False, True, False, True]):
        producer.begin_transaction()
        for i in range(4):
            producer.produce("txn", value=b"%d-%d" % (round_, i))
        producer.flush(10)
        if commit:
            producer.commit_transaction(10)
        else:
            producer.abort_transaction(10)
    expected = [b"%d-%d" % (r, i) for r in (0, 2, 4) for i in range(4)]
    assert read_all(bootstrap, "txn", committed=True) == expected
    assert len(read_all(bootstrap, "txn", committed=False)) == 20
    log = server.manager.get("txn", 0)
    assert log.last_stable_offset == log.log_end_offset


def test_read_committed_stops_at_an_open_transaction(server):
    bootstrap = server.bootstrap_servers
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce("open", value=b"before")
    plain.flush(10)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "t-open"})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce("open", value=b"pending")
    producer.flush(10)
    plain.produce("open", value=b"after")
    plain.flush(10)
    assert read_all(bootstrap, "open", committed=True, idle_s=1) == [b"before"]
    producer.commit_transaction(10)
    assert read_all(bootstrap, "open", committed=True, idle_s=1) == [b"before", b"pending", b"after"]


def test_consume_transform_produce_is_exactly_once(server):
    bootstrap = server.bootstrap_servers
    source = Producer({"bootstrap.servers": bootstrap})
    for i in range(60):
        source.produce("ctp-in", value=b"%d" % i)
    source.flush(10)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ctp", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe(["ctp-in"])
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "ctp-app"})
    producer.init_transactions(10)
    done, batches, deadline = 0, 0, time.monotonic() + 30
    while done < 60 and time.monotonic() < deadline:
        messages = [m for m in consumer.consume(10, 0.5) if not m.error()]
        if not messages:
            continue
        producer.begin_transaction()
        for m in messages:
            producer.produce("ctp-out", value=b"out-" + m.value())
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 10)
        batches += 1
        if batches == 2:  # fail one batch: abort and rewind to the committed offsets
            producer.abort_transaction(10)
            for tp in consumer.committed(consumer.assignment(), timeout=10):
                consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
            continue
        producer.commit_transaction(10)
        done += len(messages)
    consumer.close()
    assert read_all(bootstrap, "ctp-out", committed=True) == [b"out-%d" % i for i in range(60)]
    check = Consumer({"bootstrap.servers": bootstrap, "group.id": "ctp"})
    assert check.committed([TopicPartition("ctp-in", 0)], timeout=10)[0].offset == 60
    check.close()


def test_duplicate_retries_of_an_idempotent_producer_write_nothing(server):
    producer = Producer({"bootstrap.servers": server.bootstrap_servers, "enable.idempotence": True})
    producer.produce("dups", value=b"create")  # creates the topic, takes producer id 0's place
    producer.flush(10)
    from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

    with WireClient(server.port, client_id="dup-test") as sock:
        ids = sock.call(InitProducerIdRequest[2](transactional_id=None, transaction_timeout_ms=1000),
                        InitProducerIdResponse[2])
        offsets = []
        for seq in (0, 3):
            batch = build_batch([Record(i, 1000, None, b"s%d" % (seq + i)) for i in range(3)],
                                producer_id=ids.producer_id, producer_epoch=ids.producer_epoch, base_sequence=seq)
            topic = ProduceRequest[9].TopicProduceData
            request = ProduceRequest[9](transactional_id=None, acks=-1, timeout_ms=1000, topic_data=[
                topic(name="dups", partition_data=[topic.PartitionProduceData(index=0, records=batch)])])
            for attempt in range(3):  # the first send and two retries of the same batch
                response = sock.call(request, ProduceResponse[9], 10 + seq + attempt)
                part = response.responses[0].partition_responses[0]
                assert part.error_code == 0
                offsets.append(part.base_offset)
    assert offsets == [1, 1, 1, 4, 4, 4]
    assert read_all(server.bootstrap_servers, "dups", committed=False, idle_s=1) == \
        [b"create"] + [b"s%d" % i for i in range(6)]


@pytest.mark.slow
def test_a_transaction_left_open_across_a_restart_is_aborted_at_its_timeout(tmp_path):
    clock = ManualClock(time.time_ns() // 1_000_000)  # stands still until the test moves it
    with KafkaServer(tmp_path, port=0, config=CONFIG, clock=clock) as srv:
        producer = Producer({"bootstrap.servers": srv.bootstrap_servers, "transactional.id": "stuck",
                             "transaction.timeout.ms": 1500})
        producer.init_transactions(10)
        producer.begin_transaction()
        producer.produce("stuck", value=b"never committed")
        producer.flush(10)
        plain = Producer({"bootstrap.servers": srv.bootstrap_servers})
        plain.produce("stuck", value=b"visible")
        plain.flush(10)
    with KafkaServer(tmp_path, port=0, config=CONFIG, clock=clock) as srv:
        log = srv.manager.get("stuck", 0)
        assert log.last_stable_offset == 0  # the open transaction holds consumers back
        clock.advance(1501)  # past the transaction's timeout, however long the restart took
        srv.check_timers()
        assert log.last_stable_offset == log.log_end_offset
        assert read_all(srv.bootstrap_servers, "stuck", committed=True, idle_s=1) == [b"visible"]


def test_dump_decoders_read_the_servers_coordinator_topics(tmp_path, capsys):
    config = {**CONFIG, "offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": 1}
    with KafkaServer(tmp_path, port=0, config=config) as srv:
        producer = Producer({"bootstrap.servers": srv.bootstrap_servers, "transactional.id": "dumped-txn"})
        producer.init_transactions(10)
        producer.begin_transaction()
        producer.produce("dumped", value=b"x")
        producer.commit_transaction(10)
        consumer = Consumer({"bootstrap.servers": srv.bootstrap_servers, "group.id": "dumped-group"})
        consumer.commit(offsets=[TopicPartition("dumped", 0, 1)], asynchronous=False)
        consumer.close()
    segment = "00000000000000000000.log"
    assert logstore_main(["dump", "--offsets-decoder", str(tmp_path / "__consumer_offsets-0" / segment)]) == 0
    offsets = capsys.readouterr().out
    assert '"group":"dumped-group","topic":"dumped","partition":0' in offsets
    assert '"offset":1,' in offsets
    assert logstore_main(["dump", "--transaction-log-decoder",
                          str(tmp_path / "__transaction_state-0" / segment)]) == 0
    states = capsys.readouterr().out
    assert "key: transaction_metadata::transactionalId=dumped-txn" in states
    assert "state=Ongoing,partitions=[dumped-0]" in states and "state=CompleteCommit" in states


def test_aiokafka_consume_transform_produce_commits_exactly_once(server):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    bootstrap = server.bootstrap_servers
    source = Producer({"bootstrap.servers": bootstrap})
    for i in range(40):
        source.produce("aio-ctp-in", value=b"%d" % i)
    assert source.flush(10) == 0

    async def transform() -> None:
        consumer = AIOKafkaConsumer("aio-ctp-in", bootstrap_servers=bootstrap, group_id="aio-ctp",
                                    enable_auto_commit=False, auto_offset_reset="earliest",
                                    isolation_level="read_committed")
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-ctp-app")
        await consumer.start()
        await producer.start()
        try:
            done, batches = 0, 0
            while done < 40:
                fetched = await consumer.getmany(timeout_ms=200, max_records=15)
                if not fetched:
                    continue
                batches += 1
                await producer.begin_transaction()
                for records in fetched.values():
                    for record in records:
                        await producer.send("aio-ctp-out", b"out-" + record.value)
                await producer.send_offsets_to_transaction(
                    {tp: records[-1].offset + 1 for tp, records in fetched.items()}, "aio-ctp")
                if batches == 2:  # fail one batch: abort and rewind to the committed offsets
                    await producer.abort_transaction()
                    for tp in fetched:
                        consumer.seek(tp, await consumer.committed(tp) or 0)
                    continue
                await producer.commit_transaction()
                done += sum(len(records) for records in fetched.values())
        finally:
            await producer.stop()
            await consumer.stop()

    asyncio.run(asyncio.wait_for(transform(), 40))
    assert read_all(bootstrap, "aio-ctp-out", committed=True) == [b"out-%d" % i for i in range(40)]
    assert len(read_all(bootstrap, "aio-ctp-out", committed=False)) > 40  # the aborted batch is in the log
    check = Consumer({"bootstrap.servers": bootstrap, "group.id": "aio-ctp"})
    assert check.committed([TopicPartition("aio-ctp-in", 0)], timeout=10)[0].offset == 40
    check.close()


def read_all_kafka_python(bootstrap: str, topic: str, *, committed: bool, idle_s: float = 1.5) -> list[bytes]:
    """Every value of `topic` partition 0 as a kafka-python consumer sees it, until `idle_s` passes
    without a record."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaPythonPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             isolation_level="read_committed" if committed else "read_uncommitted")
    consumer.assign([KafkaPythonPartition(topic, 0)])
    consumer.seek_to_beginning()
    values, last = [], time.monotonic() + FIRST_MESSAGE_WAIT_S - idle_s
    while time.monotonic() - last < idle_s:
        for records in consumer.poll(timeout_ms=100).values():
            values += [r.value for r in records]
            last = time.monotonic()
    consumer.close()
    return values


def test_kafka_python_commits_and_aborts_and_read_committed_sees_only_commits(server):
    from kafka import KafkaProducer

    bootstrap = server.bootstrap_servers
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-commit-abort")
    producer.init_transactions()
    for round_, commit in enumerate([True, False, True]):
        producer.begin_transaction()
        for i in range(4):
            producer.send("kp-txn", b"%d-%d" % (round_, i))
        producer.flush()
        if commit:
            producer.commit_transaction()
        else:
            producer.abort_transaction()
    producer.close()
    assert read_all_kafka_python(bootstrap, "kp-txn", committed=True) == \
        [b"%d-%d" % (r, i) for r in (0, 2) for i in range(4)]
    assert len(read_all_kafka_python(bootstrap, "kp-txn", committed=False)) == 12


def test_kafka_python_consume_transform_produce_commits_exactly_once(server):
    from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata

    bootstrap = server.bootstrap_servers
    source = Producer({"bootstrap.servers": bootstrap})
    for i in range(40):
        source.produce("kp-ctp-in", value=b"%d" % i)
    assert source.flush(10) == 0
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id="kp-ctp", enable_auto_commit=False,
                             auto_offset_reset="earliest", isolation_level="read_committed")
    assert consumer.partitions_for_topic("kp-ctp-in") == {0}  # the group leader assigns from known metadata
    consumer.subscribe(["kp-ctp-in"])
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-ctp-app")
    producer.init_transactions()
    done, batches, deadline = 0, 0, time.monotonic() + 30
    while done < 40 and time.monotonic() < deadline:
        fetched = consumer.poll(timeout_ms=200, max_records=15)
        if not fetched:
            continue
        batches += 1
        producer.begin_transaction()
        for records in fetched.values():
            for record in records:
                producer.send("kp-ctp-out", b"out-" + record.value)
        producer.send_offsets_to_transaction(
            {tp: OffsetAndMetadata(records[-1].offset + 1, "", -1) for tp, records in fetched.items()},
            consumer.group_metadata())
        if batches == 2:  # fail one batch: abort and rewind to the committed offsets
            producer.flush()  # written first, so that the log holds the aborted records
            producer.abort_transaction()
            for tp in fetched:
                consumer.seek(tp, consumer.committed(tp) or 0)
            continue
        producer.commit_transaction()
        done += sum(len(records) for records in fetched.values())
    producer.close()
    consumer.close()
    assert read_all_kafka_python(bootstrap, "kp-ctp-out", committed=True) == [b"out-%d" % i for i in range(40)]
    assert len(read_all_kafka_python(bootstrap, "kp-ctp-out", committed=False)) > 40  # the aborted batch
    check = Consumer({"bootstrap.servers": bootstrap, "group.id": "kp-ctp"})
    assert check.committed([TopicPartition("kp-ctp-in", 0)], timeout=10)[0].offset == 40
    check.close()


def test_markers_that_cannot_be_written_are_retried_and_the_decision_stands(server):
    from kafka.protocol.admin import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse
    from kafka.protocol.producer import (
        AddPartitionsToTxnRequest,
        AddPartitionsToTxnResponse,
        EndTxnRequest,
        EndTxnResponse,
        InitProducerIdRequest,
        InitProducerIdResponse,
    )

    server.context.topics.create("marked", 1)
    log = server.manager.get("marked", 0)
    resource = IncrementalAlterConfigsRequest[1].AlterConfigsResource

    def max_message_bytes(value: str | None) -> int:
        op = resource.AlterableConfig(name="max.message.bytes", config_operation=0 if value else 1, value=value)
        return sock.call(IncrementalAlterConfigsRequest[1](resources=[resource(
            resource_type=2, resource_name="marked", configs=[op])], validate_only=False),
            IncrementalAlterConfigsResponse[1]).responses[0].error_code

    with WireClient(server.port, client_id="txn-wire") as sock:
        init = sock.call(InitProducerIdRequest[3](transactional_id="marked-tx", transaction_timeout_ms=60_000,
                                                   producer_id=-1, producer_epoch=-1), InitProducerIdResponse[3])
        ids = {"transactional_id": "marked-tx", "producer_id": init.producer_id, "producer_epoch": init.producer_epoch}
        add = AddPartitionsToTxnRequest[3].AddPartitionsToTxnTopic
        sock.call(AddPartitionsToTxnRequest[3](**{f"v3_and_below_{k}": v for k, v in ids.items()},
                                                v3_and_below_topics=[add(name="marked", partitions=[0])]),
             AddPartitionsToTxnResponse[3])
        log.append(bytearray(build_batch([Record(0, int(time.time() * 1000), None, b"in the txn")],
                                         producer_id=init.producer_id, producer_epoch=init.producer_epoch,
                                         base_sequence=0, is_transactional=True)))
        assert max_message_bytes("0") == 0  # no marker fits now
        assert sock.call(EndTxnRequest[3](**ids, committed=True), EndTxnResponse[3]).error_code == 0
        assert log.last_stable_offset == 0  # decided, not yet marked
        assert sock.call(EndTxnRequest[3](**ids, committed=True), EndTxnResponse[3]).error_code == 51
        again = sock.call(InitProducerIdRequest[3](transactional_id="marked-tx", transaction_timeout_ms=60_000,
                                                    producer_id=-1, producer_epoch=-1), InitProducerIdResponse[3])
        assert again.error_code == 51  # CONCURRENT_TRANSACTIONS until its markers are written
        assert max_message_bytes(None) == 0
        server.check_timers()  # the coordinator's next try
        assert log.last_stable_offset == log.log_end_offset == 2
        assert sock.call(EndTxnRequest[3](**ids, committed=True), EndTxnResponse[3]).error_code == 0
    assert read_all(server.bootstrap_servers, "marked", committed=True) == [b"in the txn"]

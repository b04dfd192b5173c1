"""Consumer groups against `logstore.server.KafkaServer`: rebalances among three members of
librdkafka, of aiokafka and of kafka-python with every record consumed once under committed
offsets, which commits a rebalance admits, offsets kept in __consumer_offsets across restarts,
and the group admin APIs."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from logstore.clock import ManualClock  # noqa: E402
from logstore.internal_topics.records import decode_offsets_record  # noqa: E402
from logstore.server import KafkaServer  # noqa: E402
from tests.server.group_wire import Wire  # noqa: E402
from tests.server.server_topics import KAFKA_PYTHON_MEMBER, create_topic, subscribe_kafka_python  # noqa: E402
from tests.support.waiting import eventually  # noqa: E402

MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID = 79, 27, 25
INCONSISTENT_GROUP_PROTOCOL, INVALID_REQUEST = 23, 42

CONFIG = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 3,
          "transaction.state.log.num.partitions": 3}
pytestmark = pytest.mark.kafka_broker_config(CONFIG)


def produce(bootstrap: str, topic: str, count: int, partitions: int, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    for i in range(start, start + count):
        producer.produce(topic, value=b"%d" % i, partition=i % partitions)
    assert producer.flush(10) == 0


class Member(threading.Thread):
    """A group member that counts a record only once its offset commit succeeded."""

    def __init__(self, bootstrap: str, topic: str, counted: list, lock: threading.Lock):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.counted, self.lock = counted, lock
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "members",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
        self.consumer.subscribe([topic])

    def run(self) -> None:
        while not self.stop.is_set():
            message = self.consumer.poll(0.1)
            if message is None or message.error():
                continue
            try:
                self.consumer.commit(message, asynchronous=False)
            except KafkaException:
                continue  # fenced by a rebalance: the partition's next owner consumes it again
            with self.lock:
                self.counted.append(int(message.value()))
        self.consumer.close()


def test_three_members_rebalance_and_consume_every_record_once(server):
    bootstrap = server.bootstrap_servers
    create_topic(bootstrap, "work", 6)
    counted: list[int] = []
    lock = threading.Lock()
    members = []
    total = 0
    for _ in range(3):  # members join one by one while records keep coming
        produce(bootstrap, "work", 300, 6, start=total)
        total += 300
        member = Member(bootstrap, "work", counted, lock)
        member.start()
        members.append(member)
        time.sleep(1.5)
    members[0].stop.set()  # the first member leaves; the others take its partitions over
    members[0].join(10)
    produce(bootstrap, "work", 300, 6, start=total)
    total += 300
    eventually(lambda: len(set(counted)) >= total, "every record counted once committed")
    for member in members[1:]:
        member.stop.set()
        member.join(10)
    assert sorted(counted) == list(range(total))
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "members"})
    committed = consumer.committed([TopicPartition("work", p) for p in range(6)], timeout=10)
    consumer.close()
    assert sum(tp.offset for tp in committed) == total


def test_committed_offsets_survive_a_restart_in_kafkas_record_format(tmp_path):
    with KafkaServer(tmp_path, port=0, config=CONFIG) as srv:
        produce(srv.bootstrap_servers, "kept", 10, 1)
        consumer = Consumer({"bootstrap.servers": srv.bootstrap_servers, "group.id": "keeper",
                             "enable.auto.commit": False})
        consumer.commit(offsets=[TopicPartition("kept", 0, 7)], asynchronous=False)
        consumer.close()
    with KafkaServer(tmp_path, port=0, config=CONFIG) as srv:
        consumer = Consumer({"bootstrap.servers": srv.bootstrap_servers, "group.id": "keeper",
                             "auto.offset.reset": "earliest"})
        assert consumer.committed([TopicPartition("kept", 0)], timeout=10)[0].offset == 7
        consumer.subscribe(["kept"])
        values = []
        deadline = time.monotonic() + 15
        while len(values) < 3 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                values.append(message.value())
        consumer.close()
        assert values == [b"7", b"8", b"9"]
        decoded = [decode_offsets_record(r.key, r.value) for log in srv.manager.logs()
                   if log.topic == "__consumer_offsets" for r in log.records() if r.key]
    commits = [d for d in decoded if d.name == "OffsetCommit" and d.key["group"] == "keeper"]
    assert commits and commits[0].key == {"group": "keeper", "topic": "kept", "partition": 0}
    assert commits[0].value["offset"] == 7


def test_list_describe_and_delete_groups(server):
    bootstrap = server.bootstrap_servers
    produce(bootstrap, "adm", 5, 1)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "listed", "auto.offset.reset": "earliest"})
    consumer.subscribe(["adm"])
    deadline = time.monotonic() + 15
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_groups().result(10)
    assert "listed" in [g.group_id for g in listed.valid]
    described = admin.describe_consumer_groups(["listed"])["listed"].result(10)
    assert len(described.members) == 1 and str(described.state).endswith("STABLE")
    consumer.commit(offsets=[TopicPartition("adm", 0, 5)], asynchronous=False)
    consumer.close()
    admin.delete_consumer_groups(["listed"])["listed"].result(10)
    assert "listed" not in [g.group_id for g in admin.list_consumer_groups().result(10).valid]


def dynamic_join(wire: Wire, group: str, member_id: str = ""):
    """JoinGroup as a dynamic member, learning its member id first (KIP-394) when it has none."""
    if not member_id:
        first = wire.join(group, None)
        assert first.error_code == MEMBER_ID_REQUIRED
        member_id = first.member_id
    return wire.join(group, None, member_id)


def test_members_commit_during_a_rebalance_but_not_before_their_new_assignment(server):
    create_topic(server.bootstrap_servers, "t", 2)  # offsets of partitions the node lacks are refused
    first_wire, second_wire = Wire(server.port), Wire(server.port)
    first = dynamic_join(first_wire, "committing")
    first_wire.sync("committing", first.generation_id, first.member_id, None, {first.member_id: b""})
    with ThreadPoolExecutor(1) as pool:
        second_joining = pool.submit(dynamic_join, second_wire, "committing")  # answered once the first rejoins
        while first_wire.heartbeat("committing", first.generation_id, first.member_id, None) != \
                REBALANCE_IN_PROGRESS:
            pass
        # before rejoining, a member commits what it processed under the generation it has
        assert first_wire.commit("committing", first.generation_id, first.member_id, None, {("t", 0): 5}) == [0]
        again = dynamic_join(first_wire, "committing", first.member_id)
        second = second_joining.result(10)
    assert again.generation_id == second.generation_id == first.generation_id + 1
    # joined the new generation but not yet synced: its partitions are not known yet
    assert second_wire.commit("committing", second.generation_id, second.member_id, None, {("t", 1): 3}) == \
        [REBALANCE_IN_PROGRESS]
    first_wire.sync("committing", again.generation_id, again.member_id, None,
                    {again.member_id: b"", second.member_id: b""})
    assert second_wire.commit("committing", second.generation_id, second.member_id, None, {("t", 1): 3}) == [0]
    first_wire.close()
    second_wire.close()


def test_three_aiokafka_members_rebalance_and_consume_every_record_once(server):
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka.errors import CommitFailedError, IllegalStateError, RebalanceInProgressError

    bootstrap = server.bootstrap_servers
    create_topic(bootstrap, "aio-work", 6)
    counted: list[tuple[int, int]] = []  # (member, value)

    class FinishBatchFirst(ConsumerRebalanceListener):
        """aiokafka rebalances in the background: a member hands its partitions over only once
        the batch in hand is committed (aiokafka's pattern), else a partition it keeps would be
        read again from an offset fetched before that batch's last commits."""

        def __init__(self, batch: asyncio.Lock):
            self.batch = batch

        async def on_partitions_revoked(self, revoked) -> None:
            async with self.batch:
                pass

        async def on_partitions_assigned(self, assigned) -> None:
            pass

    async def member(index: int, stop: asyncio.Event) -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id="aio-members",
                                    enable_auto_commit=False, auto_offset_reset="earliest",
                                    session_timeout_ms=6000, heartbeat_interval_ms=300)
        batch = asyncio.Lock()
        consumer.subscribe(["aio-work"], listener=FinishBatchFirst(batch))
        await consumer.start()
        try:
            while not stop.is_set():
                async with batch:
                    for tp, records in (await consumer.getmany(timeout_ms=100)).items():
                        for record in records:
                            try:
                                await consumer.commit({tp: record.offset + 1})
                            except (CommitFailedError, IllegalStateError, RebalanceInProgressError):
                                break  # fenced by a rebalance: the partition's next owner reads it again
                            counted.append((index, int(record.value)))
        finally:
            await consumer.stop()

    async def scenario() -> int:
        stops = [asyncio.Event() for _ in range(3)]
        tasks, total = [], 0
        for index, stop in enumerate(stops):  # members join one by one while records keep coming
            await asyncio.to_thread(produce, bootstrap, "aio-work", 200, 6, total)
            total += 200
            tasks.append(asyncio.create_task(member(index, stop)))
            await asyncio.sleep(1.0)
        stops[0].set()  # the first member leaves; the others take its partitions over
        await tasks[0]
        await asyncio.to_thread(produce, bootstrap, "aio-work", 200, 6, total)
        total += 200
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(counted) < total:
            await asyncio.sleep(0.1)
        for stop in stops[1:]:
            stop.set()
        await asyncio.gather(*tasks[1:])
        return total

    total = asyncio.run(asyncio.wait_for(scenario(), 60))
    values = [value for _, value in counted]
    assert sorted(values) == list(range(total)), [c for c in counted if values.count(c[1]) > 1]
    assert {index for index, _ in counted} == {0, 1, 2}  # every member had partitions at some time
    assert {index for index, value in counted if value >= total - 200} <= {1, 2}  # after the first left


class KafkaPythonMember(threading.Thread):
    """A kafka-python group member that counts a partition's polled records only once their
    offset commit succeeded."""

    def __init__(self, index: int, bootstrap: str, topic: str, counted: list, lock: threading.Lock):
        from kafka import KafkaConsumer

        super().__init__(daemon=True)
        self.index, self.counted, self.lock = index, counted, lock
        self.stop = threading.Event()
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id="kp-members",
                                      enable_auto_commit=False, auto_offset_reset="earliest",
                                      session_timeout_ms=6000, heartbeat_interval_ms=300,
                                      **KAFKA_PYTHON_MEMBER)
        subscribe_kafka_python(self.consumer, [topic])

    def run(self) -> None:
        from kafka import OffsetAndMetadata
        from kafka.errors import CommitFailedError, IllegalStateError, RebalanceInProgressError

        while not self.stop.is_set():
            for tp, records in self.consumer.poll(timeout_ms=100).items():
                try:
                    self.consumer.commit({tp: OffsetAndMetadata(records[-1].offset + 1, "", -1)})
                except (CommitFailedError, IllegalStateError, RebalanceInProgressError):
                    continue  # fenced by a rebalance: the partition's next owner reads it again
                with self.lock:
                    self.counted += [(self.index, int(r.value)) for r in records]
        self.consumer.close()


def test_three_kafka_python_members_rebalance_and_consume_every_record_once(server):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaPythonPartition

    bootstrap = server.bootstrap_servers
    create_topic(bootstrap, "kp-work", 6)
    counted: list[tuple[int, int]] = []  # (member, value)
    lock = threading.Lock()
    members, total = [], 0
    for index in range(3):  # members join one by one while records keep coming
        produce(bootstrap, "kp-work", 200, 6, start=total)
        total += 200
        members.append(KafkaPythonMember(index, bootstrap, "kp-work", counted, lock))
        members[-1].start()
        time.sleep(1.0)
        if index == 0:
            # kafka-python's first member can take longer than a second to join and fetch (its
            # first assignment may even come before the topic's metadata): let it consume before
            # the others join, so that each member really holds partitions at some time (on a
            # loaded machine that has taken over 20 s).
            eventually(lambda: bool(counted), "the first member consuming")
    members[0].stop.set()  # the first member leaves; the others take its partitions over
    members[0].join(10)
    produce(bootstrap, "kp-work", 200, 6, start=total)
    total += 200
    eventually(lambda: len(counted) >= total, "every record counted")
    for member in members[1:]:
        member.stop.set()
        member.join(10)
    assert sorted(value for _, value in counted) == list(range(total))
    assert {index for index, _ in counted} == {0, 1, 2}  # every member had partitions at some time
    assert {index for index, value in counted if value >= total - 200} <= {1, 2}  # after the first left
    check = KafkaConsumer(bootstrap_servers=bootstrap, group_id="kp-members", enable_auto_commit=False)
    committed = [check.committed(KafkaPythonPartition("kp-work", p)) for p in range(6)]
    check.close()
    assert sum(committed) == total


def test_a_member_id_handed_out_but_never_used_is_forgotten_after_its_session_timeout(tmp_path):
    clock = ManualClock(time.time_ns() // 1_000_000)
    with KafkaServer(tmp_path, port=0, config={**CONFIG, "group.min.session.timeout.ms": 1}, clock=clock) as srv:
        wire = Wire(srv.port)
        asked = wire.join("pending", None, session_ms=100)
        assert asked.error_code == MEMBER_ID_REQUIRED
        srv.check_timers()
        assert wire.join("pending", None, member_id=asked.member_id, session_ms=100).error_code == 0  # still known
        again = wire.join("pending", None, session_ms=100)
        clock.advance(101)  # past its session timeout
        srv.check_timers()
        assert wire.join("pending", None, member_id=again.member_id, session_ms=100).error_code == UNKNOWN_MEMBER_ID
        kept = wire.join("pending", None, session_ms=10_000)
        joined = wire.join("pending", None, member_id=kept.member_id, session_ms=10_000)
        assert joined.error_code == 0 and joined.member_id == kept.member_id


@pytest.mark.parametrize(("protocol_type", "protocol", "instance", "error"), [
    ("", "range", None, INCONSISTENT_GROUP_PROTOCOL),
    ("consumer", None, None, INCONSISTENT_GROUP_PROTOCOL),
    ("w" * 40_000, "range", None, INVALID_REQUEST),  # the group record's strings have an int16 length
    ("consumer", "w" * 40_000, None, INVALID_REQUEST),
    ("consumer", "range", "w" * 32_750, INVALID_REQUEST),  # the member id adds "-<uuid>" to it
])
def test_a_join_whose_group_record_could_not_be_written_is_refused(server, protocol_type, protocol, instance,
                                                                   error):
    from kafka.protocol.consumer import JoinGroupRequest, JoinGroupResponse

    protocols = [] if protocol is None else [JoinGroupRequest[6].JoinGroupRequestProtocol(name=protocol,
                                                                                           metadata=b"")]
    wire = Wire(server.port)
    joined = wire.call(JoinGroupRequest[6](group_id="refused", session_timeout_ms=6000, rebalance_timeout_ms=6000,
                                           member_id="", group_instance_id=instance, protocol_type=protocol_type,
                                           protocols=protocols), JoinGroupResponse[6])
    wire.close()
    assert joined.error_code == error


def test_a_group_whose_record_cannot_be_written_still_empties_and_takes_members(server):
    from kafka.protocol.admin import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse
    from kafka.protocol.consumer import LeaveGroupRequest, LeaveGroupResponse

    wire = Wire(server.port)
    joined = dynamic_join(wire, "unwritable")
    assert wire.sync("unwritable", joined.generation_id, joined.member_id, None, {joined.member_id: b""}).error_code == 0
    resource = IncrementalAlterConfigsRequest[1].AlterConfigsResource
    altered = wire.call(IncrementalAlterConfigsRequest[1](resources=[resource(
        resource_type=2, resource_name="__consumer_offsets", configs=[resource.AlterableConfig(
            name="max.message.bytes", config_operation=0, value="0")])], validate_only=False),
        IncrementalAlterConfigsResponse[1])
    assert altered.responses[0].error_code == 0  # no group record fits any more
    left = wire.call(LeaveGroupRequest[3](group_id="unwritable", members=[LeaveGroupRequest[3].MemberIdentity(
        member_id=joined.member_id, group_instance_id=None)]), LeaveGroupResponse[3])
    assert left.error_code == 0 and left.members[0].error_code == 0  # Kafka warns that the write failed
    again = dynamic_join(wire, "unwritable")
    assert again.error_code == 0 and again.generation_id == joined.generation_id + 2
    wire.close()

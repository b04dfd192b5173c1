"""Static group membership (KIP-345, `group.instance.id`) against `logstore.server.KafkaServer`:
a restarted static member gets its partitions back without the others rebalancing (librdkafka,
aiokafka and kafka-python), its old member id is fenced, it leaves by instance id, its session timeout still
removes it, and the group's instance ids survive a broker restart."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient
from kafka.protocol.consumer import (
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
)

from logstore.clock import ManualClock
from logstore.server import KafkaServer
from tests.server.group_wire import Wire
from tests.server.server_topics import KAFKA_PYTHON_MEMBER, create_topic, subscribe_kafka_python

FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID = 82, 25
CONFIG = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 1,
          "transaction.state.log.num.partitions": 1, "group.min.session.timeout.ms": 100}
pytestmark = pytest.mark.kafka_broker_config(CONFIG)


def test_a_rejoining_static_member_takes_its_old_place_and_fences_the_old_member_id(server):
    server.context.topics.create("t", 1)  # before any request: offsets of partitions the node lacks are refused
    wire = Wire(server.port)
    first = wire.join("static", "instance-1")
    assert first.error_code == 0 and first.leader == first.member_id  # static: no MEMBER_ID_REQUIRED round
    assert wire.sync("static", first.generation_id, first.member_id, "instance-1",
                     {first.member_id: b"assigned"}).assignment == b"assigned"
    second = wire.join("static", "instance-1")  # the same instance restarted: a new member id at once
    assert second.error_code == 0 and second.member_id != first.member_id
    assert second.generation_id == first.generation_id  # no rebalance
    assert second.leader == first.member_id and second.members == []  # nobody reassigns
    assert wire.sync("static", second.generation_id, second.member_id, "instance-1").assignment == b"assigned"
    assert wire.heartbeat("static", first.generation_id, first.member_id, "instance-1") == FENCED_INSTANCE_ID
    assert wire.heartbeat("static", second.generation_id, second.member_id, "instance-1") == 0
    commit = OffsetCommitRequest[7].OffsetCommitRequestTopic
    old_commit = wire.call(OffsetCommitRequest[7](
        group_id="static", generation_id_or_member_epoch=first.generation_id, member_id=first.member_id,
        group_instance_id="instance-1", topics=[commit(name="t", partitions=[
            commit.OffsetCommitRequestPartition(partition_index=0, committed_offset=5, committed_leader_epoch=-1,
                                                committed_metadata="")])]), OffsetCommitResponse[7])
    assert old_commit.topics[0].partitions[0].error_code == FENCED_INSTANCE_ID
    assert wire.sync("static", first.generation_id, first.member_id, "instance-1").error_code == FENCED_INSTANCE_ID
    identity = LeaveGroupRequest[3].MemberIdentity
    left = wire.call(LeaveGroupRequest[3](group_id="static", members=[
        identity(member_id="", group_instance_id="instance-1"),
        identity(member_id="", group_instance_id="never-joined")]), LeaveGroupResponse[3])
    assert [(m.group_instance_id, m.error_code) for m in left.members] == \
        [("instance-1", 0), ("never-joined", UNKNOWN_MEMBER_ID)]
    assert wire.heartbeat("static", second.generation_id, second.member_id, "instance-1") == UNKNOWN_MEMBER_ID
    wire.close()


def test_a_changed_subscription_rebalances_and_a_session_timeout_removes_a_static_member(tmp_path):
    clock = ManualClock(time.time_ns() // 1_000_000)
    with KafkaServer(tmp_path, port=0, config=CONFIG, clock=clock) as server:
        wire = Wire(server.port)
        first = wire.join("static-timeout", "instance-1", session_ms=300)
        wire.sync("static-timeout", first.generation_id, first.member_id, "instance-1", {first.member_id: b"a"})
        changed = wire.join("static-timeout", "instance-1", session_ms=300,
                            metadata=b"\x00\x00\x00\x00\x00\x01\x00\x01u\xff\xff\xff\xff")  # now subscribes to "u"
        assert changed.error_code == 0 and changed.generation_id == first.generation_id + 1
        assert changed.leader == changed.member_id and len(changed.members) == 1
        wire.sync("static-timeout", changed.generation_id, changed.member_id, "instance-1", {changed.member_id: b"b"})
        clock.advance(300)
        server.check_timers()
        assert wire.heartbeat("static-timeout", changed.generation_id, changed.member_id, "instance-1") == 0
        clock.advance(301)  # longer than the session since the heartbeat: the coordinator expires the member
        server.check_timers()
        assert wire.heartbeat("static-timeout", changed.generation_id, changed.member_id, "instance-1") == \
            UNKNOWN_MEMBER_ID
        wire.close()


def test_static_members_survive_a_broker_restart(tmp_path):
    with KafkaServer(tmp_path, port=0, config=CONFIG) as srv:
        wire = Wire(srv.port)
        first = wire.join("kept", "instance-1")
        wire.sync("kept", first.generation_id, first.member_id, "instance-1", {first.member_id: b"mine"})
        wire.close()
    with KafkaServer(tmp_path, port=0, config=CONFIG) as srv:
        wire = Wire(srv.port)
        again = wire.join("kept", "instance-1")
        assert again.error_code == 0 and again.generation_id == first.generation_id
        assert wire.sync("kept", again.generation_id, again.member_id, "instance-1").assignment == b"mine"
        wire.close()


def wait_for_assignment(consumers: list[Consumer], partitions: int, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for consumer in consumers:
            consumer.poll(0.05)
        if sum(len(c.assignment()) for c in consumers) == partitions and all(c.assignment() for c in consumers):
            return
    raise AssertionError(f"no full assignment: {[c.assignment() for c in consumers]}")


def test_a_restarted_librdkafka_static_member_gets_its_partitions_without_a_rebalance(server):
    bootstrap = server.bootstrap_servers
    create_topic(bootstrap, "static-work", 6)
    revoked: dict[str, int] = {"a": 0, "b": 0, "c": 0}

    def member(name: str) -> Consumer:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "static-group",
                             "group.instance.id": name, "session.timeout.ms": 10_000,
                             "heartbeat.interval.ms": 300, "auto.offset.reset": "earliest"})

        def on_revoke(_consumer, partitions):
            revoked[name] += 1

        consumer.subscribe(["static-work"], on_revoke=on_revoke)
        return consumer

    consumers = {name: member(name) for name in "abc"}
    wait_for_assignment(list(consumers.values()), 6)
    before = {name: sorted(tp.partition for tp in c.assignment()) for name, c in consumers.items()}
    settled = dict(revoked)
    consumers["b"].close()  # a static member sends no LeaveGroup
    consumers["b"] = member("b")
    wait_for_assignment(list(consumers.values()), 6)
    for _ in range(10):  # the others keep polling: a rebalance would call their on_revoke
        for consumer in consumers.values():
            consumer.poll(0.05)
    after = {name: sorted(tp.partition for tp in c.assignment()) for name, c in consumers.items()}
    assert after == before
    assert revoked["a"] == settled["a"] and revoked["c"] == settled["c"]
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept referenced until the answer arrives
    described = admin.describe_consumer_groups(["static-group"])["static-group"].result(10)
    assert sorted(m.group_instance_id for m in described.members) == ["a", "b", "c"]
    for consumer in consumers.values():
        consumer.close()


def test_a_restarted_aiokafka_static_member_gets_its_partitions_without_a_rebalance(server):
    from aiokafka import AIOKafkaConsumer
    from aiokafka.abc import ConsumerRebalanceListener

    bootstrap = server.bootstrap_servers
    create_topic(bootstrap, "aio-static", 4)

    class Counting(ConsumerRebalanceListener):
        def __init__(self) -> None:
            self.revoked = 0

        async def on_partitions_revoked(self, revoked) -> None:
            self.revoked += 1

        async def on_partitions_assigned(self, assigned) -> None:
            pass

    async def start(name: str, listener: Counting) -> AIOKafkaConsumer:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id="aio-static-group",
                                    group_instance_id=name, session_timeout_ms=10_000,
                                    heartbeat_interval_ms=300)
        await consumer.start()
        consumer.subscribe(["aio-static"], listener=listener)
        return consumer

    async def settle(consumers: list[AIOKafkaConsumer]) -> None:
        while sum(len(c.assignment()) for c in consumers) != 4 or not all(c.assignment() for c in consumers):
            await asyncio.gather(*(c.getmany(timeout_ms=50) for c in consumers))

    async def scenario() -> tuple[dict, dict, int, int]:
        stay, leave = Counting(), Counting()
        consumers = {"x": await start("x", stay), "y": await start("y", leave)}
        await settle(list(consumers.values()))
        before = {n: sorted(tp.partition for tp in c.assignment()) for n, c in consumers.items()}
        settled = stay.revoked
        await consumers["y"].stop()
        consumers["y"] = await start("y", Counting())
        await settle(list(consumers.values()))
        for _ in range(5):
            await asyncio.gather(*(c.getmany(timeout_ms=50) for c in consumers.values()))
        after = {n: sorted(tp.partition for tp in c.assignment()) for n, c in consumers.items()}
        for consumer in consumers.values():
            await consumer.stop()
        return before, after, settled, stay.revoked

    before, after, settled, revoked = asyncio.run(asyncio.wait_for(scenario(), 40))
    assert after == before
    assert revoked == settled


class KafkaPythonStaticMember(threading.Thread):
    """A kafka-python static member polling on its own thread; it keeps the partitions it was
    last given and counts its revocations."""

    def __init__(self, bootstrap: str, name: str):
        from kafka import ConsumerRebalanceListener, KafkaConsumer

        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.assigned: set[int] = set()
        self.revoked = 0
        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked) -> None:
                member.revoked += 1
                member.assigned = set()  # eager rebalancing: nothing is held until the next assignment

            def on_partitions_assigned(self, assigned) -> None:
                member.assigned = {tp.partition for tp in assigned}

        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id="kp-static-group",
                                      group_instance_id=name, session_timeout_ms=10_000,
                                      heartbeat_interval_ms=300, **KAFKA_PYTHON_MEMBER)
        subscribe_kafka_python(self.consumer, ["kp-static"], listener=Listener())

    def run(self) -> None:
        while not self.stop.is_set():
            self.consumer.poll(timeout_ms=50)
        self.consumer.close()  # a static member sends no LeaveGroup


def wait_for_partitions(members: list[KafkaPythonStaticMember], partitions: int, timeout_s: float = 30,
                        quiet_s: float = 1.0) -> None:
    """Wait until every member holds partitions, `partitions` in all, and nothing was revoked or
    assigned for `quiet_s` (so a rebalance still on its way is not taken for the settled state)."""
    deadline = time.monotonic() + timeout_s
    state, since = None, time.monotonic()
    while True:
        now_state = [(frozenset(m.assigned), m.revoked) for m in members]
        if now_state != state:
            state, since = now_state, time.monotonic()
        full = sum(len(m.assigned) for m in members) == partitions and all(m.assigned for m in members)
        if full and time.monotonic() - since >= quiet_s:
            return
        assert time.monotonic() < deadline, f"no settled full assignment: {[m.assigned for m in members]}"
        time.sleep(0.05)


def test_a_restarted_kafka_python_static_member_gets_its_partitions_without_a_rebalance(server):
    bootstrap = server.bootstrap_servers
    create_topic(bootstrap, "kp-static", 6)
    members = {name: KafkaPythonStaticMember(bootstrap, name) for name in "abc"}
    for member in members.values():
        member.start()
    wait_for_partitions(list(members.values()), 6)
    before = {name: m.assigned for name, m in members.items()}
    settled = {name: m.revoked for name, m in members.items()}
    members["b"].stop.set()
    members["b"].join(10)
    members["b"] = KafkaPythonStaticMember(bootstrap, "b")
    members["b"].start()
    wait_for_partitions(list(members.values()), 6)
    time.sleep(1)  # several heartbeats: a rebalance would reach the others and call their on_revoke
    assert {name: m.assigned for name, m in members.items()} == before
    assert members["a"].revoked == settled["a"] and members["c"].revoked == settled["c"]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_consumer_groups(["kp-static-group"])["kp-static-group"].result(10)
    assert sorted(m.group_instance_id for m in described.members) == ["a", "b", "c"]
    for member in members.values():
        member.stop.set()
        member.join(10)

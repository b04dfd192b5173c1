"""Committed offsets expire as Kafka expires them (`offsets.retention.minutes`), driven by the
server's clock: an Empty group's and a standalone group's offsets go, a Stable consumer group
keeps the offsets of topics it subscribes to, tombstones land in __consumer_offsets, and a
group left Empty without offsets is deleted, across a restart too."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from logstore.cli import main as logstore_main
from logstore.clock import ManualClock
from logstore.internal_topics.records import decode_offsets_record
from logstore.server import KafkaServer

DAY_MS = 24 * 3600 * 1000
RETENTION_MS = 7 * DAY_MS  # Kafka's default offsets.retention.minutes
LATER_MS = 30_000  # within the live members' session timeout (librdkafka's 45 s), so none expires
CONFIG = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 1,
          "transaction.state.log.num.partitions": 1}
INVALID = -1001  # librdkafka's "no committed offset"


def consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest"})


def subscribed(bootstrap: str, group: str, topic: str) -> Consumer:
    member = consumer(bootstrap, group)
    member.subscribe([topic])
    deadline = time.monotonic() + 15
    while not member.assignment() and time.monotonic() < deadline:
        member.poll(0.1)
    assert member.assignment()
    return member


def committed(bootstrap: str, group: str) -> dict[str, int]:
    reader = consumer(bootstrap, group)
    offsets = reader.committed([TopicPartition("a", 0), TopicPartition("b", 0)], timeout=10)
    reader.close()
    return {tp.topic: tp.offset for tp in offsets}


def commit(member: Consumer, **offsets: int) -> None:
    member.commit(offsets=[TopicPartition(t, 0, o) for t, o in offsets.items()], asynchronous=False)


def groups(admin: AdminClient) -> set[str]:
    return {g.group_id for g in admin.list_consumer_groups().result(10).valid}


def test_offsets_expire_after_the_retention_and_empty_groups_are_deleted(tmp_path):
    clock = ManualClock(time.time_ns() // 1_000_000)
    with KafkaServer(tmp_path, port=0, config=CONFIG, clock=clock) as srv:
        bootstrap = srv.bootstrap_servers
        producer = Producer({"bootstrap.servers": bootstrap})
        for topic in ("a", "b"):
            producer.produce(topic, value=b"x")
        assert producer.flush(10) == 0
        gone = subscribed(bootstrap, "gone", "a")
        commit(gone, a=1)
        gone.close()  # leaves: the group is Empty from now on
        standalone = consumer(bootstrap, "standalone")
        commit(standalone, a=1)
        active = subscribed(bootstrap, "active", "a")
        commit(active, a=1, b=1)  # b is not subscribed: its offset expires while the group runs
        clock.advance(LATER_MS)
        late = consumer(bootstrap, "late")
        commit(late, a=1)
        clock.advance(RETENTION_MS - LATER_MS + 1_000)  # past the retention of all but the late commit
        srv.check_timers()
        admin = AdminClient({"bootstrap.servers": bootstrap})
        assert groups(admin) == {"active", "late"}
        assert committed(bootstrap, "gone") == {"a": INVALID, "b": INVALID}
        assert committed(bootstrap, "standalone") == {"a": INVALID, "b": INVALID}
        assert committed(bootstrap, "late") == {"a": 1, "b": INVALID}
        assert committed(bootstrap, "active") == {"a": 1, "b": INVALID}
        active.close()
        standalone.close()
        late.close()
        records = [decode_offsets_record(r.key, r.value) for log in srv.manager.logs()
                   if log.topic == "__consumer_offsets" for r in log.records() if r.key]
    tombstones = {(d.name, d.key["group"], d.key.get("topic")) for d in records if d.value is None}
    assert {("OffsetCommit", "gone", "a"), ("GroupMetadata", "gone", None), ("OffsetCommit", "standalone", "a"),
            ("GroupMetadata", "standalone", None), ("OffsetCommit", "active", "b")} <= tombstones
    with KafkaServer(tmp_path, port=0, config=CONFIG, clock=clock) as srv:
        admin = AdminClient({"bootstrap.servers": srv.bootstrap_servers})
        assert groups(admin) == {"active", "late"}
        assert committed(srv.bootstrap_servers, "active") == {"a": 1, "b": INVALID}
        assert committed(srv.bootstrap_servers, "gone") == {"a": INVALID, "b": INVALID}
    assert logstore_main(["verify", "--deep", str(tmp_path)]) == 0

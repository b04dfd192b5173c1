"""librdkafka's KIP-848 consumer (confluent-kafka, `group.protocol=consumer`) against the
server: three members share a 6-partition topic, every record is consumed once and the
committed offsets end at the end offsets; when one member leaves, its partitions move to the
others and those get no revocation of the partitions they keep (their rebalance callbacks
say so); and all of it holds across a server restart in the middle of the run."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from logstore.server import KafkaServer

pytestmark = pytest.mark.slow

TOPIC, PARTITIONS, GROUP = "events", 6, "shared"
PER_PHASE = 60  # records produced before each phase, spread over the partitions
CONFIG = {"offsets.topic.num.partitions": 1, "group.consumer.heartbeat.interval.ms": 200, "num.partitions": 1}
TIMEOUT_S = 60
EXTRA: dict = {}


class Member:
    """One consumer of the group and what its rebalance callbacks told it."""

    def __init__(self, name: str, bootstrap: str, seen: list):
        self.name, self.seen = name, seen
        self.owned: set[int] = set()
        self.revoked: list[set[int]] = []
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "group.protocol": "consumer",
                                  "client.id": name, "auto.offset.reset": "earliest", "enable.auto.commit": False, **EXTRA})
        self.consumer.subscribe([TOPIC], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked)

    def _assigned(self, consumer, partitions) -> None:
        self.owned |= {p.partition for p in partitions}

    def _revoked(self, consumer, partitions) -> None:
        self.revoked.append({p.partition for p in partitions})
        self.owned -= {p.partition for p in partitions}

    def poll(self) -> None:
        """Poll once; a record is committed before the next poll, so a revocation (which runs in
        a poll) never hands on a record that was consumed but not committed."""
        message = self.consumer.poll(0.05)
        if message is None or message.error():
            return
        self.seen.append((message.partition(), message.offset()))
        commit = [TopicPartition(TOPIC, message.partition(), message.offset() + 1)]
        deadline = time.monotonic() + TIMEOUT_S
        while True:  # retried while the server restarts or the member's epoch is moving on
            try:
                self.consumer.commit(offsets=commit, asynchronous=False)
                return
            except KafkaException as exc:
                if time.monotonic() > deadline or exc.args[0].code() == KafkaError.UNKNOWN_MEMBER_ID:
                    raise
                time.sleep(0.05)


def produce(bootstrap: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(TOPIC, value=b"%d" % i, partition=i % PARTITIONS)
    assert producer.flush(20) == 0


def poll_until(members: list[Member], done, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not done():
        assert time.monotonic() < deadline, f"{what}: {[(m.name, sorted(m.owned)) for m in members]}"
        for member in members:
            member.poll()


def owned_by_all(members: list[Member]) -> bool:
    owned = [m.owned for m in members]
    return all(owned) and set().union(*owned) == set(range(PARTITIONS)) and sum(map(len, owned)) == PARTITIONS


def run(tmp_path: Path, restart: bool) -> None:
    seen: list[tuple[int, int]] = []
    server = KafkaServer(tmp_path, port=0, config=CONFIG).start()
    try:
        server.context.topics.create(TOPIC, PARTITIONS)
        bootstrap = server.bootstrap_servers
        produce(bootstrap, PER_PHASE)
        members = [Member(f"m{i}", bootstrap, seen) for i in range(3)]
        poll_until(members, lambda: owned_by_all(members) and len(seen) >= PER_PHASE // 2, "three members")
        if restart:
            port = server.port
            server.stop()
            server = KafkaServer(tmp_path, port=port, config=CONFIG).start()
            produce(bootstrap, PER_PHASE)
            poll_until(members, lambda: len(seen) >= 2 * PER_PHASE and owned_by_all(members), "after the restart")
        stayers, leaver = members[:2], members[2]
        before = {m.name: set(m.owned) for m in members}
        for m in stayers:
            m.revoked.clear()
        leaver.consumer.close()
        poll_until(stayers, lambda: owned_by_all(stayers), "the leaver's partitions moving")
        for m in stayers:
            assert before[m.name] <= m.owned, f"{m.name} lost partitions it had: {before[m.name]} -> {m.owned}"
            assert not set().union(*m.revoked) & before[m.name], f"{m.name} revoked {m.revoked}"
        assert before[leaver.name] <= stayers[0].owned | stayers[1].owned
        produced = (3 if restart else 2) * PER_PHASE
        produce(bootstrap, PER_PHASE)
        poll_until(stayers, lambda: len(seen) >= produced, "every record")
        assert sorted(seen) == sorted(set(seen)), "a record was consumed twice"
        per_partition = produced // PARTITIONS
        assert sorted(seen) == [(p, o) for p in range(PARTITIONS) for o in range(per_partition)]
        committed = stayers[0].consumer.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
        assert [tp.offset for tp in committed] == [per_partition] * PARTITIONS
        for m in stayers:
            m.consumer.close()
    finally:
        server.stop()


def test_three_members_share_a_topic_and_a_leaver_hands_on_only_its_partitions(tmp_path):
    run(tmp_path, restart=False)


def test_the_same_holds_across_a_server_restart_in_the_middle(tmp_path):
    run(tmp_path, restart=True)


def test_a_regex_subscription_takes_in_a_topic_created_later(tmp_path):
    with KafkaServer(tmp_path, port=0, config=CONFIG) as server:
        server.context.topics.create("ev-a", 2)
        server.context.topics.create("other", 1)
        consumer = Consumer({"bootstrap.servers": server.bootstrap_servers, "group.id": "rx",
                             "group.protocol": "consumer", "auto.offset.reset": "earliest"})
        consumer.subscribe(["^ev-.*"])
        producer = Producer({"bootstrap.servers": server.bootstrap_servers})
        topics: set[str] = set()
        deadline = time.monotonic() + TIMEOUT_S
        try:
            while topics != {"ev-a", "ev-b"}:
                assert time.monotonic() < deadline, topics
                if consumer.assignment() and "ev-b" not in server.context.topics:
                    server.context.topics.create("ev-b", 1)
                    for topic in ("ev-a", "ev-b", "other"):
                        producer.produce(topic, value=topic.encode())
                    assert producer.flush(10) == 0
                message = consumer.poll(0.1)
                if message is not None and not message.error():
                    topics.add(message.topic())
            assert {(tp.topic, tp.partition) for tp in consumer.assignment()} == {("ev-a", 0), ("ev-a", 1), ("ev-b", 0)}
        finally:
            consumer.close()

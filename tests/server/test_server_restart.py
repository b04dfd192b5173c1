"""Data, committed offsets and group membership survive a clean restart and a SIGKILL of
`logstore serve` (a subprocess), up to what acks promise; the directory then passes
`logstore verify`."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

from logstore.cli import main as logstore_main  # noqa: E402
from logstore.server import KafkaServer
from tests.server.server_topics import create_topic
from tests.server.test_server_static_members import Wire
from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT
PROPERTIES = "group.initial.rebalance.delay.ms=0\noffsets.topic.num.partitions=2\n" \
             "transaction.state.log.num.partitions=2\n"


def start_server(data_dir: Path, config: Path) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, "-m", "logstore", "serve", str(data_dir), "--listen",
                                "127.0.0.1:0", "--config-file", str(config)], cwd=ROOT, env=env,
                               stderr=subprocess.PIPE, text=True)
    line = process.stderr.readline()
    match = re.search(r" on (\S+:\d+) ", line)
    assert match, f"no address in {line!r}"
    return process, match.group(1)


def produce(bootstrap: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(start, start + count):
        producer.produce("durable", value=b"%d" % i, partition=i % 2)
    assert producer.flush(20) == 0


def read_and_commit(bootstrap: str, commit_at: int | None = None) -> tuple[list[int], list[int]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "survivor", "enable.auto.commit": False})
    if commit_at is not None:
        consumer.commit(offsets=[TopicPartition("durable", p, commit_at) for p in range(2)], asynchronous=False)
    committed = [tp.offset for tp in consumer.committed([TopicPartition("durable", p) for p in range(2)],
                                                        timeout=10)]
    consumer.assign([TopicPartition("durable", p, 0) for p in range(2)])
    values, last = [], time.monotonic() + 10  # up to 10 s for the first message, then 1.5 s of quiet
    while time.monotonic() - last < 1.5:
        message = consumer.poll(0.1)
        if message is not None and not message.error():
            values.append(int(message.value()))
            last = time.monotonic()
    consumer.close()
    return sorted(values), committed


@pytest.mark.slow
def test_data_and_offsets_survive_restart_and_sigkill(tmp_path):
    data_dir, config = tmp_path / "data", tmp_path / "server.properties"
    config.write_text("num.partitions=2\n" + PROPERTIES)
    process, bootstrap = start_server(data_dir, config)
    try:
        produce(bootstrap, 0, 100)
        assert read_and_commit(bootstrap, commit_at=20) == (list(range(100)), [20, 20])
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    assert (data_dir / ".kafka_cleanshutdown").exists()

    process, bootstrap = start_server(data_dir, config)
    try:
        assert read_and_commit(bootstrap) == (list(range(100)), [20, 20])
        produce(bootstrap, 100, 100)
        read_and_commit(bootstrap, commit_at=90)
        wire = Wire(int(bootstrap.rsplit(":", 1)[1]))
        joined = wire.join("static-survivor", "instance-1")
        wire.sync("static-survivor", joined.generation_id, joined.member_id, "instance-1",
                  {joined.member_id: b"assigned"})
        wire.close()
    finally:
        process.kill()  # SIGKILL: no clean shutdown, the logs are recovered at the next start
        process.wait(30)
    assert not (data_dir / ".kafka_cleanshutdown").exists()

    process, bootstrap = start_server(data_dir, config)
    try:
        assert read_and_commit(bootstrap) == (list(range(200)), [90, 90])
        wire = Wire(int(bootstrap.rsplit(":", 1)[1]))
        again = wire.join("static-survivor", "instance-1")  # the static member returns: no rebalance
        assert again.generation_id == joined.generation_id
        assert wire.sync("static-survivor", again.generation_id, again.member_id, "instance-1").assignment == \
            b"assigned"
        wire.close()
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    assert logstore_main(["verify", "--deep", str(data_dir)]) == 0


def test_the_coordinator_topics_keep_their_partition_count_when_the_config_changes(tmp_path):
    """As Kafka: offsets.topic.num.partitions and transaction.state.log.num.partitions only size
    the topics when they are created; a restart with other values finds every group and
    transaction where it was stored."""
    data_dir = tmp_path / "data"
    groups = [f"group-{i}" for i in range(8)]  # spread over several of the 5 partitions
    first = {"offsets.topic.num.partitions": 5, "transaction.state.log.num.partitions": 5}
    with KafkaServer(data_dir, port=0, config=first) as server:
        create_topic(server.bootstrap_servers, "kept", 1)  # offsets are committed for topics that exist
        for i, group in enumerate(groups):
            commit(server.bootstrap_servers, group, i + 1)
        producer = Producer({"bootstrap.servers": server.bootstrap_servers, "transactional.id": "txn-5"})
        producer.init_transactions(10)
        producer.begin_transaction()
        producer.produce("kept", value=b"pending")
        producer.flush(10)
    assert {p.name for p in data_dir.glob("__consumer_offsets-*")} == {f"__consumer_offsets-{p}" for p in range(5)}

    with KafkaServer(data_dir, port=0, config={"offsets.topic.num.partitions": 1,
                                               "transaction.state.log.num.partitions": 1}) as server:
        assert [committed(server.bootstrap_servers, group) for group in groups] == list(range(1, 9))
        commit(server.bootstrap_servers, groups[3], 40)
        assert committed(server.bootstrap_servers, groups[3]) == 40
        fenced = Producer({"bootstrap.servers": server.bootstrap_servers, "transactional.id": "txn-5"})
        fenced.init_transactions(10)  # the open transaction is found and aborted, not forgotten
        fenced.begin_transaction()
        fenced.produce("kept", value=b"after")
        fenced.commit_transaction(10)
        assert read_values(server.bootstrap_servers, "kept", committed=True) == [b"after"]
    with KafkaServer(data_dir, port=0, config=first) as server:
        assert committed(server.bootstrap_servers, groups[3]) == 40
    assert {p.name for p in data_dir.glob("__consumer_offsets-*")} == {f"__consumer_offsets-{p}" for p in range(5)}
    assert {p.name for p in data_dir.glob("__transaction_state-*")} == \
        {f"__transaction_state-{p}" for p in range(5)}


def commit(bootstrap: str, group: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.commit(offsets=[TopicPartition("kept", 0, offset)], asynchronous=False)
    consumer.close()


def committed(bootstrap: str, group: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    offset = consumer.committed([TopicPartition("kept", 0)], timeout=10)[0].offset
    consumer.close()
    return offset


def read_values(bootstrap: str, topic: str, *, committed: bool) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                         "isolation.level": "read_committed" if committed else "read_uncommitted"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = [m.value() for m in consumer.consume(10, 3) if not m.error()]
    consumer.close()
    return values

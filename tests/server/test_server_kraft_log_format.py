"""`__cluster_metadata-0` as the controller writes it, checked against Kafka 4.0's bytes built
independently (kafka-python's codec over Kafka's JSON definitions, and a hand-written control
record), and read back by `logstore dump --cluster-metadata-decoder` as kafka-dump-log prints it."""

from __future__ import annotations

import struct
import uuid
from pathlib import Path

from logstore.clock import ManualClock
from logstore.internal_topics import decode_metadata_record
from logstore.records import iter_batches
from logstore.records.varint import encode_unsigned_varint
from tests.cli.test_cli_dump import run_in_process
from tests.server.test_server_kraft_controller import SESSION_MS, beat, join, start
from tests.support.clock import NOW
from tests.support.kafka_definitions import (
    BrokerRegistrationChangeRecord,
    FeatureLevelRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)


def cluster_log(data_dir: Path) -> tuple[dict, uuid.UUID]:
    """A controller's log after two brokers join, a topic is created and broker 2 is fenced:
    {offset: (batch, record value)} and the topic id."""
    clock = ManualClock(NOW)
    controller = start(data_dir, clock)
    for broker_id in (1, 2):
        join(controller, broker_id, uuid.UUID(int=broker_id))
    topic_id = controller.create_topic("orders", 1, 2)
    clock.advance(SESSION_MS + 1)
    beat(controller, 1)
    controller.check_sessions()
    controller.snapshot()
    controller.close()
    data = (controller.log.dir / "00000000000000000000.log").read_bytes()
    return {r.offset: (b, r) for b in iter_batches(data) for r in b.records()}, topic_id


def test_records_are_byte_for_byte_what_kafkas_definitions_encode(tmp_path):
    records, topic_id = cluster_log(tmp_path)
    values = {offset: bytes(r.value) for offset, (b, r) in records.items() if not b.is_control}
    features = [FeatureLevelRecord(version=0, name=n, feature_level=level).to_frame(0)
                for n, level in (("metadata.version", 25), ("group.version", 1), ("transaction.version", 2))]
    assert [values[o] for o in (2, 3, 4)] == features
    listener = RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host="localhost", port=9091, security_protocol=0)
    feature = RegisterBrokerRecord.BrokerFeature(name="metadata.version", min_supported_version=7,
                                                 max_supported_version=25)
    register = RegisterBrokerRecord(version=3, broker_id=1, is_migrating_zk_broker=False,
                                    incarnation_id=uuid.UUID(int=1), broker_epoch=6, end_points=[listener],
                                    features=[feature], rack=None, fenced=True, in_controlled_shutdown=False,
                                    log_dirs=[uuid.UUID(int=101)])
    assert values[6] == register.to_frame(3)
    unfence = BrokerRegistrationChangeRecord(version=2, broker_id=1, broker_epoch=6, fenced=-1)
    assert values[7] == unfence.to_frame(2)
    assert values[10] == TopicRecord(version=0, name="orders", topic_id=topic_id).to_frame(0)
    replicas = decode_metadata_record(values[11]).value["replicas"]  # assignment starts at a random broker
    partition = PartitionRecord(version=2, partition_id=0, topic_id=topic_id, replicas=replicas, isr=replicas,
                                removing_replicas=[], adding_replicas=[], leader=replicas[0], leader_recovery_state=0,
                                leader_epoch=0, partition_epoch=0, directories=[uuid.UUID(int=b + 100) for b in replicas])
    assert values[11] == partition.to_frame(2)
    # broker 2 fenced: it leaves the ISR, and the leadership moves to 1 if it was 2's
    change = PartitionChangeRecord(version=2, partition_id=0, topic_id=topic_id, isr=[1],
                                   leader=1 if replicas[0] == 2 else -2)
    assert values[12] == change.to_frame(2)
    assert values[13] == BrokerRegistrationChangeRecord(version=2, broker_id=2, broker_epoch=8, fenced=1).to_frame(2)


def test_every_epoch_opens_with_a_leader_change_control_batch(tmp_path):
    records, _ = cluster_log(tmp_path)
    batch, record = records[0]
    assert batch.is_control and batch.partition_leader_epoch == 1
    assert bytes(record.key) == struct.pack(">hh", 0, 2)  # control key: version 0, LEADER_CHANGE
    voters = encode_unsigned_varint(2) + struct.pack(">i", 1) + b"\x00"  # one voter, no tagged fields
    assert bytes(record.value) == struct.pack(">hi", 0, 1) + voters + voters + b"\x00"
    assert all(b.partition_leader_epoch == 1 for b, _ in records.values())
    assert not records[1][0].is_control


def test_dump_decodes_the_log_and_the_snapshot_as_kafka_dump_log_does(tmp_path, capsys, monkeypatch):
    cluster_log(tmp_path)
    partition = tmp_path / "__cluster_metadata-0"
    log = run_in_process("dump", "--cluster-metadata-decoder", "--files", "00000000000000000000.log",
                         cwd=partition, capsys=capsys, monkeypatch=monkeypatch)
    assert log.returncode == 0, log.stderr
    lines = log.stdout.splitlines()
    assert lines[:2] == ["Dumping 00000000000000000000.log", "Log starting offset: 0"]
    assert "controlType: LEADER_CHANGE(2)" in lines[3]
    assert lines[6].endswith('payload: {"type":"FEATURE_LEVEL_RECORD","version":0,'
                             '"data":{"name":"metadata.version","featureLevel":25}}')
    assert any('"type":"REGISTER_BROKER_RECORD","version":3,"data":{"brokerId":2,' in line for line in lines)
    assert any('"type":"PARTITION_RECORD","version":2' in line for line in lines)
    assert any('"type":"BROKER_REGISTRATION_CHANGE_RECORD","version":2,"data":{"brokerId":2,"brokerEpoch":8,'
               '"fenced":1}' in line for line in lines)
    snapshot = next(partition.glob("*.checkpoint")).name
    dumped = run_in_process("dump", "--cluster-metadata-decoder", "--files", snapshot, cwd=partition, capsys=capsys,
                            monkeypatch=monkeypatch)
    assert dumped.returncode == 0, dumped.stderr
    assert "SnapshotHeader {\"version\":0," in dumped.stdout and "SnapshotFooter {\"version\":0}" in dumped.stdout
    assert '"type":"TOPIC_RECORD","version":0,"data":{"name":"orders"' in dumped.stdout

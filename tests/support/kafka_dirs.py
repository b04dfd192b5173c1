"""Partition and broker directories as Kafka leaves them, built from data we write, for the
operator-tool tests: follower appends of several batches, compacted topics, legacy messages
from kafka-python's builder, copies of Kafka's own sample."""

from __future__ import annotations

import shutil
from pathlib import Path

from logstore import Log
from logstore.clock import ManualClock
from logstore.records import Record, build_batch
from tests.support.clock import NOW
from tests.support.paths import KAFKA_SAMPLE

SAMPLES = KAFKA_SAMPLE


def kafka_sample(root: Path) -> Path:
    """A writable copy of Kafka's `plain` log directory under `root`; returns `plain-0`."""
    shutil.copytree(SAMPLES / "logdir", root)
    for path in root.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return root / "plain-0"


#: The ways `damaged_kafka_sample` damages the sample, as a crash or a bad disk would.
SAMPLE_DAMAGE = ("torn", "crc", "zeros")


def damaged_kafka_sample(root: Path, damage: str) -> Path:
    """`kafka_sample(root)` with the segment holding its recovery point (720) damaged 9000 bytes
    in: cut there ("torn"), one bit flipped there ("crc"), or zeros from there on; returns `plain-0`."""
    partition = kafka_sample(root)
    segment = partition / "00000000000000000633.log"
    data = bytearray(segment.read_bytes())
    if damage == "torn":
        data = data[:9000]
    elif damage == "crc":
        data[9000] ^= 0x01
    else:
        data[9000:] = bytes(len(data) - 9000)
    segment.write_bytes(bytes(data))
    return partition


def legacy_messages(first_offset: int, count: int, *, magic: int, compression: str) -> bytes:
    """One magic 0/1 entry from kafka-python's legacy builder: a compressed wrapper of `count`
    messages, or `count` plain messages back to back, offsets from `first_offset`."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    codes = {"none": 0, "gzip": 1}
    parts = []
    for group in ([range(count)] if compression != "none" else [[i] for i in range(count)]):
        builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codes[compression],
                                           batch_size=1 << 20)
        for i in group:
            offset = first_offset + i
            builder.append(offset if compression == "none" else i, timestamp=NOW + offset if magic else None,
                           key=b"k%d" % (offset % 7), value=b"value %d " % offset * 4)
        data = bytearray(builder.build())
        if compression != "none":  # the wrapper carries the last inner offset; inner ones are relative
            data[0:8] = (first_offset + count - 1).to_bytes(8, "big")
        parts.append(bytes(data))
    return b"".join(parts)


def follower_partition(path: Path, appends: int = 30) -> Path:
    """A partition written by follower appends of three batches each (v2, magic 1 compressed
    and magic 0 plain mixed), indexed every append: Kafka's entries name an append's last
    offset at the position of its first batch."""
    log = Log.open(path, {"index.interval.bytes": 1, "segment.bytes": 1 << 20}, clock=ManualClock(NOW))
    offset = 0
    for a in range(appends):
        kind = a % 3
        parts = []
        for _ in range(3):
            if kind == 0:
                records = [Record(offset + i, NOW + offset + i, b"k%d" % i, b"v" * 30) for i in range(4)]
                parts.append(build_batch(records, base_offset=offset, partition_leader_epoch=1))
            else:
                parts.append(legacy_messages(offset, 4, magic=kind % 2, compression="gzip" if kind == 1 else "none"))
            offset += 4
        log.append_as_follower(b"".join(parts))
    log.close()
    return path


def compacted_partition(path: Path, records: int = 600, keys: int = 150) -> Path:
    """A compacted topic of five-record batches cleaned by our cleaner: several segments, batches
    with holes, most records removed."""
    from compaction.cleaner import Cleaner

    config = {"cleanup.policy": "compact", "segment.bytes": 2048, "index.interval.bytes": 100,
              "file.delete.delay.ms": 0}
    log = Log.open(path, config, clock=ManualClock(NOW))
    for first in range(0, records, 5):
        log.append([(b"k%d" % (i % keys), b"value %d " % i * 3) for i in range(first, first + 5)])
    log.roll()
    Cleaner().clean(log)
    log.close()
    return path


def _partition_metadata(path: Path, n: int) -> None:
    import base64

    topic_id = base64.urlsafe_b64encode(n.to_bytes(16, "big")).rstrip(b"=").decode()
    (path / "partition.metadata").write_text(f"version: 0\ntopic_id: {topic_id}")


def broker_dir(root: Path) -> Path:
    """A Kafka 4 broker's log directory built from data we write: user topics (one compacted),
    __consumer_offsets-0..2 (offset commits, group metadata, tombstones), __transaction_state-0,
    __cluster_metadata-0 (metadata records, a leader-change control batch, a `.checkpoint`
    snapshot, quorum-state), meta.properties, partition.metadata everywhere, the root
    checkpoints, a partition being deleted and a stray file."""
    import uuid

    from logstore.internal_topics import (
        build_snapshot,
        encode_control_record,
        encode_metadata_record,
        encode_offsets_record,
        encode_transaction_log_record,
    )
    clock = ManualClock(NOW)
    root.mkdir(parents=True)
    for p in range(2):
        with Log.open(root / f"orders-{p}", {"segment.bytes": 4096}, clock=clock) as log:
            for i in range(100):
                log.append([(b"order-%d" % i, b"payload %d " % i * 5)])
    compacted_partition(root / "users-0", records=200, keys=40)
    for p in range(3):
        with Log.open(root / f"__consumer_offsets-{p}", {"cleanup.policy": "compact"}, clock=clock) as log:
            for i in range(20):
                group = {"group": f"group-{p}-{i % 4}"}
                log.append([encode_offsets_record("GroupMetadata", group, 3, {
                    "protocolType": "consumer", "generation": i, "members": []})])
                key, value = encode_offsets_record(
                    "OffsetCommit", {**group, "topic": "orders", "partition": i % 2}, 3,
                    {"offset": i * 5, "leaderEpoch": 0, "metadata": "", "commitTimestamp": NOW + i})
                log.append([(key, value), (key, None) if i % 7 == 6 else (key, value)])
    with Log.open(root / "__transaction_state-0", {"cleanup.policy": "compact"}, clock=clock) as log:
        for i in range(10):
            log.append([encode_transaction_log_record({"transactionalId": f"txn-{i % 3}"}, 0, {
                "producerId": 1000 + i % 3, "producerEpoch": i // 3, "transactionTimeoutMs": 60000,
                "transactionStatus": i % 4, "transactionPartitions": [],
                "transactionLastUpdateTimestampMs": NOW + i, "transactionStartTimestampMs": NOW})])
    metadata = root / "__cluster_metadata-0"
    with Log.open(metadata, clock=clock) as log:
        key, value = encode_control_record("LeaderChangeMessage", {
            "version": 0, "leaderId": 1, "voters": [{"voterId": 1}], "grantingVoters": [{"voterId": 1}]})
        log.append(build_control_batch_raw(key, value), origin="coordinator", leader_epoch=1)
        records = [("FeatureLevelRecord", 0, {"name": "metadata.version", "featureLevel": 22})]
        records += [("TopicRecord", 0, {"name": name, "topicId": uuid.UUID(int=n + 1)})
                    for n, name in enumerate(["orders", "users", "__consumer_offsets"])]
        log.append([(None, encode_metadata_record(kind, version, fields)) for kind, version, fields in records],
                   leader_epoch=1)
    (metadata / "00000000000000000005-0000000001.checkpoint").write_bytes(
        build_snapshot(records, epoch=1, last_contained_log_timestamp=NOW, timestamp=NOW))
    (metadata / "quorum-state").write_text(
        '{"leaderId":1,"leaderEpoch":1,"votedId":-1,"appliedOffset":0,"currentVoters":null,"data_version":1}')
    for n, path in enumerate(sorted(p for p in root.iterdir() if p.is_dir())):
        if path.name != "__cluster_metadata-0":
            _partition_metadata(path, n + 1)
    (root / "meta.properties").write_text(
        "#\n#Thu Nov 26 09:00:00 UTC 2026\nnode.id=1\ndirectory.id=J8aAPcfLQt2bqs1JT_rMgQ\n"
        "version=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\n")
    (root / "bootstrap.checkpoint").write_bytes(
        build_snapshot(records[:1], epoch=0, last_contained_log_timestamp=NOW, timestamp=NOW))
    (root / "cleaner-offset-checkpoint").write_text("0\n1\nusers 0 200\n")
    deleting = root / "orders-7.0123456789abcdef0123456789abcdef-delete"
    shutil.copytree(root / "orders-0", deleting)
    (root / "orders-0" / "notes.txt").write_text("left by an operator\n")
    return root


def build_control_batch_raw(key: bytes, value: bytes) -> bytes:
    """A one-record control batch with `key` and `value` (a KRaft control record)."""
    return build_batch([Record(0, NOW, key, value)], is_control=True)

"""Partition and broker directories as Kafka leaves them, built from data we write, for the
operator-tool tests: follower appends of several batches, compacted topics, legacy messages
from kafka-python's builder, copies of Kafka's own sample."""

from __future__ import annotations

import shutil
from pathlib import Path

from logstore import Log
from logstore.clock import ManualClock
from logstore.records import Record, build_batch

SAMPLES = Path("/work/shared/kafka-samples/plain")
NOW = 1_700_000_000_000


def kafka_sample(root: Path) -> Path:
    """A writable copy of Kafka's `plain` log directory under `root`; returns `plain-0`."""
    shutil.copytree(SAMPLES / "logdir", root)
    for path in root.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return root / "plain-0"


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

"""Log against Kafka's own files: byte-identical appends and read-only reads of a Kafka directory."""

import json
import os
import shutil
from pathlib import Path

import pytest

from logstore import Log
from logstore.clock import ManualClock
from logstore.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from logstore.records import iter_batches
from tests.support.files import directory_digest
from tests.support.paths import KAFKA_SAMPLE

SAMPLE = KAFKA_SAMPLE
CONFIG = {
    "segment.bytes": 16384,
    "index.interval.bytes": 4096,
    "compression.type": "producer",
    "message.timestamp.type": "CreateTime",
}


def _calls():
    calls = json.loads((SAMPLE / "inputs/plain-0.json").read_text())
    data = (SAMPLE / "inputs/plain-0.records").read_bytes()
    return calls, data


@pytest.fixture
def kafka_dir(tmp_path):
    root = tmp_path / "kafka"
    shutil.copytree(SAMPLE / "logdir", root)
    return root / "plain-0"


def _untouched(directory: Path) -> tuple[dict[str, str], dict[str, int]]:
    """What shows a change to `directory`: its digest and each file's modification time."""
    return directory_digest(directory), {p.name: p.stat().st_mtime_ns for p in directory.iterdir()}


def test_appending_kafkas_inputs_gives_kafkas_files_byte_for_byte(tmp_path):
    calls, data = _calls()
    # The sample's records carry timestamps around 1700000000000; keep the clock there so the
    # default message.timestamp.after.max.ms (1 hour) accepts them.
    clock = ManualClock(max(b.max_timestamp for b in iter_batches(data)))
    with Log.open(tmp_path / "plain-0", CONFIG, clock=clock) as log:
        for call in calls:
            assert call["method"] == "appendAsLeader"
            chunk = data[call["position"] : call["position"] + call["size"]]
            info = log.append(chunk, leader_epoch=call["leaderEpoch"])
            assert (info.first_offset, info.last_offset) == (
                call["result"]["firstOffset"],
                call["result"]["lastOffset"],
            )
            assert log.log_end_offset == call["result"]["logEndOffsetAfter"]
        assert [s.base_offset for s in log.segments] == [0, 105, 211, 318, 426, 531, 633]
    kafka = SAMPLE / "logdir/plain-0"
    compared = 0
    for name in sorted(os.listdir(kafka)):
        if name.endswith((".log", ".index", ".timeindex")):
            assert (tmp_path / "plain-0" / name).read_bytes() == (kafka / name).read_bytes(), name
            compared += 1
    assert compared == 21
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "replication-offset-checkpoint"):
        assert (tmp_path / name).read_bytes() == (SAMPLE / "logdir" / name).read_bytes(), name


def test_kafka_directory_opens_read_only_without_changing_a_byte(kafka_dir):
    before = _untouched(kafka_dir)
    parent_before = _untouched(kafka_dir.parent / "plain-0")
    log = Log.open(kafka_dir, CONFIG, read_only=True)
    records = list(log.records())
    log.offset_for_timestamp(1700000000500)
    log.read(300, 1000)
    log.close()
    assert _untouched(kafka_dir) == before == parent_before
    assert sorted(os.listdir(kafka_dir.parent)) == [
        "log-start-offset-checkpoint", "plain-0", "recovery-point-offset-checkpoint", "replication-offset-checkpoint"]
    assert [r.offset for r in records] == list(range(720))


def test_kafka_directory_reads_back_every_input_record(kafka_dir):
    _, data = _calls()
    expected = [(r.timestamp, r.key, r.value, r.headers) for b in iter_batches(data) for r in b.records()]
    with Log.open(kafka_dir, CONFIG, read_only=True) as log:
        assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (0, 720, 720)
        assert len(log.segments) == 7
        got = [(r.timestamp, r.key, r.value, r.headers) for r in log.records()]
        assert got == expected
        assert [r.offset for r in log.records(715)] == [715, 716, 717, 718, 719]


def test_kafka_directory_answers_offset_for_timestamp_as_kafka(kafka_dir):
    with Log.open(kafka_dir, CONFIG, read_only=True) as log:
        stamped = [(r.offset, r.timestamp) for r in log.records()]
        # Kafka: the first segment whose largest timestamp reaches the target, then the first
        # record in it at or after the target; segments before it hold only smaller timestamps,
        # so that is the smallest offset whose timestamp is >= target.
        targets = sorted({t + d for _, t in stamped for d in (-1, 0, 1)})
        for target in targets:
            expected = next(((t, o) for o, t in stamped if t >= target), None)
            found = log.offset_for_timestamp(target)
            assert (None if found is None else (found.timestamp, found.offset)) == expected, target
        # Pinned answers (ListOffsets on the Kafka broker that wrote the sample).
        assert log.offset_for_timestamp(0) == (1700000000000, 0, 0)
        assert log.offset_for_timestamp(1700000719001) is None
        # Kafka answers EARLIEST/LATEST with the epoch from its leader-epoch cache.
        assert log.offset_for_timestamp(EARLIEST_TIMESTAMP) == (-1, 0, 0)
        assert log.offset_for_timestamp(LATEST_TIMESTAMP) == (-1, 720, 0)
        assert log.offset_for_timestamp(MAX_TIMESTAMP) == (1700000719000, 719, 0)


def test_kafka_directory_opens_writable_and_appends_continue(kafka_dir):
    calls, data = _calls()
    clock = ManualClock(1700000720000)
    with Log.open(kafka_dir, CONFIG, clock=clock) as log:
        assert log.log_end_offset == 720
        first = calls[0]
        info = log.append(data[first["position"] : first["position"] + first["size"]])
        assert info.first_offset == 720
    with Log.open(kafka_dir, CONFIG, clock=clock) as log:
        assert log.log_end_offset == 721
        assert [r.offset for r in log.records(719)] == [719, 720]


def test_every_kafka_file_but_partition_metadata_is_identical_with_producer_state_and_epochs(tmp_path):
    calls, data = _calls()
    clock = ManualClock(max(b.max_timestamp for b in iter_batches(data)))
    with Log.open(tmp_path / "plain-0", CONFIG, clock=clock) as log:
        for call in calls:
            log.append(data[call["position"] : call["position"] + call["size"]], leader_epoch=call["leaderEpoch"])
    kafka = SAMPLE / "logdir/plain-0"
    ours = tmp_path / "plain-0"
    names = sorted(set(os.listdir(kafka)) - {"partition.metadata"})
    assert sorted(set(os.listdir(ours)) - {".lock"}) == names  # .lock: our single-owner lock file
    for name in names:
        assert (ours / name).read_bytes() == (kafka / name).read_bytes(), name


def test_idempotent_retry_is_answered_with_the_first_offsets(tmp_path):
    from logstore.records import Record, build_batch

    clock = ManualClock(1700000000000)
    data = build_batch([Record(0, 1700000000000, b"k", b"v")] * 1, producer_id=7, producer_epoch=0, base_sequence=0)
    with Log.open(tmp_path / "t-0", clock=clock) as log:
        log.append([(b"a", b"b")])
        first = log.append(data)
        again = log.append(data)
        assert (again.first_offset, again.last_offset, again.valid_bytes) == (first.first_offset, first.last_offset, 0)
        assert log.log_end_offset == 2

"""`logstore dump` with Kafka's internal-topic decoders and on KRaft `.checkpoint` snapshots:
the text Kafka 4.0's DumpLogSegments prints, and the structured `--json`."""

from __future__ import annotations

import json
import struct
import uuid
from pathlib import Path

import pytest

from logstore.internal_topics import (
    build_snapshot,
    encode_control_record,
    encode_metadata_record,
    encode_offsets_record,
    encode_transaction_log_record,
)
from logstore.records import Record, build_batch
from tests.cli.test_cli_dump import run_in_process

SEGMENT = "00000000000000000000.log"
TOPIC_ID = uuid.UUID("0f0e0d0c-0b0a-0908-0706-050403020100")
TOPIC_ID_TEXT = "Dw4NDAsKCQgHBgUEAwIBAA"  # Kafka's base64 form of TOPIC_ID
T = 1_700_000_000_000


def dump(directory: Path, *args: str, capsys, monkeypatch):
    return run_in_process("dump", *args, cwd=directory, capsys=capsys, monkeypatch=monkeypatch)


@pytest.fixture
def offsets_segment(tmp_path: Path) -> Path:
    """A __consumer_offsets segment: an offset commit, its tombstone and an unknown record type."""
    commit = encode_offsets_record("OffsetCommit", {"group": "g1", "topic": "orders", "partition": 3}, 3,
                                   {"offset": 42, "leaderEpoch": 5, "metadata": "", "commitTimestamp": T})
    tombstone = (commit[0], None)
    unknown = (struct.pack(">h", 99) + b"??", b"\x00\x00")
    records = [Record(i, T, key, value) for i, (key, value) in enumerate((commit, tombstone, unknown))]
    (tmp_path / SEGMENT).write_bytes(build_batch(records))
    return tmp_path


def test_offsets_decoder_prints_what_kafka_prints(offsets_segment: Path, capsys, monkeypatch):
    result = dump(offsets_segment, "--offsets-decoder", "--files", SEGMENT, capsys=capsys,
                  monkeypatch=monkeypatch)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"Dumping {SEGMENT}" and lines[2].startswith("baseOffset: 0 lastOffset: 2 count: 3")
    meta = f"CreateTime: {T} keySize: %d valueSize: %d sequence: -1 headerKeys: []"
    key = '{"type":"1","data":{"group":"g1","topic":"orders","partition":3}}'
    assert lines[3:] == [
        f"| offset: 0 {meta % (18, 24)} key: {key} payload: "
        f'{{"version":"3","data":{{"offset":42,"leaderEpoch":5,"metadata":"","commitTimestamp":{T}}}}}',
        f"| offset: 1 {meta % (18, -1)} key: {key} payload: <DELETE>",
        f"| offset: 2 {meta % (4, 2)} key: Unknown record type 99 at offset 2, skipping.",
    ]


def test_offsets_decoder_json_nests_the_decoded_records(offsets_segment: Path, capsys, monkeypatch):
    result = dump(offsets_segment, "--offsets-decoder", "--json", SEGMENT, capsys=capsys,
                  monkeypatch=monkeypatch)
    assert result.returncode == 0, result.stderr
    (batch,) = [json.loads(line) for line in result.stdout.splitlines()]
    first, tombstone, unknown = batch["records"]
    assert first["decoded"] == {
        "topic": "__consumer_offsets", "type": 1, "name": "OffsetCommit",
        "key": {"group": "g1", "topic": "orders", "partition": 3}, "version": 3,
        "value": {"offset": 42, "leaderEpoch": 5, "metadata": "", "commitTimestamp": T}}
    assert tombstone["decoded"]["value"] is None and tombstone["decoded"]["version"] is None
    assert unknown["decodeError"] == "unknown __consumer_offsets record type 99 (position 0)"
    assert "key" not in first and "payload" not in first


def test_transaction_log_decoder_prints_what_kafka_prints(tmp_path: Path, capsys, monkeypatch):
    key, value = encode_transaction_log_record({"transactionalId": "tx-1"}, 0, {
        "producerId": 7, "producerEpoch": 1, "transactionTimeoutMs": 60000, "transactionStatus": 1,
        "transactionPartitions": [{"topic": "orders", "partitionIds": [0, 2]}],
        "transactionLastUpdateTimestampMs": T, "transactionStartTimestampMs": T})
    (tmp_path / SEGMENT).write_bytes(build_batch([Record(0, T, key, value), Record(1, T, key, None)]))
    result = dump(tmp_path, "--transaction-log-decoder", "--skip-record-metadata", SEGMENT, capsys=capsys,
                  monkeypatch=monkeypatch)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[3:] == [
        "| key: transaction_metadata::transactionalId=tx-1 payload: producerId:7,producerEpoch:1,"
        f"state=Ongoing,partitions=[orders-0,orders-2],txnLastUpdateTimestamp={T},txnTimeoutMs=60000",
        "| key: transaction_metadata::transactionalId=tx-1 payload: <DELETE>",
    ]
    result = dump(tmp_path, "--transaction-log-decoder", "--json", SEGMENT, capsys=capsys,
                  monkeypatch=monkeypatch)
    records = json.loads(result.stdout)["records"]
    assert records[0]["decoded"]["value"]["transactionPartitions"] == [{"topic": "orders", "partitionIds": [0, 2]}]
    assert records[1]["decoded"]["key"] == {"transactionalId": "tx-1"}


def metadata_log() -> bytes:
    """A __cluster_metadata segment: a LeaderChange control batch, then two metadata records
    and one that does not decode."""
    leader_change = encode_control_record("LEADER_CHANGE", {
        "version": 0, "leaderId": 1, "voters": [{"voterId": 1}], "grantingVoters": [{"voterId": 1}]})
    control = build_batch([Record(0, T, *leader_change)], is_control=True, partition_leader_epoch=1)
    values = [encode_metadata_record("FeatureLevelRecord", 0, {"name": "metadata.version", "featureLevel": 25}),
              encode_metadata_record("TopicRecord", 0, {"name": "orders", "topicId": TOPIC_ID}),
              b"\x01\x63\x00"]
    data = build_batch([Record(1 + i, T, None, v) for i, v in enumerate(values)], base_offset=1,
                       partition_leader_epoch=1)
    return control + data


def test_cluster_metadata_decoder_prints_what_kafka_prints(tmp_path: Path, capsys, monkeypatch):
    (tmp_path / SEGMENT).write_bytes(metadata_log())
    result = dump(tmp_path, "--cluster-metadata-decoder", SEGMENT, capsys=capsys, monkeypatch=monkeypatch)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[2].startswith("baseOffset: 0 lastOffset: 0 count: 1") and "isControl: true" in lines[2]
    assert lines[3] == (f"| offset: 0 CreateTime: {T} keySize: 4 valueSize: 19 sequence: -1 headerKeys: []"
                        " controlType: LEADER_CHANGE(2)")
    meta = f"CreateTime: {T} keySize: -1 valueSize: %d sequence: -1 headerKeys: []"
    assert lines[5:] == [
        f"| offset: 1 {meta % 23} payload: "
        '{"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":"metadata.version","featureLevel":25}}',
        f"| offset: 2 {meta % 27} payload: "
        f'{{"type":"TOPIC_RECORD","version":0,"data":{{"name":"orders","topicId":"{TOPIC_ID_TEXT}"}}}}',
        f"| offset: 3 {meta % 3} payload: Error at 3, skipping. unknown metadata record type 99 (position 1)",
    ]


def test_kraft_snapshot_checkpoint_dumps_with_its_header_and_footer(tmp_path: Path, capsys, monkeypatch):
    name = "00000000000000000004-0000000002.checkpoint"
    snapshot = build_snapshot([("TopicRecord", 0, {"name": "orders", "topicId": TOPIC_ID})], epoch=2,
                              last_contained_log_timestamp=T, timestamp=T)
    (tmp_path / name).write_bytes(snapshot)
    (tmp_path / "bootstrap.checkpoint").write_bytes(snapshot)
    result = dump(tmp_path, "--cluster-metadata-decoder", "--files", f"{name},bootstrap.checkpoint",
                  capsys=capsys, monkeypatch=monkeypatch)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:3] == [f"Dumping {name}", "Snapshot end offset: 4, epoch: 2",
                         "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1"
                         " producerEpoch: -1 partitionLeaderEpoch: 2 isTransactional: false isControl: true"
                         " deleteHorizonMs: OptionalLong.empty" + lines[2][lines[2].index(" position: 0 "):]]
    meta = f"CreateTime: {T} keySize: %d valueSize: %d sequence: -1 headerKeys: []"
    assert [line for line in lines if line.startswith("|")][:3] == [
        f'| offset: 0 {meta % (4, 11)} SnapshotHeader {{"version":0,"lastContainedLogTimestamp":{T}}}',
        f"| offset: 1 {meta % (-1, 27)} payload: "
        f'{{"type":"TOPIC_RECORD","version":0,"data":{{"name":"orders","topicId":"{TOPIC_ID_TEXT}"}}}}',
        f'| offset: 2 {meta % (4, 3)} SnapshotFooter {{"version":0}}',
    ]
    assert "KRaft bootstrap snapshot" in lines
    result = dump(tmp_path, "--json", "--deep-iteration", name, capsys=capsys, monkeypatch=monkeypatch)
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    assert objects[0] == {"type": "kraft_snapshot", "file": name, "endOffset": 4, "epoch": 2}
    assert objects[1]["records"][0]["control"] == {"version": 0, "lastContainedLogTimestamp": T}


def test_misnamed_checkpoint_and_two_decoders_are_usage_errors(tmp_path: Path, capsys, monkeypatch):
    (tmp_path / "snap.checkpoint").write_bytes(b"")
    result = dump(tmp_path, "snap.checkpoint", capsys=capsys, monkeypatch=monkeypatch)
    assert result.returncode == 2 and "a KRaft snapshot is named by its end offset and epoch" in result.stderr
    result = dump(tmp_path, "--offsets-decoder", "--cluster-metadata-decoder", SEGMENT, capsys=capsys,
                  monkeypatch=monkeypatch)
    assert result.returncode == 2 and "not allowed with argument" in result.stderr


def test_an_offsets_record_without_a_key_is_one_problem_line_and_the_dump_goes_on(tmp_path: Path, capsys,
                                                                                 monkeypatch):
    first = build_batch([Record(0, T, None, b"x")])
    (tmp_path / SEGMENT).write_bytes(first + build_batch([Record(1, T, None, b"y")], base_offset=1))
    result = dump(tmp_path, "--offsets-decoder", SEGMENT, capsys=capsys, monkeypatch=monkeypatch)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"logstore: {SEGMENT}: position {p}: cannot decode the batch's records: Failed to decode message at "
        f"offset {o} using offset topic decoder (message had a missing key)" for o, p in ((0, 0), (1, len(first)))]
    result = dump(tmp_path, "--offsets-decoder", "--json", SEGMENT, capsys=capsys, monkeypatch=monkeypatch)
    assert json.loads(result.stdout.splitlines()[0])["records"][0]["decodeError"] == "__consumer_offsets record has a null key"

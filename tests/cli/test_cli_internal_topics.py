"""`consume --decode` and `stats --decode` on internal-topic partitions."""

from __future__ import annotations

import json
import struct
import uuid
from pathlib import Path

from logstore.internal_topics import encode_metadata_record, encode_offsets_record
from logstore.records import Record, build_batch
from tests.cli.test_cli_dump import run_in_process

T = 1_700_000_000_000


def write_partition(data_dir: Path, name: str, records: list[tuple[bytes | None, bytes | None]]) -> Path:
    path = data_dir / name
    path.mkdir(parents=True)
    batch = build_batch([Record(i, T, key, value) for i, (key, value) in enumerate(records)])
    (path / "00000000000000000000.log").write_bytes(batch)
    return path


def offsets_records() -> list[tuple[bytes | None, bytes | None]]:
    commit = encode_offsets_record("OffsetCommit", {"group": "g1", "topic": "orders", "partition": 0}, 3,
                                   {"offset": 42, "metadata": "", "commitTimestamp": T})
    return [commit, (commit[0], None), (struct.pack(">h", 99), b"")]


def test_consume_decode_adds_the_decoded_record(tmp_path: Path, capsys, monkeypatch):
    write_partition(tmp_path, "__consumer_offsets-7", offsets_records())
    result = run_in_process("consume", ".", "__consumer_offsets-7", "--decode", cwd=tmp_path,
                            capsys=capsys, monkeypatch=monkeypatch)
    assert result.returncode == 0, result.stderr
    first, tombstone, unknown = [json.loads(line) for line in result.stdout.splitlines()]
    assert first["offset"] == 0 and first["decoded"] == {
        "topic": "__consumer_offsets", "type": 1, "name": "OffsetCommit",
        "key": {"group": "g1", "topic": "orders", "partition": 0}, "version": 3,
        "value": {"offset": 42, "leaderEpoch": -1, "metadata": "", "commitTimestamp": T}}
    assert tombstone["value"] is None and tombstone["decoded"]["value"] is None
    assert unknown["decodeError"] == "unknown __consumer_offsets record type 99 (position 0)"


def test_consume_decode_on_a_user_topic_is_a_usage_error(tmp_path: Path, capsys, monkeypatch):
    write_partition(tmp_path, "orders-0", [(b"k", b"v")])
    result = run_in_process("consume", ".", "orders-0", "--decode", cwd=tmp_path,
                            capsys=capsys, monkeypatch=monkeypatch)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().endswith("--decode: orders is not an internal topic "
                                          "(__consumer_offsets, __transaction_state, __cluster_metadata)")


def test_stats_decode_counts_internal_records_by_type(tmp_path: Path, capsys, monkeypatch):
    write_partition(tmp_path, "__consumer_offsets-0", offsets_records())
    write_partition(tmp_path, "__cluster_metadata-0", [
        (None, encode_metadata_record("FeatureLevelRecord", 0, {"name": "metadata.version", "featureLevel": 25})),
        (None, encode_metadata_record("TopicRecord", 0, {"name": "orders", "topicId": uuid.UUID(int=1)}))])
    write_partition(tmp_path, "orders-0", [(b"k", b"v")])
    result = run_in_process("stats", "--json", "--decode", ".", cwd=tmp_path, capsys=capsys,
                            monkeypatch=monkeypatch)
    assert result.returncode == 0, result.stderr
    rows = {row["partition"]: row for row in map(json.loads, result.stdout.splitlines())}
    assert rows["__consumer_offsets-0"]["recordTypes"] == {
        "OffsetCommit": 1, "OffsetCommit/tombstone": 1, "undecodable": 1}
    assert rows["__cluster_metadata-0"]["recordTypes"] == {"FeatureLevelRecord": 1, "TopicRecord": 1}
    assert "recordTypes" not in rows["orders-0"]
    result = run_in_process("stats", "--decode", ".", cwd=tmp_path, capsys=capsys, monkeypatch=monkeypatch)
    header, *lines = result.stdout.splitlines()
    assert header.split()[-1] == "TYPES"
    assert any(line.startswith("__consumer_offsets-0 ") and
               line.endswith(" OffsetCommit:1,OffsetCommit/tombstone:1,undecodable:1") for line in lines)
    assert any(line.startswith("orders-0 ") and line.endswith(" -") for line in lines)

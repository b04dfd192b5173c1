"""The other `logstore` subcommands driven as a user would: stats, recover, produce, consume,
plus the command line as a whole (help, usage errors, subcommand discovery)."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from logstore.log import Log
from logstore.records import Record, build_batch
from tests.cli.test_cli_dump import run, run_in_process
from tests.support.files import directory_digest

SUBCOMMANDS = ("consume", "dump", "produce", "recover", "stats", "verify")


def produce(data_dir: Path, target: str, text: str, *args: str) -> subprocess.CompletedProcess:
    """`logstore produce` with `text` on stdin."""
    return subprocess.run([sys.executable, "-m", "logstore", "produce", str(data_dir), target, *args],
                          input=text, capture_output=True, text=True, check=False)


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_subcommand_has_help_with_an_example(command: str, capsys):
    from logstore.cli import main

    assert main([command, "--help"]) == 0
    text = capsys.readouterr().out
    assert "example:" in text and f"logstore {command}" in text and "exit codes:" in text


def test_subcommands_are_discovered_from_their_modules():
    from logstore.cli import build_parser

    choices = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert set(SUBCOMMANDS) <= set(choices)


def test_usage_errors_exit_2(tmp_path: Path, capsys, monkeypatch):
    def cli(*args: str) -> subprocess.CompletedProcess:
        return run_in_process(*args, cwd=tmp_path, capsys=capsys, monkeypatch=monkeypatch)

    assert cli().returncode == 2
    assert cli("frobnicate").returncode == 2
    assert cli("consume", str(tmp_path), "orders-0", "--from", "-3").returncode == 2
    result = cli("consume", str(tmp_path), "orders")
    assert result.returncode == 2 and result.stderr.startswith("logstore: error: 'orders' is not a partition")


def test_stats_of_the_kafka_sample(kafka_partition: Path):
    before = directory_digest(kafka_partition.parent)
    result = run("stats", "--json", str(kafka_partition.parent), cwd=kafka_partition)
    assert result.returncode == 0, result.stderr
    (row,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert row["partition"] == "plain-0" and row["segments"] == 7 and row["records"] == 720
    assert (row["startOffset"], row["endOffset"]) == (0, 720)
    assert row["keysApprox"] + row["nullKeys"] == 720
    assert row["compression"] == {"gzip": 35, "lz4": 34, "none": 103, "snappy": 34, "zstd": 34}
    assert (row["firstTimestamp"], row["lastTimestamp"]) == (1700000000000, 1700000719000)
    table = run("stats", str(kafka_partition), cwd=kafka_partition).stdout.splitlines()
    assert table[0].split()[:3] == ["PARTITION", "SEGMENTS", "BYTES"]
    assert table[1].split()[:2] == ["plain-0", "7"]
    assert directory_digest(kafka_partition.parent) == before


def test_recover_reports_on_a_copy_and_changes_nothing(kafka_partition: Path):
    with (kafka_partition / "00000000000000000633.log").open("ab") as f:
        f.write(b"torn")
    before = directory_digest(kafka_partition.parent)
    result = run("recover", str(kafka_partition), cwd=kafka_partition)
    assert result.returncode == 1, result.stderr
    assert result.stdout == (f"{kafka_partition}/00000000000000000633.log: would truncate 4 bytes at position 13467\n")
    assert directory_digest(kafka_partition.parent) == before


def test_recover_in_place_truncates_and_drops_later_segments(kafka_partition: Path):
    log = kafka_partition / "00000000000000000531.log"
    data = bytearray(log.read_bytes())
    data[20] ^= 0xFF  # inside the first batch's CRC-covered bytes
    log.write_bytes(bytes(data))
    # below the checkpointed recovery point (720), where Kafka does not look and only --full recovers
    named = run("recover", str(kafka_partition), cwd=kafka_partition)
    assert (named.returncode, named.stdout) == (1, f"{log}: damaged at position 0, below the recovery point "
                                                   "720 (Kafka's recovery does not look there; --full recovers it)\n")
    result = run("recover", "--in-place", "--full", "--json", str(kafka_partition), cwd=kafka_partition)
    assert result.returncode == 1, result.stderr
    changes = {(c["file"], c["action"]) for c in map(json.loads, result.stdout.splitlines())}
    assert ("00000000000000000531.log", "truncate") in changes
    assert ("00000000000000000633.log", "delete") in changes
    assert log.stat().st_size == 0 and not (kafka_partition / "00000000000000000633.log").exists()
    assert run("verify", str(kafka_partition), cwd=kafka_partition).returncode == 0
    assert run("recover", str(kafka_partition), cwd=kafka_partition).stdout == f"{kafka_partition}: nothing to recover\n"


def test_recover_in_place_rebuilds_a_corrupt_txn_index(tmp_path: Path):
    from logstore.records import build_control_batch

    part = tmp_path / "data" / "txn-0"
    with Log.open(part) as log:
        log.append(build_batch([Record(0, 1, b"k", b"v")], producer_id=1, producer_epoch=0,
                               base_sequence=0, is_transactional=True))
        log.append(build_control_batch("abort", producer_id=1, producer_epoch=0,
                                       coordinator_epoch=0, timestamp=1), origin="coordinator")
    index = part / "00000000000000000000.txnindex"
    sound = index.read_bytes()
    index.write_bytes(b"\x00\x09" + sound[2:])  # version 9: "unexpected aborted transaction version"
    result = run("recover", "--in-place", str(part), cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert f"{index}: rebuilt" in result.stdout
    assert index.read_bytes() == sound


def test_recover_of_a_clean_log_and_of_a_non_log(kafka_partition: Path, tmp_path: Path):
    assert run("recover", str(kafka_partition.parent), cwd=kafka_partition).returncode == 0
    (tmp_path / "notes").mkdir()
    result = run("recover", str(tmp_path / "notes"), cwd=tmp_path)
    assert result.returncode == 3 and "is not a log directory" in result.stderr


def test_produce_then_consume_round_trip(tmp_path: Path):
    data_dir = tmp_path / "data"
    lines = [json.dumps({"key": f"k{i}", "value": f"v{i}", "timestamp": 1000 + i}) for i in range(5)]
    lines.append(json.dumps({"value": None, "headers": {"h": "x", "n": None}, "timestamp": 2000}))
    result = produce(data_dir, "orders-0", "\n".join(lines) + "\n", "--batch-size", "2",
                     "--compression", "gzip")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "appended 6 records to orders-0 at offsets 0..5\n"
    assert produce(data_dir, "orders-0", "a\tb\nno-key\n", "--format", "tsv").returncode == 0
    consumed = [json.loads(line) for line in run("consume", str(data_dir), "orders-0", cwd=tmp_path).stdout.splitlines()]
    assert [r["offset"] for r in consumed] == list(range(8))
    assert consumed[0] == {"offset": 0, "timestamp": 1000, "key": "k0", "value": "v0", "headers": []}
    assert consumed[5]["headers"] == [["h", "x"], ["n", None]] and consumed[5]["value"] is None
    assert (consumed[6]["key"], consumed[6]["value"], consumed[7]["key"]) == ("a", "b", None)
    later = run("consume", str(data_dir), "orders-0", "--from-time", "1003", "--max-records", "2",
                "--base64", cwd=tmp_path)
    assert [json.loads(line)["key"] for line in later.stdout.splitlines()] == ["azM=", "azQ="]
    assert run("verify", str(data_dir), cwd=tmp_path).returncode == 0


def test_produce_rejects_bad_input_with_the_line_number(tmp_path: Path):
    result = produce(tmp_path / "data", "orders-0", '{"key": "a"}\n{"key": 5}\n')
    assert result.returncode == 2
    assert result.stderr == "logstore: error: stdin line 2: key must be a string or null\n"
    bad_config = produce(tmp_path / "data", "orders-0", "", "--config", "segment.bytes=abc")
    assert bad_config.returncode == 2 and "segment.bytes" in bad_config.stderr


def test_produce_into_an_unwritable_directory_is_one_line_error(tmp_path: Path):
    # /sys refuses new directories even to root, where chmod-based tests would pass anyway.
    result = produce(Path("/sys/logstore-test-data"), "orders-0", '{"value": "x"}\n')
    assert result.returncode == 3
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith(("logstore: error: Operation not permitted",
                                     "logstore: error: Permission denied"))
    (tmp_path / "file").write_text("x")
    not_dir = produce(tmp_path / "file", "orders-0", '{"value": "x"}\n')
    assert not_dir.returncode == 3 and not_dir.stderr.startswith("logstore: error: Not a directory")


def test_consume_read_committed_drops_aborted_data_and_stops_at_open_transactions(tmp_path: Path):
    part = tmp_path / "data" / "txn-0"
    part.mkdir(parents=True)
    marker = lambda kind, offset: build_batch(  # noqa: E731
        [Record(offset, 1, struct.pack(">hh", 0, kind), struct.pack(">hi", 0, 0))], base_offset=offset,
        producer_id=7, producer_epoch=0, is_transactional=True, is_control=True, partition_leader_epoch=0)
    data = b"".join([
        build_batch([Record(0, 1, b"a", b"committed")], producer_id=7, producer_epoch=0, base_sequence=0,
                    is_transactional=True, partition_leader_epoch=0),
        marker(1, 1),
        build_batch([Record(2, 1, b"b", b"aborted")], base_offset=2, producer_id=7, producer_epoch=0,
                    base_sequence=1, is_transactional=True, partition_leader_epoch=0),
        marker(0, 3),
        build_batch([Record(4, 1, b"c", b"plain")], base_offset=4, partition_leader_epoch=0),
        build_batch([Record(5, 1, b"d", b"open")], base_offset=5, producer_id=7, producer_epoch=0,
                    base_sequence=2, is_transactional=True, partition_leader_epoch=0),
        build_batch([Record(6, 1, b"e", b"after")], base_offset=6, partition_leader_epoch=0),
    ])
    (part / "00000000000000000000.log").write_bytes(data)
    uncommitted = run("consume", str(tmp_path / "data"), "txn-0", cwd=tmp_path)
    assert [json.loads(x)["value"] for x in uncommitted.stdout.splitlines()] == [
        "committed", "aborted", "plain", "open", "after"]
    committed = run("consume", str(tmp_path / "data"), "txn-0", "--isolation", "read_committed", cwd=tmp_path)
    assert committed.returncode == 0, committed.stderr
    assert [json.loads(x)["value"] for x in committed.stdout.splitlines()] == ["committed", "plain"]


def test_consume_of_a_missing_partition_and_out_of_range_offset(tmp_path: Path, kafka_partition: Path):
    missing = run("consume", str(tmp_path), "nope-0", cwd=tmp_path)
    assert missing.returncode == 3 and "No such partition directory" in missing.stderr
    out_of_range = run("consume", str(kafka_partition.parent), "plain-0", "--from", "999", cwd=tmp_path)
    assert out_of_range.returncode == 2 and "valid offsets are [0, 720]" in out_of_range.stderr


def test_consume_an_empty_control_batch_does_not_end_its_transaction(tmp_path: Path):
    """What the cleaner leaves of a cleaned transaction's marker: Kafka's producer state and
    consumer skip it, so the transaction stays open and holds the last stable offset at 0."""
    from logstore.records import build_batch_columnar

    part = tmp_path / "data" / "txn-0"
    part.mkdir(parents=True)
    data = build_batch([Record(0, 1, b"a", b"v")], producer_id=7, producer_epoch=0, base_sequence=0,
                       is_transactional=True)
    empty_marker = build_batch_columnar([], [], base_offset=1, producer_id=7, producer_epoch=0,
                                        is_transactional=True, is_control=True)
    (part / "00000000000000000000.log").write_bytes(data + empty_marker)
    committed = run("consume", str(tmp_path / "data"), "txn-0", "--isolation", "read_committed",
                    cwd=tmp_path)
    assert committed.returncode == 0, committed.stderr
    assert committed.stdout == ""
    uncommitted = run("consume", str(tmp_path / "data"), "txn-0", cwd=tmp_path)
    assert [json.loads(line)["value"] for line in uncommitted.stdout.splitlines()] == ["v"]


def test_consume_read_committed_drops_aborted_records_without_txn_index_files(tmp_path: Path):
    from logstore.records import build_control_batch

    def txn(producer_id: int, value: bytes) -> bytes:
        return build_batch([Record(0, 1, b"k", value)], producer_id=producer_id, producer_epoch=0,
                           base_sequence=0, is_transactional=True)

    def end(kind: str, producer_id: int) -> bytes:
        return build_control_batch(kind, producer_id=producer_id, producer_epoch=0,
                                   coordinator_epoch=0, timestamp=1)

    part = tmp_path / "data" / "txn-0"
    with Log.open(part) as log:
        log.append(txn(1, b"aborted"))
        log.append(txn(2, b"committed"))
        log.append(end("abort", 1), origin="coordinator")
        log.append(end("commit", 2), origin="coordinator")
    for path in part.glob("*.txnindex"):
        path.unlink()
    result = run("consume", str(tmp_path / "data"), "txn-0", "--isolation", "read_committed",
                 cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["value"] for line in result.stdout.splitlines()] == ["committed"]
    assert not list(part.glob("*.txnindex"))


def test_recover_of_an_empty_partition_directory_is_not_a_repair(tmp_path: Path):
    (tmp_path / "data" / "fresh-0").mkdir(parents=True)
    result = run("recover", str(tmp_path / "data"), cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    assert result.stdout == f"{tmp_path / 'data' / 'fresh-0'}: nothing to recover\n"


def _two_partitions(data_dir: Path) -> None:
    for name in ("a-0", "b-0"):
        with Log.open(data_dir / name) as log:
            log.append(build_batch([Record(0, 1, b"k", b"v")]))


def test_recover_reads_an_unreadable_root_checkpoint_as_kafka_does(tmp_path: Path, capsys, monkeypatch):
    # Found by tests/cli/test_cli_damage_fuzz.py: a torn log-start-offset-checkpoint made every
    # partition fail, one error line each, naming the checkpoint's temporary copy.
    data_dir = tmp_path / "data"
    _two_partitions(data_dir)
    checkpoint = data_dir / "log-start-offset-checkpoint"
    checkpoint.write_bytes(b"0\n")
    result = run_in_process("recover", "--in-place", str(data_dir), cwd=tmp_path, capsys=capsys, monkeypatch=monkeypatch)
    assert result.returncode == 0, result.stderr
    assert result.stderr == (f"logstore: note: {checkpoint}: truncated checkpoint (expected a version and "
                             "a count line); read as empty, as Kafka does: each log starts at its first segment\n")
    assert checkpoint.read_bytes() == b"0\n"


def test_recover_replaces_a_corrupt_producer_snapshot(tmp_path: Path, capsys, monkeypatch):
    # Found by tests/cli/test_cli_damage_fuzz.py: recovery kept a snapshot whose CRC fails, so verify
    # still named it afterwards; Kafka deletes a corrupt snapshot and rebuilds from the log (the
    # latest one is written again at the close).
    data_dir = tmp_path / "data"
    _two_partitions(data_dir)
    snapshot = next((data_dir / "a-0").glob("*.snapshot"))
    snapshot.write_bytes(snapshot.read_bytes() + b"\x00")
    result = run_in_process("recover", "--in-place", str(data_dir), cwd=tmp_path, capsys=capsys, monkeypatch=monkeypatch)
    assert result.returncode == 1, result.stderr
    assert f"{snapshot}: rebuilt (now 10 bytes)" in result.stdout
    assert run_in_process("verify", str(data_dir), cwd=tmp_path, capsys=capsys, monkeypatch=monkeypatch).returncode == 0


def test_recover_refuses_a_negative_epoch_in_one_line_naming_the_checkpoint(tmp_path: Path, capsys, monkeypatch):
    # Found by tests/cli/test_cli_damage_fuzz.py: "internal error: ValueError", without the file.
    data_dir = tmp_path / "data"
    _two_partitions(data_dir)
    checkpoint = data_dir / "a-0" / "leader-epoch-checkpoint"
    checkpoint.write_text("0\n1\n-1 0\n")
    result = run_in_process("recover", "--in-place", str(data_dir), cwd=tmp_path, capsys=capsys,
                            monkeypatch=monkeypatch)
    assert result.returncode == 3
    assert result.stderr == f"logstore: error: {checkpoint} line 3: negative epoch or start offset -1 0\n"


def test_recover_refuses_a_batch_that_reaches_into_the_next_segment(tmp_path: Path, capsys, monkeypatch):
    # Found by tests/cli/test_cli_damage_fuzz.py: a last offset delta raised (CRC recomputed) in a
    # segment's last batch; each segment recovered clean alone and verify kept reporting the
    # overlap. Which of the two is damaged cannot be told, so recover keeps both and refuses.
    import struct

    from logstore.records.crc import crc32c
    from logstore.records.header import ATTRIBUTES_OFFSET, CRC_OFFSET

    data_dir = tmp_path / "data"
    with Log.open(data_dir / "a-0", {"segment.bytes": 200}) as log:
        for _ in range(4):
            log.append(build_batch([Record(0, 1, b"k", b"v" * 60)]))
        first = log.segments[0]
        path, position = first.log_path, max(p for p, _ in first.batch_headers())
    data = bytearray(path.read_bytes())
    struct.pack_into(">i", data, position + ATTRIBUTES_OFFSET + 2, 5)  # last offset delta
    struct.pack_into(">I", data, position + CRC_OFFSET, crc32c(bytes(data[position + ATTRIBUTES_OFFSET:])))
    path.write_bytes(bytes(data))
    before = {p.name: p.read_bytes() for p in (data_dir / "a-0").iterdir()}
    result = run_in_process("recover", "--full", "--in-place", str(data_dir), cwd=tmp_path, capsys=capsys,
                            monkeypatch=monkeypatch)
    assert result.returncode == 1  # the data has a problem recover did not repair
    assert result.stderr.startswith("logstore: error: batch ends at offset 5, past the next segment's base offset 1")
    assert result.stderr.endswith(f"({path}, position {position})\n") and result.stderr.count("\n") == 1
    assert {p.name: p.read_bytes() for p in (data_dir / "a-0").iterdir()} == before

"""`logstore dump` driven as a user would: subprocesses over copies of Kafka-written files."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from logstore.records import Record, build_batch
from logstore.records.crc import crc32c
from tests.support.files import directory_digest
from tests.support.paths import KAFKA_SAMPLE

SAMPLES = KAFKA_SAMPLE
EXPECTED = SAMPLES / "dump-logsegments" / "plain-0"
SEGMENT_FILES = sorted(p.name[: -len(".txt")] for p in EXPECTED.glob("*.txt"))


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run `python -m logstore ...` in `cwd`, capturing text output."""
    return subprocess.run([sys.executable, "-m", "logstore", *args], cwd=cwd, capture_output=True,
                          text=True, encoding="utf-8", check=False)


def run_in_process(*args: str, cwd: Path, capsys, monkeypatch) -> subprocess.CompletedProcess:
    """`logstore.cli.main(args)` in `cwd` (the same code path, without a new interpreter)."""
    from logstore.cli import main

    monkeypatch.chdir(cwd)
    code = main(list(args))
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(list(args), code, captured.out, captured.err)


def test_every_kafka_sample_file_dumps_exactly_as_kafka_printed_it(kafka_partition: Path):
    result = run("dump", "--deep-iteration", "--print-data-log", "--files", ",".join(SEGMENT_FILES),
                 cwd=kafka_partition)
    expected = "".join((EXPECTED / f"{name}.txt").read_text(encoding="utf-8") for name in SEGMENT_FILES)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout == expected


@pytest.mark.parametrize("name", SEGMENT_FILES)
def test_each_sample_file_matches_kafka_on_its_own(kafka_partition: Path, name: str, capsys, monkeypatch):
    from logstore.cli import main

    monkeypatch.chdir(kafka_partition)
    assert main(["dump", "--deep-iteration", "--print-data-log", "--files", name]) == 0
    assert capsys.readouterr().out == (EXPECTED / f"{name}.txt").read_text(encoding="utf-8")


def test_dumping_changes_no_byte_on_disk(kafka_partition: Path):
    before = directory_digest(kafka_partition.parent)
    names = ",".join([*SEGMENT_FILES, "leader-epoch-checkpoint"])
    for extra in (["--verify-index-only"], ["--index-sanity-check"], ["--json", "--deep-iteration"]):
        assert run("dump", *extra, "--files", names, cwd=kafka_partition).returncode == 0
    assert directory_digest(kafka_partition.parent) == before


def test_shallow_dump_prints_batches_without_records(kafka_partition: Path, capsys, monkeypatch):
    result = run_in_process("dump", "--files", "00000000000000000000.log", cwd=kafka_partition, capsys=capsys,
                            monkeypatch=monkeypatch)
    lines = result.stdout.splitlines()
    assert result.returncode == 0
    assert lines[:2] == ["Dumping 00000000000000000000.log", "Log starting offset: 0"]
    assert all(line.startswith("baseOffset: ") for line in lines[2:])


def test_json_lines_parse_and_nest_records_under_deep_iteration(kafka_partition: Path):
    result = run("dump", "--json", "--print-data-log", "00000000000000000000.log",
                 "00000000000000000000.index", "00000000000000000000.timeindex", cwd=kafka_partition)
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    assert result.returncode == 0, result.stderr
    batches = [o for o in objects if o["type"] == "batch"]
    assert sum(len(b["records"]) for b in batches) == 105
    assert batches[1]["compresscodec"] == "gzip" and batches[1]["records"][0]["key"] == "key-00001"
    assert batches[0]["records"][0]["key"] is None and batches[0]["deleteHorizonMs"] is None
    assert [o["offset"] for o in objects if o["type"] == "index_entry"] == [30, 59, 89]
    assert [o["offset"] for o in objects if o["type"] == "time_index_entry"] == [30, 59, 89, 104]


def test_torn_tail_is_reported_as_kafka_does(kafka_partition: Path):
    log = kafka_partition / "00000000000000000000.log"
    size = log.stat().st_size
    with log.open("ab") as f:
        f.write(log.read_bytes()[76:176])  # the first 100 bytes of a 214-byte batch
    result = run("dump", "--files", log.name, cwd=kafka_partition)
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1] == f"Found 100 invalid bytes at the end of {log.name}"
    json_result = run("dump", "--json", "--files", log.name, cwd=kafka_partition)
    problem = json.loads(json_result.stdout.splitlines()[-1])
    assert problem == {"type": "problem", "problem": "invalid_trailing_bytes", "file": log.name,
                       "position": size, "bytes": 100}


def test_max_bytes_stops_early_without_a_torn_tail_report(kafka_partition: Path, capsys, monkeypatch):
    result = run_in_process("dump", "--max-bytes", "300", "--files", "00000000000000000000.log",
                            cwd=kafka_partition, capsys=capsys, monkeypatch=monkeypatch)
    assert result.returncode == 0
    assert [line.split(" position: ")[1].split()[0] for line in result.stdout.splitlines()[2:]] == ["0", "76"]


def test_crc_corruption_shows_isvalid_false_and_exits_1(kafka_partition: Path):
    log = kafka_partition / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[17] ^= 0xFF  # first batch's stored CRC
    log.write_bytes(bytes(data))
    result = run("dump", "--deep-iteration", "--files", log.name, cwd=kafka_partition)
    assert result.returncode == 1
    assert result.stdout.splitlines()[2].endswith("isvalid: false")


def test_a_length_below_the_minimum_is_one_line_error_naming_file_and_position(kafka_partition: Path):
    log = kafka_partition / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    struct.pack_into(">i", data, 76 + 8, 5)
    log.write_bytes(bytes(data))
    result = run("dump", "--files", log.name, cwd=kafka_partition)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"logstore: {log.name}: position 76: Found record size 5 smaller than minimum record overhead (14)"]
    assert len(result.stdout.splitlines()) == 3  # the header lines and the first batch were printed


def test_garbage_records_in_a_batch_are_one_line_error(tmp_path: Path):
    raw = bytearray(build_batch([Record(0, 1, b"k" * 20, b"v" * 50)]))
    raw[61:] = b"\xff" * (len(raw) - 61)
    (tmp_path / "00000000000000000000.log").write_bytes(bytes(raw))
    result = run("dump", "--deep-iteration", "--files", "00000000000000000000.log", cwd=tmp_path)
    assert result.returncode == 1
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("logstore: 00000000000000000000.log: position 61: cannot decode the "
                                    "records of the batch at position 0: ")
    assert "Traceback" not in result.stderr


def test_debug_shows_the_traceback(tmp_path: Path):
    result = run("dump", "--debug", "--files", "00000000000000000000.log", cwd=tmp_path)
    assert result.returncode == 3
    assert "Traceback" in result.stderr
    assert result.stderr.splitlines()[-1].startswith("logstore: error: No such file or directory")


@pytest.mark.parametrize(("args", "code", "message"), [
    (["--files", "00000000000000000000.log"], 3, "No such file or directory"),
    (["--files", "partition.metadata"], 2, "not a .log, .index"),
    (["--files", "notanumber.log"], 2, "named by its base offset"),
    ([], 2, "no files to dump"),
])
def test_bad_inputs_get_one_line_errors_and_documented_codes(tmp_path: Path, args, code, message, capsys,
                                                             monkeypatch):
    (tmp_path / "partition.metadata").write_text("version: 0\n")
    (tmp_path / "notanumber.log").write_bytes(b"")
    result = run_in_process("dump", *args, cwd=tmp_path, capsys=capsys, monkeypatch=monkeypatch)
    assert result.returncode == code
    assert len(result.stderr.splitlines()) == 1 and message in result.stderr
    assert result.stderr.startswith("logstore: error:")


@pytest.mark.parametrize("value", ["-1", "abc", "3000000000"])
def test_bad_option_values_are_usage_errors(tmp_path: Path, value, capsys, monkeypatch):
    result = run_in_process("dump", "--max-bytes", value, "--files", "x.log", cwd=tmp_path, capsys=capsys,
                            monkeypatch=monkeypatch)
    assert result.returncode == 2
    assert "--max-bytes" in result.stderr and "Traceback" not in result.stderr


def test_a_directory_named_like_a_segment_is_an_error(tmp_path: Path, capsys, monkeypatch):
    (tmp_path / "00000000000000000000.log").mkdir()
    result = run_in_process("dump", "--files", "00000000000000000000.log", cwd=tmp_path, capsys=capsys,
                            monkeypatch=monkeypatch)
    assert result.returncode == 3
    assert result.stderr.startswith("logstore: error: Is a directory")


def test_empty_files(tmp_path: Path):
    for suffix in (".log", ".index", ".timeindex", ".txnindex"):
        (tmp_path / f"00000000000000000000{suffix}").write_bytes(b"")
    result = run("dump", "00000000000000000000.log", "00000000000000000000.index",
                 "00000000000000000000.timeindex", "00000000000000000000.txnindex", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "Dumping 00000000000000000000.log", "Log starting offset: 0",
        "Dumping 00000000000000000000.index", "00000000000000000000.index is empty.",
        "Dumping 00000000000000000000.timeindex",
        "Dumping 00000000000000000000.txnindex",
    ]


def test_wrong_kind_of_content_is_reported_not_crashed(tmp_path: Path):
    (tmp_path / "00000000000000000000.log").write_text("this is a text file, not a segment\n" * 3)
    (tmp_path / "00000000000000000000.snapshot").write_text("not a snapshot")
    result = run("dump", "00000000000000000000.log", "00000000000000000000.snapshot", cwd=tmp_path)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_index_mismatches_are_reported_on_stderr(kafka_partition: Path):
    index = kafka_partition / "00000000000000000000.index"
    data = bytearray(index.read_bytes())
    struct.pack_into(">i", data, 4, 0)  # first entry now points at the first batch
    index.write_bytes(bytes(data))
    result = run("dump", "--verify-index-only", "--files", index.name, cwd=kafka_partition)
    assert result.returncode == 1
    assert result.stdout == f"Dumping {index.name}\n"
    assert result.stderr.splitlines() == [f"Mismatches in :{index}", "  Index offset: 30, log offset: 0"]
    as_json = run("dump", "--json", "--files", index.name, cwd=kafka_partition)
    assert as_json.returncode == 1 and as_json.stderr == ""
    assert json.loads(as_json.stdout.splitlines()[-1]) == {
        "type": "problem", "problem": "index_mismatch", "file": str(index), "expected": 30, "found": 0}


def test_time_index_mismatch_and_sanity_check(kafka_partition: Path):
    timeindex = kafka_partition / "00000000000000000000.timeindex"
    data = bytearray(timeindex.read_bytes())
    struct.pack_into(">q", data, 12, 1700000058000)
    timeindex.write_bytes(bytes(data))
    result = run("dump", "--files", timeindex.name, cwd=kafka_partition)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"Found timestamp mismatch in :{timeindex}",
        "  Index timestamp: 1700000058000, log timestamp: 1700000059000"]
    sane = run("dump", "--index-sanity-check", "--files", timeindex.name, cwd=kafka_partition)
    assert sane.stdout.splitlines()[-1] == f"{timeindex.name} passed sanity check."
    timeindex.write_bytes(bytes(data) + b"\x00" * 12)
    insane = run("dump", "--index-sanity-check", "--files", timeindex.name, cwd=kafka_partition)
    assert insane.returncode == 1
    assert insane.stderr == (
        f"logstore: error: Corrupt time index found, time index file ({timeindex}) has non-zero size "
        "but the last timestamp is 0 which is less than the first timestamp 1700000030000\n")


def test_snapshot_txnindex_and_checkpoints(tmp_path: Path):
    body = struct.pack(">i", 1) + struct.pack(">qhiqiqiq", 9, 2, 4, 14, 4, 1700, -1, -1)
    (tmp_path / "00000000000000000015.snapshot").write_bytes(struct.pack(">hI", 1, crc32c(body)) + body)
    (tmp_path / "00000000000000000000.txnindex").write_bytes(struct.pack(">hqqqq", 0, 9, 3, 8, 10))
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n3 120\n")
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n1\nplain 0 720\n")
    result = run("dump", "--files", "00000000000000000015.snapshot,00000000000000000000.txnindex,"
                 "leader-epoch-checkpoint,recovery-point-offset-checkpoint", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "Dumping 00000000000000000015.snapshot",
        "producerId: 9 producerEpoch: 2 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
        "lastTimestamp: 1700 firstSequence: 0 lastSequence: 4 lastOffset: 14 offsetDelta: 4 timestamp: 1700",
        "Dumping 00000000000000000000.txnindex",
        "version: 0 producerId: 9 firstOffset: 3 lastOffset: 8 lastStableOffset: 10",
        "Dumping leader-epoch-checkpoint",
        "epoch: 0 startOffset: 0",
        "epoch: 3 startOffset: 120",
        "Dumping recovery-point-offset-checkpoint",
        "topic: plain partition: 0 offset: 720",
    ]


def test_corrupt_snapshot_prints_kafkas_message_and_exits_1(tmp_path: Path):
    (tmp_path / "00000000000000000000.snapshot").write_bytes(struct.pack(">hIi", 1, 7, 0))
    result = run("dump", "--files", "00000000000000000000.snapshot", cwd=tmp_path)
    assert result.returncode == 1
    computed = crc32c(struct.pack(">i", 0))
    assert result.stderr == f"Snapshot is corrupt (CRC is no longer valid). Stored crc: 7. Computed crc: {computed}\n"


def test_control_and_transactional_batches(tmp_path: Path):
    from logstore.records import build_batch as build

    data = build([Record(0, 10, b"k", b"v")], producer_id=5, producer_epoch=1, base_sequence=0,
                 is_transactional=True)
    marker = build([Record(1, 11, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 3))], base_offset=1,
                   producer_id=5, producer_epoch=1, is_transactional=True, is_control=True)
    (tmp_path / "00000000000000000000.log").write_bytes(data + marker)
    result = run("dump", "--print-data-log", "00000000000000000000.log", cwd=tmp_path)
    lines = result.stdout.splitlines()
    assert result.returncode == 0, result.stderr
    assert "isTransactional: true isControl: false" in lines[2]
    assert lines[3].endswith("sequence: 0 headerKeys: [] key: k payload: v")
    assert "isControl: true" in lines[4]
    assert lines[5] == ("| offset: 1 CreateTime: 11 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
                        "endTxnMarker: COMMIT coordinatorEpoch: 3")


def test_broken_pipe_is_quiet(kafka_partition: Path):
    proc = subprocess.Popen([sys.executable, "-m", "logstore", "dump", "--print-data-log",
                             *SEGMENT_FILES], cwd=kafka_partition, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()
    assert proc.wait() in (0, 141)
    assert b"Traceback" not in proc.stderr.read()
    proc.stderr.close()


def test_help_shows_an_example_for_dump():
    result = run("dump", "--help", cwd=Path(os.getcwd()))
    assert result.returncode == 0 and "example:" in result.stdout


def test_legacy_compressed_wrappers_list_their_inner_messages(tmp_path: Path, capsys, monkeypatch):
    from logstore.records.legacy import build_legacy_entry

    wrapper = build_legacy_entry([Record(1, 1001, b"k1", b"v1"), Record(2, 1002, None, b"v2")], magic=1,
                                 compression="gzip")
    (tmp_path / "00000000000000000000.log").write_bytes(wrapper)
    result = run_in_process("dump", "--print-data-log", "00000000000000000000.log", cwd=tmp_path,
                            capsys=capsys, monkeypatch=monkeypatch)
    lines = result.stdout.splitlines()
    assert result.returncode == 0, result.stderr
    assert lines[2].startswith("offset: 2 position: 0 CreateTime: ") and "compresscodec: gzip" in lines[2]
    assert lines[3].startswith("| offset: 1 CreateTime: 1001 keySize: 2 valueSize: 2 isValid: true crc: ")
    assert lines[3].endswith("} key: k1 payload: v1")
    assert lines[4].endswith("} payload: v2") and len(lines) == 5


def _five_batches_with_a_bad_magic(tmp_path: Path) -> Path:
    path = tmp_path / "t-0" / "00000000000000000000.log"
    path.parent.mkdir()
    batches = [build_batch([Record(i, 1_000 + i, b"k%d" % i, b"v" * 20)], base_offset=i) for i in range(5)]
    data = bytearray(b"".join(batches))
    data[2 * len(batches[0]) + 16] = 255  # the magic byte of the third batch
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("deep", [False, True])
def test_a_bad_magic_mid_segment_is_one_problem_line_and_the_dump_goes_on(tmp_path, capsys, monkeypatch, deep):
    path = _five_batches_with_a_bad_magic(tmp_path)
    size = path.stat().st_size // 5
    args = ["dump", str(path), *(["--deep-iteration"] if deep else [])]
    result = run_in_process(*args, cwd=tmp_path, capsys=capsys, monkeypatch=monkeypatch)
    assert result.returncode == 1
    assert [line.split(" position: ")[1].split()[0] for line in result.stdout.splitlines()
            if line.startswith("baseOffset")] == [str(p * size) for p in (0, 1, 3, 4)]
    assert f"{path}: position {2 * size}: unknown magic 255" in result.stderr
    as_json = run_in_process(*args, "--json", cwd=tmp_path, capsys=capsys, monkeypatch=monkeypatch)
    objects = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert {"type": "problem", "problem": "corrupt_entry", "file": str(path), "position": 2 * size,
            "message": "unknown magic 255"} in objects
    assert [o["baseOffset"] for o in objects if o["type"] == "batch"] == [0, 1, 3, 4]

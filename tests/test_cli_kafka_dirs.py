"""The operator tools on directories as Kafka leaves them: follower-written legacy data,
compacted topics, damaged copies and whole broker directories. Each test builds its situation
from data we write or from copies of Kafka's sample, runs the command as a user would, and
checks what an operator sees (exit code, problem lines with file and position, the summary)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from tests.kafka_dirs import compacted_partition, follower_partition, kafka_sample
from tests.test_cli_dump import digest, run


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A data directory holding follower-written legacy data and a compacted topic."""
    root = tmp_path / "data"
    root.mkdir()
    follower_partition(root / "replicated-0")
    compacted_partition(root / "users-0")
    return root


def index_entries(path: Path) -> list[tuple[int, int]]:
    """(absolute offset, position) of each entry of an offset index."""
    base = int(path.name.split(".")[0])
    data = path.read_bytes()
    return [(base + r, p) for r, p in struct.iter_unpack(">ii", data)]


def test_legacy_entries_verify_clean(data_dir: Path):
    index = data_dir / "replicated-0" / "00000000000000000000.index"
    # the premise: Kafka's follower entries name an append's last offset at its first batch
    assert (11, 0) not in index_entries(index) or (23, 663) in index_entries(index)
    dumped = run("dump", str(index), cwd=data_dir)  # Kafka's tool notes such entries
    assert dumped.stderr.startswith(f"Mismatches in :{index}\n")
    before = digest(data_dir)
    result = run("verify", "--deep", str(data_dir), cwd=data_dir)
    assert result.returncode == 0, result.stdout
    assert result.stdout.endswith("in 2 partition(s): OK\n")
    assert digest(data_dir) == before


def test_kafkas_sample_and_its_data_dir_verify_clean(tmp_path: Path):
    partition = kafka_sample(tmp_path / "logdir")
    result = run("verify", str(partition.parent), cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    assert result.stdout == "verified 32 files (240 batches) in 1 partition(s): OK\n"


def _entry_problem(result, name: str) -> list[tuple[str, int, str]]:
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    return [(Path(o["file"]).name, o["position"], o["message"]) for o in objects
            if o["type"] == "problem" and Path(o["file"]).name == name]


def test_offset_entries_that_could_miss_are_problems(data_dir: Path):
    partition = data_dir / "replicated-0"
    index = partition / "00000000000000000000.index"
    entries = index_entries(index)
    data = bytearray(index.read_bytes())
    # entry 2 now points one byte into a batch; entry 4 names an offset held by an earlier batch
    struct.pack_into(">i", data, 2 * 8 + 4, entries[2][1] + 1)
    struct.pack_into(">i", data, 4 * 8, entries[3][0] - 2)
    index.write_bytes(bytes(data))
    result = run("verify", "--json", str(partition), cwd=data_dir)
    assert result.returncode == 1
    problems = _entry_problem(result, index.name)
    assert [(p[1], p[2].split(",")[0]) for p in problems] == [
        (16, f"entry 2 points at log position {entries[2][1] + 1}"),
        (32, f"entry 4 (offset {entries[3][0] - 2}"),
        (32, f"entry 4 says offset {entries[3][0] - 2} is at or after log position {entries[4][1]}"),
    ]
    assert "a lookup would miss it" in problems[2][2]


def test_time_entry_below_an_earlier_batch_timestamp_is_a_problem(data_dir: Path):
    partition = data_dir / "replicated-0"
    index = partition / "00000000000000000000.timeindex"
    data = bytearray(index.read_bytes())
    (timestamp, offset) = struct.unpack_from(">qi", data, 5 * 12)
    (previous, _) = struct.unpack_from(">qi", data, 4 * 12)
    struct.pack_into(">qi", data, 5 * 12, previous + 1, offset + 24)  # skips past bigger timestamps
    index.write_bytes(bytes(data))
    result = run("verify", "--json", str(partition), cwd=data_dir)
    assert result.returncode == 1
    [(_, position, message)] = _entry_problem(result, index.name)
    assert position == 60
    assert message.startswith(f"entry 5 (timestamp {previous + 1}, offset {offset + 24}): the batch at log position")
    assert "would miss it" in message


@pytest.fixture
def damaged(tmp_path: Path) -> Path:
    """Kafka's sample with a bad magic byte mid-segment, a CRC-corrupt batch and a zero-filled
    tail, each in its own segment; returns the data directory."""
    partition = kafka_sample(tmp_path / "logdir")
    log = partition / "00000000000000000105.log"
    data = bytearray(log.read_bytes())
    data[962 + 16] = 0xFF  # the magic byte of the batch at position 962
    log.write_bytes(bytes(data))
    log = partition / "00000000000000000211.log"
    data = bytearray(log.read_bytes())
    data[300] ^= 0x55  # inside the first batch's records
    log.write_bytes(bytes(data))
    with (partition / "00000000000000000633.log").open("ab") as f:
        f.write(bytes(500))
    return partition.parent


DAMAGE = [
    ("00000000000000000105.log", 962, "unknown magic 255"),
    ("00000000000000000211.log", 0, "batch CRC mismatch: stored 2254287576, computed 2432979512"),
    ("00000000000000000633.log", 13467, "Found record size 0 smaller than minimum record overhead (14)"),
]


def test_verify_names_each_damage_once_and_reads_on(damaged: Path):
    before = digest(damaged)
    result = run("verify", str(damaged), cwd=damaged)
    assert result.returncode == 1
    partition = damaged / "plain-0"
    assert result.stdout.splitlines() == [
        f"{partition / DAMAGE[0][0]}: position 962: unreadable batch header: unknown magic 255",
        f"{partition / DAMAGE[1][0]}: position 0: {DAMAGE[1][2]}",
        f"{partition / DAMAGE[2][0]}: position 13467: {DAMAGE[2][2]}",
        "verified 32 files (240 batches) in 1 partition(s): 3 problem(s)",
    ]
    as_json = [json.loads(line) for line in run("verify", "--json", str(damaged), cwd=damaged).stdout.splitlines()]
    assert [(Path(o["file"]).name, o["position"]) for o in as_json[:-1]] == [d[:2] for d in DAMAGE]
    assert as_json[-1] == {"type": "summary", "partitions": 1, "files": 32, "batches": 240, "problems": 3}
    assert digest(damaged) == before


def test_stats_names_each_damage_and_still_prints_its_table(damaged: Path):
    before = digest(damaged)
    result = run("stats", str(damaged), cwd=damaged)
    assert result.returncode == 1
    table = result.stdout.splitlines()
    assert table[0].split()[:6] == ["PARTITION", "SEGMENTS", "BYTES", "START", "END", "RECORDS"]
    assert table[1].split()[:6] == ["plain-0", "7", "110872", "0", "720", "714"]  # two bad batches of 3
    partition = damaged / "plain-0"
    assert result.stderr.splitlines() == [f"logstore: {partition / name}: position {position}: {message}"
                                          for name, position, message in DAMAGE]
    (row,) = [json.loads(line) for line in run("stats", "--json", str(damaged), cwd=damaged).stdout.splitlines()]
    assert row["records"] == 714 and row["batches"] == 238 and row["invalidBytes"] == 500
    assert [(Path(p["file"]).name, p["position"], p["message"]) for p in row["problems"]] == DAMAGE
    assert digest(damaged) == before


def test_stats_reads_from_the_checkpointed_log_start(tmp_path: Path):
    partition = kafka_sample(tmp_path / "logdir")
    for path in partition.glob("00000000000000000000.*"):  # retention deleted the first segment
        path.unlink()
    (tmp_path / "logdir" / "log-start-offset-checkpoint").write_text("0\n1\nplain 0 130\n")
    (row,) = [json.loads(line) for line in run("stats", "--json", str(partition), cwd=tmp_path).stdout.splitlines()]
    assert (row["startOffset"], row["endOffset"], row["records"]) == (130, 720, 590)
    consumed = run("consume", str(tmp_path / "logdir"), "plain-0", cwd=tmp_path).stdout.splitlines()
    assert len(consumed) == 590 and json.loads(consumed[0])["offset"] == 130
    table = run("stats", str(partition), cwd=tmp_path).stdout.splitlines()
    assert table[1].split()[3:6] == ["130", "720", "590"]

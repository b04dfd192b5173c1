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

"""`logstore verify` driven as a user would, over copies of Kafka's plain sample."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from tests.cli.test_cli_dump import run
from tests.support.files import directory_digest


def test_kafkas_sample_verifies_clean_and_unchanged(kafka_partition: Path):
    before = directory_digest(kafka_partition.parent)
    result = run("verify", "--deep", str(kafka_partition.parent), cwd=kafka_partition)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == "verified 33 files (240 batches) in 1 partition(s): OK\n"
    assert directory_digest(kafka_partition.parent) == before


def test_every_problem_names_its_file_and_position(kafka_partition: Path):
    with (kafka_partition / "00000000000000000633.log").open("ab") as f:
        f.write(b"xx")
    log = kafka_partition / "00000000000000000105.log"
    data = bytearray(log.read_bytes())
    data[300] ^= 0xFF
    log.write_bytes(bytes(data))
    index = kafka_partition / "00000000000000000000.index"
    index_data = bytearray(index.read_bytes())
    struct.pack_into(">i", index_data, 4, 1)  # not a batch boundary: a lookup would read garbage
    index.write_bytes(bytes(index_data))
    (kafka_partition / "leader-epoch-checkpoint").write_text("0\n2\n3 0\n1 10\n")
    (kafka_partition / "00000000000000099999.index").write_bytes(b"")
    result = run("verify", "--json", str(kafka_partition), cwd=kafka_partition)
    assert result.returncode == 1
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    problems = {(Path(o["file"]).name, o["position"]) for o in objects if o["type"] == "problem"}
    assert problems == {
        ("00000000000000000000.index", 0),
        ("00000000000000000105.log", 188),
        ("00000000000000000633.log", 13467),
        ("leader-epoch-checkpoint", None),
        ("00000000000000099999.index", None),
    }
    assert objects[-1]["type"] == "summary" and objects[-1]["problems"] == 5


def test_single_files_and_text_output(kafka_partition: Path):
    result = run("verify", "00000000000000000000.log", "00000000000000000000.timeindex",
                 "00000000000000000105.snapshot", cwd=kafka_partition)
    assert result.returncode == 0
    assert result.stdout == "verified 3 files (35 batches) in 0 partition(s): OK\n"


def test_not_a_log_directory_missing_path_and_usage(tmp_path: Path):
    (tmp_path / "notes.txt").write_text("hello")
    not_log = run("verify", str(tmp_path), cwd=tmp_path)
    assert not_log.returncode == 3
    assert not_log.stderr == f"logstore: error: {tmp_path} is not a log directory: no segment files and " \
                             "no <topic>-<partition> directories in it\n"
    missing = run("verify", str(tmp_path / "nope"), cwd=tmp_path)
    assert missing.returncode == 3 and "No such file or directory" in missing.stderr
    assert run("verify", cwd=tmp_path).returncode == 2


def test_truncated_segment_is_a_torn_tail(kafka_partition: Path):
    log = kafka_partition / "00000000000000000211.log"
    data = log.read_bytes()
    log.write_bytes(data[: len(data) - 10])
    result = run("verify", str(kafka_partition), cwd=kafka_partition)
    assert result.returncode == 1
    assert "00000000000000000211.log: position" in result.stdout
    assert "invalid bytes at the end" in result.stdout


def test_progress_bar_on_a_terminal_only(kafka_partition: Path):
    import fcntl
    import os
    import pty
    import select
    import subprocess
    import sys
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))  # a real terminal's size
    try:
        result = subprocess.run([sys.executable, "-m", "logstore", "verify", str(kafka_partition)],
                                stdout=subprocess.PIPE, stderr=slave, check=False)
        ready, _, _ = select.select([master], [], [], 5)
        terminal = os.read(master, 1 << 16) if ready else b""
    finally:
        os.close(slave)
        os.close(master)
    assert result.returncode == 0
    assert b"verify" in terminal and b"%" in terminal  # tqdm drew on the terminal
    assert b"verify:" not in result.stdout  # and nothing of it reached the pipe
    piped = run("verify", str(kafka_partition), cwd=kafka_partition)
    assert piped.stderr == ""

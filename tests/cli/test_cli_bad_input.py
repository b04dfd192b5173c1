"""Every subcommand given bad input as a user would give it: one `logstore: error:` line (or a
problem report), a documented exit code, never a traceback, and no file changed."""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.files import directory_digest
from tests.support.paths import KAFKA_LOGDIR

SAMPLE = KAFKA_LOGDIR
SEGMENT_SUFFIXES = ("log", "index", "timeindex", "snapshot", "txnindex")
ZERO = "00000000000000000000"


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """data/plain-0 (Kafka's sample), junk/junk-0 (random bytes under segment names), torn/plain-0
    (the sample with its first segment cut short), empty/e-0 (empty files), notes/ (not a log)."""
    root = tmp_path_factory.mktemp("bad-input")
    shutil.copytree(SAMPLE, root / "data")
    rnd = random.Random(7)
    for name, content in (("junk/junk-0", lambda: rnd.randbytes(4096)), ("empty/e-0", lambda: b"")):
        (root / name).mkdir(parents=True)
        for suffix in SEGMENT_SUFFIXES:
            (root / name / f"{ZERO}.{suffix}").write_bytes(content())
    # A batch length of -1 at position 0: a corrupt length, not just a torn tail.
    (root / "junk/junk-0" / f"{ZERO}.log").write_bytes(bytes(8) + b"\xff" * 4 + rnd.randbytes(4084))
    shutil.copytree(SAMPLE, root / "torn")
    first = root / "torn" / "plain-0" / f"{ZERO}.log"
    first.write_bytes(first.read_bytes()[:-37])
    (root / "notes").mkdir()
    (root / "notes" / "readme.txt").write_text("not a log\n")
    return root


def logstore(root: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    """Run the command in `root` and check it neither crashed nor changed a file."""
    before = directory_digest(root)
    result = subprocess.run([sys.executable, "-m", "logstore", *args], cwd=root, input=stdin,
                            capture_output=True, text=True, timeout=60, check=False)
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    assert directory_digest(root) == before
    return result


def one_line_error(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("logstore: error: "), result.stderr
    return lines[0]


@pytest.mark.parametrize("command", ["verify", "stats", "recover", "retention --dry-run",
                                     "compact --dry-run", "dump"])
@pytest.mark.parametrize("target, code", [("missing", 3), ("notes", 3)])
def test_a_missing_path_or_a_non_log_is_one_line_exit_3(work, command, target, code):
    if command == "dump":
        code = 3 if target == "missing" else 2  # dump takes files: a directory is a usage error
        target = f"{target}/{ZERO}.log" if target == "missing" else target
    result = logstore(work, *command.split(), target)
    assert result.returncode == code
    assert one_line_error(result)


@pytest.mark.parametrize("suffix", ["index", "timeindex"])
@pytest.mark.parametrize("options", [["--verify-index-only"], ["--json"]])
def test_dump_of_a_random_index_reports_mismatches(work, suffix, options):
    result = logstore(work, "dump", *options, f"junk/junk-0/{ZERO}.{suffix}")
    assert result.returncode == 1
    last = result.stderr.splitlines()[-1] if result.stderr else ""
    assert "junk-0" in result.stderr + result.stdout and "Traceback" not in last


@pytest.mark.parametrize("target", ["junk/junk-0", f"junk/junk-0/{ZERO}.index",
                                    f"junk/junk-0/{ZERO}.timeindex", "torn", "empty/e-0"])
def test_verify_lists_problems_of_random_torn_and_empty_files(work, target):
    result = logstore(work, "verify", target)
    assert result.returncode == 1 and result.stderr == ""
    assert result.stdout.splitlines()[-1].endswith("problem(s)")


def test_verify_names_the_corrupt_log_an_index_check_walks(work):
    result = logstore(work, "verify", f"junk/junk-0/{ZERO}.timeindex")
    assert f"junk/junk-0/{ZERO}.log: position 0: Found record size" in result.stdout


def test_stats_reports_a_torn_tail_instead_of_skipping_it(work):
    result = logstore(work, "stats", "torn")
    assert result.returncode == 1
    assert f"plain-0/{ZERO}.log: position 15460: 771 invalid bytes at the end" in result.stderr


def test_recover_names_the_users_file_not_the_temporary_copy(work):
    # A random .txnindex is rebuilt by recovery (as Kafka does), reported under the user's path.
    result = logstore(work, "recover", "junk")
    assert result.returncode == 1
    assert f"junk/junk-0/{ZERO}.txnindex: would rebuild" in result.stdout
    assert "logstore-recover-" not in result.stdout + result.stderr


BAD_CONFIGS = [("segment.bytes=0", "--config segment.bytes: 0 is below"),
               ("nope=1", "--config nope: unknown config key"),
               ("retention.ms=abc", "--config retention.ms: expected an integer"),
               ("novalue", "--config expects KEY=VALUE")]


@pytest.mark.parametrize("command, config, message",
                         [("compact", *bad) for bad in BAD_CONFIGS] + [("retention", *BAD_CONFIGS[0]),
                                                                       ("produce", *BAD_CONFIGS[1])])
def test_a_bad_config_is_a_usage_error_naming_the_option(work, command, config, message):
    target = ["data", "plain-0"] if command == "produce" else ["--dry-run", "data/plain-0"]
    result = logstore(work, command, "--config", config, *target)
    assert result.returncode == 2
    assert message in one_line_error(result)


@pytest.mark.parametrize("command", ["produce", "consume"])
@pytest.mark.parametrize("topic_partition", ["plain", "plain-x", "../x-0"])
def test_a_malformed_topic_partition_is_a_usage_error(work, command, topic_partition):
    result = logstore(work, command, "data", topic_partition)
    assert result.returncode == 2
    assert topic_partition in one_line_error(result) or "topic name" in result.stderr


@pytest.mark.parametrize("line", ['{"timestamp": -5}', '{"timestamp": 99999999999999999999999}',
                                  '{"timestamp": "soon"}'])
def test_produce_rejects_a_timestamp_outside_int64_ms(work, line):
    result = logstore(work, "produce", "data", "plain-0", stdin=line + "\n")
    assert result.returncode == 2
    assert "stdin line 1: timestamp" in one_line_error(result)


@pytest.mark.parametrize("args", [["dump", "--max-bytes", "-1", f"data/plain-0/{ZERO}.log"],
                                  ["dump", "--max-message-size", "99999999999", f"data/plain-0/{ZERO}.log"],
                                  ["consume", "data", "plain-0", "--from", "abc"],
                                  ["consume", "data", "plain-0", "--from", "99999999999999999999"],
                                  ["consume", "data", "plain-0", "--from-time", "99999999999999999999"],
                                  ["retention", "--dry-run", "--now", "-1", "data"],
                                  ["retention", "--dry-run", "--now", "99999999999999999999", "data"],
                                  ["produce", "--batch-size", "0", "data", "plain-0"]])
def test_bad_option_values_exit_2(work, args):
    assert logstore(work, *args).returncode == 2


def test_output_that_cannot_be_written_is_one_line_exit_3(work):
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "logstore", "dump", f"data/plain-0/{ZERO}.log"],
                                cwd=work, stdout=full, stderr=subprocess.PIPE, text=True, check=False)
    assert result.returncode == 3
    assert result.stderr == "logstore: error: No space left on device\n"

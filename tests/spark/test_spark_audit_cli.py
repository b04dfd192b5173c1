"""`logstore audit`: the Spark reports from the command line."""

from __future__ import annotations

import json
import shutil

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logstore.cli import main
from logstore.cli.audit import TERMINAL_PARTITIONS, print_report, reclaimable_png
from tests.support.paths import KAFKA_LOGDIR, REPO_ROOT

SAMPLES = KAFKA_LOGDIR


def test_plot_is_a_png():
    tables = {
        "compaction": [{"topic": "a", "partition": 0, "bytes_removable": 10}],
        "retention": [{"topic": "b", "partition": 1, "bytes_reclaimed": 20}],
    }
    assert reclaimable_png(tables)[:8] == b"\x89PNG\r\n\x1a\n"


def _retention_rows(reclaimed: list[int]) -> list[dict]:
    return [{"topic": "t", "partition": p, "cleanup_policy": "delete", "segments": 2,
             "log_bytes": 100 + r, "segments_deleted": int(r > 0), "deleted_by_retention_ms": 0,
             "deleted_by_retention_bytes": int(r > 0), "deleted_by_log_start_offset": 0,
             "new_log_start_offset": 0, "bytes_reclaimed": r} for p, r in enumerate(reclaimed)]


def _printed_partitions(out: str) -> list[int]:
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("topic "))
    return [int(line.split()[1]) for line in lines[header + 1:] if line.strip()]


@given(st.lists(st.integers(0, 10**6), max_size=60))
def test_the_terminal_gets_totals_and_the_partitions_with_most_to_reclaim(reclaimed):
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_report("retention", _retention_rows(reclaimed), written=True)
    printed = out.getvalue()
    assert f"retention report ({len(reclaimed)} partitions)" in printed
    if len(reclaimed) <= TERMINAL_PARTITIONS:
        assert _printed_partitions(printed) == list(range(len(reclaimed)))
        return
    most = sorted(range(len(reclaimed)), key=lambda p: (-reclaimed[p], p))[:TERMINAL_PARTITIONS]
    assert _printed_partitions(printed) == most
    assert f"bytes_reclaimed={sum(reclaimed)}" in printed
    assert f"log_bytes={100 * len(reclaimed) + sum(reclaimed)}" in printed
    assert "every partition is in the written report" in printed


def test_bad_spark_conf_is_a_usage_error(tmp_path, capsys):
    assert main(["audit", str(tmp_path), "--conf", "spark.executor.memory"]) == 2
    assert "--conf expects KEY=VALUE" in capsys.readouterr().err


def test_bad_override_is_a_usage_error(tmp_path, capsys):
    assert main(["audit", str(tmp_path), "--config", "no-equals-sign"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err


@pytest.mark.spark
def test_audit_kafka_directory_writes_reports_and_plot(spark, tmp_path, capsys):
    data = tmp_path / "logdir"
    shutil.copytree(SAMPLES, data)
    out = tmp_path / "audit-out"
    code = main(["audit", str(data), "--master", "local[2]", "--out", str(out),
                 "--format", "json", "--plot", "--config", "retention.ms=86400000",
                 "--now", "1800000000000"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "compaction report (1 partitions)" in printed
    assert "retention report (1 partitions)" in printed
    assert sorted(p.name for p in out.iterdir()) == [
        "compaction.json", "reclaimable-bytes.png", "retention.json"]
    rows = [json.loads(line) for line in (out / "retention.json").read_text().splitlines()]
    assert rows[0]["segments_deleted"] == 7 and rows[0]["new_log_start_offset"] == 720
    assert (out / "reclaimable-bytes.png").exists()


@pytest.mark.spark
def test_audit_missing_path_is_an_error(spark, tmp_path, capsys):
    assert main(["audit", str(tmp_path / "nope"), "--report", "retention"]) == 3
    assert "no such file or directory" in capsys.readouterr().err


@pytest.mark.spark
def test_corrupt_segment_is_reported_as_corruption(spark, tmp_path, capsys):
    from logstore.records import Record, build_batch

    part = tmp_path / "data" / "t-0"
    part.mkdir(parents=True)
    batch = bytearray(build_batch([Record(0, 0, b"k", b"value")]))
    batch[-1] ^= 0xFF
    (part / "00000000000000000000.log").write_bytes(bytes(batch) + build_batch(
        [Record(1, 0, b"k", b"v")], base_offset=1))
    code = main(["audit", str(tmp_path / "data"), "--report", "compaction",
                 "--config", "cleanup.policy=compact", "--now", "1000000"])
    assert code == 1
    assert "CRC" in capsys.readouterr().err


@pytest.mark.spark
@pytest.mark.slow
def test_executors_without_a_python_are_one_line_with_a_hint(tmp_path):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    done = subprocess.run(
        [sys.executable, "-m", "logstore", "audit", str(SAMPLES), "--master", "local[1]",
         "--conf", f"spark.pyspark.python={tmp_path / 'no-python'}"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True,
        timeout=300)
    assert done.returncode != 0
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("logstore:")]
    assert "Cannot run program" in line and "spark.pyspark.python" in line

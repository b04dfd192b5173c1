"""`logstore audit` as an operator meets it: the chart, the configs it says it used, a .log
file argument, and Ctrl-C (one line, exit 130)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from logstore.cli import main
from logstore.cli.audit import (
    TERMINAL_PARTITIONS,
    bar_label,
    chart_series,
    reclaimable_png,
    stored_configs,
)
from logstore.manager import LogManager
from tests.support.paths import KAFKA_LOGDIR, REPO_ROOT

SAMPLES = KAFKA_LOGDIR
ROOT = REPO_ROOT


def test_the_chart_orders_partitions_numerically_in_mib_and_share():
    rows = [{"topic": "a", "partition": p, "bytes_reclaimed": p * 2**20, "log_bytes": 4 * 2**20}
            for p in (10, 2, 0, 1)]
    labels, series = chart_series({"retention": rows})
    assert labels == ["a-0", "a-1", "a-2", "a-10"]
    assert [bar_label(b, n) for b, n in series["retention"]] == ["", "1.00 (25%)", "2.00 (50%)", "10.00 (250%)"]


def test_the_chart_of_a_large_fleet_shows_the_partitions_with_most_to_reclaim():
    retention = [{"topic": "a", "partition": p, "bytes_reclaimed": (p * 7919) % 1000,
                  "log_bytes": 1000} for p in range(200)]
    compaction = [{"topic": "a", "partition": p, "bytes_removable": p % 3, "log_bytes": 1000}
                  for p in range(200)]
    labels, series = chart_series({"retention": retention, "compaction": compaction})
    total = {p: (p * 7919) % 1000 + p % 3 for p in range(200)}
    most = sorted(sorted(range(200), key=lambda p: (-total[p], p))[:TERMINAL_PARTITIONS])
    assert labels == [f"a-{p}" for p in most]
    assert [b for b, _ in series["retention"]] == [(p * 7919) % 1000 for p in most]
    assert [b for b, _ in series["compaction"]] == [p % 3 for p in most]


def test_the_chart_of_nothing_reclaimable_is_still_drawn():
    rows = [{"topic": "a", "partition": 0, "bytes_removable": 0, "log_bytes": 10}]
    assert reclaimable_png({"compaction": rows})[:8] == b"\x89PNG\r\n\x1a\n"


def test_stored_configs_are_found_behind_every_kind_of_path(tmp_path):
    with LogManager(tmp_path) as manager:
        manager.get_or_create("users", 0, {"cleanup.policy": "compact"}).append([(b"k", b"v")])
    segment = next((tmp_path / "users-0").glob("*.log"))
    for path in (tmp_path, tmp_path / "users-0", segment):
        assert stored_configs([str(path)]) == {"users": {"cleanup.policy": "compact"}}
    assert stored_configs(["s3://bucket/data"]) == {}


def test_the_old_set_option_is_gone_and_config_file_is_the_file(tmp_path, capsys):
    assert main(["audit", str(tmp_path), "--set", "retention.ms=1"]) == 2
    assert main(["audit", str(tmp_path), "--config-file", str(tmp_path / "missing.properties")]) == 2
    assert "cannot read --config-file" in capsys.readouterr().err


@pytest.mark.spark
def test_audit_says_which_configs_it_used_and_what_a_log_file_stands_for(spark, tmp_path, capsys):
    data = tmp_path / "logdir"
    shutil.copytree(SAMPLES, data)
    segment = data / "plain-0" / "00000000000000000105.log"
    assert main(["audit", str(segment), "--master", "local[2]", "--report", "retention",
                 "--now", "1800000000000"]) == 0
    captured = capsys.readouterr()
    assert "configs: plain: Kafka's defaults, assumed: none stored or given" in captured.out
    assert "audited with the rest of its partition" in captured.err
    assert main(["audit", str(data), "--master", "local[2]", "--report", "retention",
                 "--config", "plain.retention.ms=-1", "--now", "1800000000000"]) == 0
    assert "configs: plain: given" in capsys.readouterr().out


@pytest.mark.spark
@pytest.mark.slow
def test_ctrl_c_during_an_audit_is_one_line_and_exit_130(tmp_path):
    for i in range(40):
        shutil.copytree(SAMPLES / "plain-0", tmp_path / f"plain-{i}")
    process = subprocess.Popen(
        [sys.executable, "-m", "logstore", "audit", str(tmp_path), "--report", "retention"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as a terminal starts it
    _wait_for_python_workers(process)  # the audit's Spark job is running
    os.killpg(process.pid, signal.SIGINT)  # Ctrl-C goes to the whole foreground group
    _out, err = process.communicate(timeout=120)
    assert process.returncode == 130
    lines = [line for line in err.splitlines() if not line.startswith("WARNING: Using incubator modules")]
    assert lines == ["logstore: error: interrupted"]


def _wait_for_python_workers(process: subprocess.Popen, timeout: float = 120.0) -> None:
    """Return once Spark has started a Python worker in the audit's process group, which it
    does only for the audit's own job; a fixed sleep let a fast machine finish the audit first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "the audit ended before its Spark job was seen"
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if os.getpgid(int(pid)) != process.pid:
                    continue
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except (OSError, ProcessLookupError):
                continue
            if b"pyspark.daemon" in cmdline or b"pyspark.worker" in cmdline:
                return
        time.sleep(0.05)
    raise AssertionError("no Spark Python worker started within the timeout")


def test_kafkas_internal_topics_are_audited_as_compacted_when_nothing_is_stored():
    from logstore.cli._common import GivenConfigs
    from logstore.cli.audit import _config_sources, _configs
    from spark_tools.topic_configs import TopicConfigs

    given = GivenConfigs({"retention.ms": "1000"}, {})
    configs = TopicConfigs.load(_configs(given, {}))
    assert configs.for_topic("__consumer_offsets").compact
    assert not configs.for_topic("__consumer_offsets").delete
    assert configs.for_topic("__consumer_offsets").retention_ms == 1000
    assert configs.for_topic("orders").delete
    line = _config_sources(["__consumer_offsets", "orders"], GivenConfigs(), {})
    assert "__consumer_offsets: Kafka's internal-topic configs" in line
    assert "orders: Kafka's defaults, assumed" in line

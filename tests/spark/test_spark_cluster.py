"""The audit on a Spark standalone cluster (master and one worker on 127.0.0.1, started from
pyspark's own distribution) with PYSPARK_PYTHON unset: the CLI and the API give the reports
local[*] gives, written where --out says, and a corrupt partition is one line, not retried."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spark_tools.standalone import StandaloneCluster
from tests.spark.test_spark_reports import CONFIGS, NOW, build_data_dir
from tests.support.paths import REPO_ROOT

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROOT = REPO_ROOT
TIMEOUT_S = 300


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}


def _run(args: list[str]) -> subprocess.CompletedProcess:
    """A fresh driver process (its own SparkSession), run from the project root."""
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=_env(), capture_output=True,
                          text=True, timeout=TIMEOUT_S)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with StandaloneCluster(tmp_path_factory.mktemp("spark-standalone"), cores=2) as c:
        yield c


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = build_data_dir(tmp_path_factory.mktemp("cluster-audit") / "data")
    (root / "audit.properties").write_text(
        "".join(f"{topic}.{k}={v}\n" for topic, cfg in CONFIGS.items() for k, v in cfg.items()))
    return root


def _audit_cli(master: str, data: Path, out: str, *extra: str) -> subprocess.CompletedProcess:
    return _run(["-m", "logstore", "audit", str(data), "--master", master,
                 "--config-file", str(data / "audit.properties"), "--now", str(NOW),
                 "--out", out, "--format", "json", "--plot", *extra])


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_cli_on_the_cluster_writes_the_reports_local_mode_writes(cluster, data, tmp_path):
    """Against the reports computed without Spark, which local[*] gives (test_spark_reports)."""
    from spark_tools import local_reports
    from spark_tools.report_files import sort_rows

    expected = local_reports(data, data / "audit.properties", NOW)
    out = tmp_path / "cluster-out"
    remote = _audit_cli(cluster.master, data, out.as_uri(),
                        "--conf", f"spark.pyspark.python={sys.executable}",
                        "--conf", "spark.driver.host=127.0.0.1")
    assert remote.returncode == 0, remote.stderr
    assert f"wrote compaction report (json) to {out.as_uri()}/compaction.json" in remote.stdout
    assert sorted(p.name for p in out.iterdir()) == [
        "compaction.json", "reclaimable-bytes.png", "retention.json"]
    for kind in ("compaction", "retention"):
        rows = _rows(out / f"{kind}.json")
        assert rows == json.loads(json.dumps(sort_rows(expected[kind]).to_pylist()))
        assert len(rows) == len(CONFIGS) * 2
        assert [(r["topic"], r["partition"]) for r in rows] == sorted(
            (r["topic"], r["partition"]) for r in rows)


API_SCRIPT = """
import json, sys
from spark_tools import audit_tables, spark_session
spark = spark_session(sys.argv[1], conf={"spark.pyspark.python": sys.executable,
                                         "spark.driver.host": "127.0.0.1"}, py_files=sys.argv[5])
tables = audit_tables(spark, sys.argv[2], sys.argv[3], int(sys.argv[4]))
print(json.dumps({kind: t.to_pylist() for kind, t in tables.items()}))
print(json.dumps(spark.sparkContext.listFiles))
print(spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("extra_mod").VALUE).first())
"""


def test_api_on_the_cluster_equals_the_local_reports(cluster, data, tmp_path):
    import zipfile

    from spark_tools import local_reports

    extra = tmp_path / "extra.zip"
    with zipfile.ZipFile(extra, "w") as zf:
        zf.writestr("extra_mod.py", "VALUE = 'shipped by py_files'\n")
    done = _run(["-c", API_SCRIPT, cluster.master, str(data), str(data / "audit.properties"),
                 str(NOW), str(extra)])
    assert done.returncode == 0, done.stderr
    reports_line, files_line, extra_line = done.stdout.strip().splitlines()[-3:]
    assert extra_line == "shipped by py_files"
    expected = local_reports(data, data / "audit.properties", NOW)
    assert json.loads(reports_line) == {k: t.to_pylist() for k, t in expected.items()}
    assert any(f.endswith(".zip") and "/logstore-" in f for f in json.loads(files_line))


def test_corrupt_partition_on_the_cluster_is_one_line_and_not_retried(cluster, tmp_path):
    from logstore.records import Record, build_batch

    part = tmp_path / "data" / "t-7"
    part.mkdir(parents=True)
    batch = bytearray(build_batch([Record(0, 0, b"k", b"value")]))
    batch[-1] ^= 0xFF
    (part / "00000000000000000000.log").write_bytes(
        bytes(batch) + build_batch([Record(1, 0, b"k", b"v")], base_offset=1))
    done = _run(["-m", "logstore", "audit", str(tmp_path / "data"), "--master", cluster.master,
                 "--report", "compaction", "--config", "cleanup.policy=compact",
                 "--conf", f"spark.pyspark.python={sys.executable}",
                 "--conf", "spark.driver.host=127.0.0.1"])
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.startswith("logstore:")]
    assert lines == [f"logstore: error: partition t-7: batch CRC-32C mismatch "
                     f"({part}/00000000000000000000.log, position 0)"]
    assert "failed 4 times" not in done.stderr and "TaskSetManager" not in done.stderr

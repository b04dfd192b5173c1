"""The project's zip for cluster executors, and the executors' Python setting (no Spark)."""

from __future__ import annotations

import os
import zipfile

from spark_tools import session as session_module
from spark_tools.session import is_local_master
from spark_tools.shipping import PACKAGES, project_zip


def test_zip_holds_every_package_and_no_caches(tmp_path):
    path = project_zip(tmp_path)
    names = zipfile.ZipFile(path).namelist()
    assert {n.split("/", 1)[0] for n in names} == set(PACKAGES)
    assert "spark_tools/reports.py" in names and "logstore/records/batch.py" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".nbi", ".nbc"))]


def test_zip_is_built_once_per_version_and_source_state(tmp_path):
    first = project_zip(tmp_path)
    mtime = first.stat().st_mtime_ns
    assert project_zip(tmp_path) == first and first.stat().st_mtime_ns == mtime
    assert first.name.startswith("logstore-") and [p.name for p in tmp_path.iterdir()] == [first.name]


def test_zip_is_importable(tmp_path):
    import subprocess
    import sys

    path = project_zip(tmp_path)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import spark_tools.reports as r; "
            "print(r.__file__)")
    done = subprocess.run([sys.executable, "-I", "-c", code, str(path)], capture_output=True,
                          text=True, cwd=tmp_path, check=True)
    assert done.stdout.strip().startswith(str(path))


def test_local_masters():
    assert is_local_master("local") and is_local_master("local[*]")
    assert is_local_master("local[4,2]")
    assert not is_local_master("spark://127.0.0.1:7077") and not is_local_master("yarn")
    assert not is_local_master("local-cluster[2,1,1024]")


def test_executor_python_is_set_while_the_context_starts_then_restored(monkeypatch):
    monkeypatch.setenv("PYSPARK_PYTHON", "/usr/bin/python3")
    with session_module._executor_python("/opt/venv/bin/python"):
        assert os.environ["PYSPARK_PYTHON"] == "/opt/venv/bin/python"
    assert os.environ["PYSPARK_PYTHON"] == "/usr/bin/python3"
    monkeypatch.delenv("PYSPARK_PYTHON")
    with session_module._executor_python("/opt/venv/bin/python"):
        assert os.environ["PYSPARK_PYTHON"] == "/opt/venv/bin/python"
    assert "PYSPARK_PYTHON" not in os.environ

"""Extras: without an optional part's libraries, using it stops with one line naming the
`pip install 'logstore[<extra>]'` that brings them (CLI: exit 3; library: MissingExtraError),
and the `kafka_broker` pytest plugin still loads. Each run blocks the libraries' imports in a
fresh interpreter, as if they were not installed."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from logstore import Log, LogstoreError
from logstore.errors import MissingExtraError
from tests.support.paths import REPO_ROOT

BLOCK = "import sys\nfor name in {names!r}: sys.modules[name] = None\n"


def run_without(modules: tuple[str, ...], code: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run `code` in a new interpreter where importing any of `modules` fails."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run([sys.executable, "-c", BLOCK.format(names=modules) + code], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def run_cli_without(modules: tuple[str, ...], *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_without(modules, f"from logstore.cli import main\nsys.exit(main({list(args)!r}))", cwd)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    with Log.open(tmp_path / "data" / "t-0", {"retention.ms": 1000}) as log:
        log.append([(b"k", b"v")])
    return tmp_path / "data"


def test_serve_without_the_server_extra_is_one_line_naming_it(tmp_path: Path):
    result = run_cli_without(("kafka",), "serve", str(tmp_path / "broker"), cwd=tmp_path)
    assert (result.returncode, result.stdout) == (3, "")
    assert result.stderr == ("logstore: error: the Kafka server needs kafka, which is not installed: "
                             "pip install 'logstore[server]'\n")


def test_audit_without_the_spark_extra_is_one_line_naming_it(data_dir: Path):
    result = run_cli_without(("pyspark",), "audit", str(data_dir), cwd=data_dir)
    assert result.returncode == 3
    assert result.stderr.splitlines()[-1] == ("logstore: error: a Spark audit needs pyspark, which is not "
                                              "installed: pip install 'logstore[spark]'")


def test_audit_plot_without_the_plot_extra_stops_before_spark_starts(data_dir: Path):
    result = run_cli_without(("matplotlib", "pyspark"), "audit", "--plot", str(data_dir),
                             cwd=data_dir)
    assert result.returncode == 3
    assert result.stderr.splitlines()[-1] == ("logstore: error: an audit plot needs matplotlib, which is not "
                                              "installed: pip install 'logstore[plot]'")


def test_the_library_raises_missing_extra_naming_the_pip_command(monkeypatch: pytest.MonkeyPatch):
    from spark_tools import spark_session

    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'logstore\[spark\]'") as raised:
        spark_session()
    assert isinstance(raised.value, LogstoreError) and isinstance(raised.value, ImportError)


def test_the_pytest_plugin_loads_without_the_server_extra_and_names_it_when_used(tmp_path: Path):
    (tmp_path / "test_user.py").write_text(
        "def test_plain():\n    pass\n\ndef test_broker(kafka_broker):\n    pass\n")
    installed = any(e.value == "logstore.server.pytest_plugin" for e in entry_points(group="pytest11"))
    load = [] if installed else ["-p", "logstore.server.pytest_plugin"]  # a checkout not yet reinstalled
    code = f"import pytest\nsys.exit(pytest.main({['-q', '-p', 'no:cacheprovider', *load, 'test_user.py']!r}))"
    result = run_without(("kafka",), code, tmp_path)
    assert "1 passed, 1 error" in result.stdout, result.stdout + result.stderr
    assert "MissingExtraError: the Kafka server needs kafka, which is not installed: " \
           "pip install 'logstore[server]'" in result.stdout

"""`pip install logstore` into an empty venv is the engine alone: it imports, appends to and
reads a log, and pytest (with the `pytest11` plugin) starts, with none of the extras' libraries
installed. Slow: it installs from PyPI into a new venv (pip's cache makes reruns quicker)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

PACKAGES = ("logstore", "index", "compaction", "retention", "spark_tools")
EXTRAS_LIBRARIES = ("pyspark", "pandas", "matplotlib", "kafka")
INSTALL_TIMEOUT_S = 1200

ENGINE_SCRIPT = f"""
import importlib.util, sys
from logstore import Log
with Log.open(sys.argv[1]) as log:
    log.append([(b"k", b"v")])
    assert [(r.key, r.value) for r in log.records()] == [(b"k", b"v")]
present = [m for m in {EXTRAS_LIBRARIES!r} if importlib.util.find_spec(m) is not None]
assert not present, present
# the server's generated messages read Kafka's JSON definitions, installed as package data
from pathlib import Path
resources = Path(importlib.util.find_spec("logstore").origin).parent / "server" / "messages" / "resources"
assert (resources / "ConsumerGroupHeartbeatRequest.json").is_file(), sorted(resources.parent.iterdir())
"""

PLUGIN_TEST = """
def test_the_plugin_is_loaded(request):
    assert request.config.pluginmanager.has_plugin("logstore")
"""


def source_copy(target: Path) -> Path:
    """The files pip builds from (pyproject, README, packages), so the build leaves the checkout as it is."""
    target.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, target / name)
    for package in PACKAGES:
        shutil.copytree(REPO_ROOT / package, target / package, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def run(*args: str | Path, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.mark.slow
def test_pip_install_is_the_engine_alone_and_pytest_still_starts(tmp_path: Path):
    venv = tmp_path / "venv"
    assert run(sys.executable, "-m", "venv", venv, cwd=tmp_path).returncode == 0
    python = venv / "bin" / "python"
    installed = run(python, "-m", "pip", "install", "--quiet", source_copy(tmp_path / "src"), "pytest",
                    cwd=tmp_path, timeout=INSTALL_TIMEOUT_S)
    assert installed.returncode == 0, installed.stderr
    engine = run(python, "-c", ENGINE_SCRIPT, tmp_path / "t-0", cwd=tmp_path)
    assert engine.returncode == 0, engine.stderr
    version = run(python, "-m", "pytest", "--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("pytest "), version.stdout + version.stderr
    (tmp_path / "test_user.py").write_text(PLUGIN_TEST)
    user = run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py", cwd=tmp_path)
    assert "1 passed" in user.stdout, user.stdout + user.stderr
    serve = run(venv / "bin" / "logstore", "serve", tmp_path / "broker", cwd=tmp_path)
    assert (serve.returncode, serve.stderr) == (3, "logstore: error: the Kafka server needs kafka, which is "
                                                   "not installed: pip install 'logstore[server]'\n")

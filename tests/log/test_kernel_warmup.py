"""numba kernels are compiled ahead of first use (`python -m logstore.cli.warmup`, run by make),
and compile time never counts as cleaning time."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compaction.cleaner import cleaning_clock
from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT
KERNEL_MODULES = ("logstore._kernels", "logstore._segment_kernels", "logstore._read_kernels", "index._kernels",
                  "logstore.records._kernels", "compaction._kernels", "spark_tools._kernels")


def kernels() -> dict[str, object]:
    """Every top-level numba kernel (helpers, inlined or private, are compiled with the kernels
    that call them)."""
    found = {}
    for name in KERNEL_MODULES:
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            options = getattr(value, "targetoptions", None)
            if options is not None and options.get("inline") != "always" and not attr.startswith("_"):
                found[f"{name}.{attr}"] = value
    return found


@pytest.mark.slow
def test_the_warm_up_compiles_every_kernel_and_later_commands_compile_nothing(tmp_path: Path):
    from logstore.cli.warmup import warm_log, warm_up

    warm_up()
    assert [name for name, kernel in kernels().items() if not kernel.signatures] == []

    data = tmp_path / "data"
    for name, compressed in (("c-0", True), ("p-0", False)):
        warm_log(data, name, compressed=compressed)
    env = {**os.environ, "NUMBA_DEBUG_CACHE": "1"}
    commands = [["dump", "--deep-iteration", "--print-data-log", str(next((data / "c-0").glob("*.log")))],
                ["stats", str(data)], ["consume", str(data), "p-0"], ["verify", str(data)],
                ["compact", "--dry-run", "--config", "delete.retention.ms=0", str(data)],
                ["compact", "--config", "delete.retention.ms=0", str(data)]]
    for command in commands:
        result = subprocess.run([sys.executable, "-m", "logstore", *command], cwd=ROOT, env=env,
                                capture_output=True, text=True, check=False)
        assert "Traceback" not in result.stderr, (command, result.stderr)
        saved = [line for line in (result.stdout + result.stderr).splitlines() if "data saved" in line]
        assert saved == [], (command, saved)


def test_kernel_compile_time_is_left_out_of_the_cleaning_clock():
    from numba import njit

    @njit
    def add_one(x):
        return x + 1

    wall, clock = time.perf_counter(), cleaning_clock()
    assert add_one(1) == 2  # compiles here, once
    compile_wall = time.perf_counter() - wall
    assert compile_wall > 0.01
    assert cleaning_clock() - clock < compile_wall / 2

"""Tests and sources carry their own data: no file in the repository names a path outside it.

A named path counts when it lies under a root that holds users' data (`/work`, `/home`, ...),
when it exists on this machine outside the repository and the system roots, or when a
relative path climbs out of the repository to something that exists. System paths (`/proc`,
`/dev`, `/usr/bin/java`) and made-up labels such as `"/x"` in error-message tests don't count.
Test data belongs in `tests/data/` and is found through `tests.support.paths`."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

# Roots where data of users or of this machine's jobs lives; naming one ties a file to a machine.
USER_DATA_ROOTS = ("/work", "/home", "/Users", "/root", "/mnt", "/media", "/srv", "/data",
                   "/scratch", "/shared")
# The operating system's own paths: present on every machine, never the project's data.
SYSTEM_ROOTS = ("/proc", "/dev", "/sys", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc")
SCANNED_SUFFIXES = {".py", ".toml", ".cfg", ".ini", ".sh", ".md", ".txt", ".yml", ".yaml"}
SCANNED_NAMES = {"Makefile", "run"}
# Generated or installed trees; tests/data is skipped too (Kafka's sample is data, not a file
# that names paths).
SKIPPED_DIRS = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis",
                ".benchmarks", "build", "demo-data", "audit-out"}
# An absolute or parent-relative path, starting where a path can start in code or prose.
PATH = re.compile(r"""(?:^|(?<=[\s"'`(\[=,:]))(/[\w.-]+(?:/[\w.*-]+)*|\.\.(?:/[\w.*-]+)+)""")


def outside_paths(text: str, directory: Path, root: Path) -> list[str]:
    """The paths `text` (a file in `directory`) names outside the repository at `root`."""
    return [name for name in PATH.findall(text) if _outside(name, directory, root)]


def _outside(name: str, directory: Path, root: Path) -> bool:
    if name.startswith(".."):
        return any(_reaches_outside((base / name).resolve(), root) for base in (directory, root))
    if _under(name, USER_DATA_ROOTS):
        return not Path(name).is_relative_to(root)
    return not _under(name, SYSTEM_ROOTS) and os.path.lexists(name) \
        and not Path(name).resolve().is_relative_to(root)


def _reaches_outside(target: Path, root: Path) -> bool:
    """Whether `target` lies in something existing beside the repository, not merely above it."""
    while not os.path.lexists(target):
        target = target.parent
    return not target.is_relative_to(root) and not root.is_relative_to(target)


def _under(name: str, roots: tuple[str, ...]) -> bool:
    return any(name == r or name.startswith(r + "/") for r in roots)


def scanned_files(root: Path) -> list[Path]:
    """Every source, test, build and documentation file of the repository at `root`."""
    files = []
    test_data = root / "tests" / "data"
    for directory, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS and not d.endswith(".egg-info")
                   and Path(directory) / d != test_data]
        for name in names:
            path = Path(directory) / name
            if path.suffix in SCANNED_SUFFIXES or name in SCANNED_NAMES:
                files.append(path)
    return files


def test_no_file_names_a_path_outside_the_repository():
    this_module = Path(__file__).resolve()
    offenders = {
        str(path.relative_to(REPO_ROOT)): names
        for path in scanned_files(REPO_ROOT) if path.resolve() != this_module
        if (names := outside_paths(path.read_text(errors="replace"), path.parent, REPO_ROOT))
    }
    assert offenders == {}


def test_the_scan_covers_sources_tests_and_build_files():
    scanned = {str(p.relative_to(REPO_ROOT)) for p in scanned_files(REPO_ROOT)}
    assert {"Makefile", "pyproject.toml", "logstore/log.py", "tests/support/paths.py",
            "tests/test_repository_data.py"} <= scanned
    assert not any(p.startswith("tests/data/") for p in scanned)


@pytest.mark.parametrize("text", [
    'SAMPLES = Path("/work/elsewhere/kafka-samples/plain")',
    "copied from /home/someone/kafka-logs",
    "Layouts: /work/notes/FORMAT.md.",
])
def test_a_path_under_a_user_data_root_is_found(tmp_path, text):
    assert outside_paths(text, tmp_path, tmp_path) != []


def test_a_relative_path_climbing_out_to_something_real_is_found(tmp_path):
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (tmp_path / "sibling").mkdir()
    assert outside_paths('open("../sibling/sample")', repo, repo) == ["../sibling/sample"]
    assert outside_paths('open("../../sibling")', repo / "tests", repo) == ["../../sibling"]


def test_an_existing_path_outside_the_system_roots_is_found(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    repo = tmp_path / "repo"
    repo.mkdir()
    assert outside_paths(f'open("{outside}")', repo, repo) == [str(outside)]


@pytest.mark.parametrize("text", [
    'open("/proc/self/status")', 'open("/dev/null")', "a Java runtime (`/usr/bin/java`)",
    'dump.read_aborted_txns(data, "/x")', '"../escape" is refused as a topic name',
    "https://kafka.apache.org/documentation", 'f"{directory}/00000000000000000000.log"',
    "tests/data/kafka-samples/plain",
])
def test_system_paths_labels_and_repository_paths_are_not_found(tmp_path, text):
    assert outside_paths(text, tmp_path, tmp_path) == []

"""The project's code as one zip for Spark executors (``SparkContext.addPyFile``).

A cluster's executors start their own Python workers, which import ``spark_tools``,
``logstore`` and the policies to run an audit task. The zip holds exactly the project's
packages, as this process imports them, so executors run the same code as the driver. It is
built once per package version and source state and cached under the user's cache directory.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

PACKAGES = ("logstore", "index", "compaction", "retention", "spark_tools")
"""The top-level packages executors need (the distribution's packages, see pyproject.toml)."""

_SKIPPED_DIRS = {"__pycache__"}
_SKIPPED_SUFFIXES = (".pyc", ".pyo", ".nbi", ".nbc")


def _package_files() -> list[tuple[Path, str]]:
    """(file, name inside the zip) for every source file of PACKAGES, in a stable order."""
    files = []
    for name in PACKAGES:
        root = Path(importlib.import_module(name).__file__).parent
        for directory, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_DIRS)
            for filename in sorted(filenames):
                if filename.endswith(_SKIPPED_SUFFIXES):
                    continue
                path = Path(directory) / filename
                files.append((path, f"{name}/{path.relative_to(root).as_posix()}"))
    return files


def _version() -> str:
    try:
        return metadata.version("logstore")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    path = Path(base) / "logstore" / "pyfiles"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        path = Path(tempfile.gettempdir()) / f"logstore-pyfiles-{os.getuid()}"
        path.mkdir(parents=True, exist_ok=True)
    return path


def project_zip(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The path of a zip of PACKAGES, built once per version and source state.

    The file name carries the version and a digest of every file's name, size and mtime, so
    an edited checkout gets a new zip and an unchanged one reuses the cached file.
    """
    files = _package_files()
    digest = hashlib.sha256()
    for path, arcname in files:
        stat = path.stat()
        digest.update(f"{arcname}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    directory = Path(cache_dir) if cache_dir is not None else _cache_dir()
    target = directory / f"logstore-{_version()}-{digest.hexdigest()[:16]}.zip"
    if target.exists():
        return target
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, arcname in files:
            zf.write(path, arcname)
    os.replace(tmp, target)
    return target

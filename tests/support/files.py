"""Directory digests: to show that a command or a server left files exactly as they were."""

from __future__ import annotations

import hashlib
from pathlib import Path


def directory_digest(root: Path, pattern: str = "**/*") -> dict[str, str]:
    """Relative path -> sha256 of each file under `root` matching `pattern` ("dir" for
    directories, so an added or removed directory shows too)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(Path(root).glob(pattern))}

"""What a power loss leaves of a partition directory: the bytes written since the last fsync
never reached the disk. A log knows how far it has fsynced (its recovery point: every offset
below it is on disk, the rest only in the page cache), so the loss is its segment files cut
back there; the files of segments that begin past it (rolled since) are gone.

A process killed by SIGKILL loses nothing of this (the kernel still writes its page cache), so
a power loss is that kill followed by `drop_unflushed`.
"""

from __future__ import annotations

import os
from pathlib import Path

from logstore.records import iter_batches

OFFSET_DIGITS = 20  # segment and snapshot files are named by a zero-padded offset (FORMAT.md)


def _offset_of(path: Path) -> int | None:
    """The offset a segment, index or snapshot file is named by (None for other files)."""
    stem = path.name.split(".", 1)[0]
    return int(stem) if len(stem) == OFFSET_DIGITS and stem.isdigit() else None


def drop_unflushed(partition_dir: Path, recovery_point: int) -> int:
    """Cut `partition_dir`'s log back to `recovery_point` as a power loss would: the segment
    holding it ends at its first batch from there, files named past it go. Returns the bytes
    of segment files dropped. The next open finds no clean-shutdown marker and recovers."""
    dropped = 0
    holding = max((o for p in partition_dir.glob("*.log") if (o := _offset_of(p)) is not None
                   and o <= recovery_point), default=None)
    for path in sorted(partition_dir.iterdir()):
        offset = _offset_of(path)
        if offset is None:
            continue
        if offset > recovery_point:
            if path.suffix == ".log":
                dropped += path.stat().st_size
            path.unlink()
        elif offset == holding and path.suffix == ".log":
            data = path.read_bytes()
            end = next((b.position for b in iter_batches(data) if b.base_offset >= recovery_point), len(data))
            os.truncate(path, end)
            dropped += len(data) - end
    return dropped

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

from logstore.log_files import LOG_SUFFIX, offset_from_file_name, segment_log_offsets
from logstore.records import iter_batches


def drop_unflushed(partition_dir: Path, recovery_point: int) -> int:
    """Cut `partition_dir`'s log back to `recovery_point` as a power loss would: the segment
    holding it ends at its first batch from there, files named past it go. Returns the bytes
    of segment files dropped. The next open finds no clean-shutdown marker and recovers."""
    dropped = 0
    paths = sorted(partition_dir.iterdir())
    holding = max((o for o in segment_log_offsets(p.name for p in paths) if o <= recovery_point), default=None)
    for path in paths:
        offset = offset_from_file_name(path.name)
        if offset is None:
            continue
        if offset > recovery_point:
            if path.suffix == LOG_SUFFIX:
                dropped += path.stat().st_size
            path.unlink()
        elif offset == holding and path.suffix == LOG_SUFFIX:
            data = path.read_bytes()
            end = next((b.position for b in iter_batches(data) if b.base_offset >= recovery_point), len(data))
            os.truncate(path, end)
            dropped += len(data) - end
    return dropped

"""A file on any pyarrow filesystem read by byte ranges (``RandomAccessFile.read_at``).

``read_at(position, size)`` is the positional read the engine's entry walk takes
(``logstore.log_input_stream.scan_entries``), so a remote segment is walked the way a local one
is and only the ranges the walk asks for leave the store: a header walk over large batches
fetches a small window at each batch header and skips the bodies. Reads that follow on from
the last one (small batches, or a full scan) double the window up to ``MAX_READ_BYTES``, so an
object store sees a few large range requests, not one per batch.
"""

from __future__ import annotations

import pyarrow.fs as pafs

MIN_READ_BYTES = 16 << 10  # a jump (the next header past the window) reads this much
MAX_READ_BYTES = 8 << 20  # reads that follow on from the last grow up to this


class RangedFile:
    """``with RangedFile(fs, path) as f:`` ``f.size`` and ``f.read_at(position, size)``.

    ``read_at`` returns at least ``size`` bytes from ``position`` (fewer only at the end of the
    file), possibly more: the rest of the window fetched with them. A byte is fetched once while
    reads move forward; ``bytes_read`` counts what came from the filesystem.
    """

    def __init__(self, filesystem: pafs.FileSystem, path: str) -> None:
        self._file = filesystem.open_input_file(path)
        self.size: int = self._file.size()
        self.bytes_read = 0
        self._window = memoryview(b"")
        self._start = 0
        self._read = MIN_READ_BYTES

    def read_at(self, position: int, size: int) -> memoryview:
        """The bytes at ``position``: at least ``size`` of them unless the file ends first."""
        end = self._start + len(self._window)
        if self._start <= position and position + size <= end:
            return self._window[position - self._start:]
        follows_on = len(self._window) > 0 and self._start <= position <= end
        self._read = min(self._read * 2, MAX_READ_BYTES) if follows_on else MIN_READ_BYTES
        want = max(0, min(max(size, self._read), self.size - position))
        # The window's tail from `position` (a batch cut by its end) is kept, not fetched again.
        kept = self._window[position - self._start:] if follows_on else memoryview(b"")
        fetched = self._file.read_at(want - len(kept), position + len(kept))
        self.bytes_read += len(fetched)
        self._window = memoryview(b"".join((kept, fetched)) if kept else fetched)
        self._start = position
        return self._window

    def close(self) -> None:
        """Close the filesystem's handle."""
        self._file.close()

    def __enter__(self) -> RangedFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

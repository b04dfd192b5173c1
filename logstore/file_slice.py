"""FileSlice: whole batches of a segment's `.log` file as a byte range held open for a send
(Kafka's FileRecords slice, sent with FileRecords.transferTo): the server's fetch path hands
it to `sendfile`, so record bytes go from the page cache to the socket without passing
through Python objects.

A slice holds the segment's `.log` descriptor pinned in the descriptor pool
(logstore.descriptor_pool): the pool does not give it back, and a segment closed or deleted
meanwhile closes it only at the last unpin, so its number is not reused under the send. The
holder closes the slice once sent, which unpins it.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from logstore.errors import FileSliceTruncatedError, LogClosedError


class FileSlice:
    """`size` bytes from `position` of the open file `fd`; `release` unpins the descriptor
    (called once, by `close`, or when the slice is dropped unclosed)."""

    __slots__ = ("_fd", "_release", "position", "size")

    def __init__(self, fd: int, position: int, size: int, release: Callable[[], None]) -> None:
        self._fd = fd
        self._release: Callable[[], None] | None = release
        self.position = position
        self.size = size

    def __len__(self) -> int:
        return self.size

    def fileno(self) -> int:
        """The descriptor to send from; raises LogClosedError once closed."""
        if self._release is None:
            raise LogClosedError(f"file slice [{self.position}, {self.position + self.size}) is closed")
        return self._fd

    def read(self) -> bytes:
        """The slice's bytes, copied (for a transport that cannot send from a file); raises
        FileSliceTruncatedError when the file was cut below the slice's end since it was taken."""
        data = os.pread(self.fileno(), self.size, self.position)
        if len(data) != self.size:
            raise FileSliceTruncatedError(f"file slice [{self.position}, {self.position + self.size}) was truncated "
                                 f"to {len(data)} bytes")
        return data

    def close(self) -> None:
        """Unpin the descriptor; further calls do nothing."""
        release, self._release = self._release, None
        if release is not None:
            release()

    def __del__(self) -> None:
        self.close()

    def __enter__(self) -> FileSlice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FileSlice(position={self.position}, size={self.size})"

"""One owner per directory: an exclusive `flock` on `<dir>/.lock` (the file name Kafka uses)."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from logstore.errors import LogLockedError

LOCK_FILE_NAME = ".lock"


class DirectoryLock:
    """An exclusive, non-blocking lock on a directory, held until `release()`.

    `flock` locks belong to the open file description, so a second lock of the same directory
    fails both in another process and in this one. The kernel drops the lock if the process dies.
    """

    def __init__(self, directory: str | os.PathLike[str]):
        self.directory = Path(directory)
        self.path = self.directory / LOCK_FILE_NAME
        self._fd: int | None = None

    def acquire(self) -> DirectoryLock:
        """Take the lock; raises LogLockedError if anyone holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise LogLockedError(
                    f"{self.directory} is in use by another owner (lock held on {self.path})"
                ) from None
            raise
        self._fd = fd
        return self

    @property
    def held(self) -> bool:
        """True while this object holds the lock."""
        return self._fd is not None

    def release(self) -> None:
        """Drop the lock (idempotent). The `.lock` file stays, as with Kafka."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> DirectoryLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

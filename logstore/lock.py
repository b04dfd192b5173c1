"""One owner per directory: an exclusive `flock` on `<dir>/.lock` (the file name Kafka uses).

A LogManager locks its data directory (ManagerLock) and thereby owns every partition directory
in it, as Kafka's LogManager does: its partitions hold no descriptor of their own (a descriptor
per partition would exhaust the limit at a few thousand partitions). A partition it claims
(PartitionClaim) is checked free of standalone writers when claimed, and standalone opens of it
(`lock_partition`) are refused while claimed, or while another process's LogManager owns the
data directory.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
from collections.abc import Iterable
from pathlib import Path

from logstore.errors import LogLockedError

LOCK_FILE_NAME = ".lock"

#: Data directories a LogManager of this process owns (by device and inode, as symlinks or
#: relative names may reach them) -> names of the partitions it holds.
_managed: dict[tuple[int, int], set[str]] = {}
_managed_lock = threading.Lock()


def try_flock(fd: int, operation: int) -> bool:
    """`flock(fd, operation | LOCK_NB)`: True when taken, False when another open file
    description holds a conflicting lock."""
    try:
        fcntl.flock(fd, operation | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def open_locked(path: str | os.PathLike[str], operation: int) -> int | None:
    """A descriptor of `path` (created if missing) holding the non-blocking `operation` lock
    (LOCK_SH or LOCK_EX); None, with nothing left open, when a conflicting lock is held."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        taken = try_flock(fd, operation)
    except BaseException:
        os.close(fd)
        raise
    if not taken:
        os.close(fd)
        return None
    return fd


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
        fd = open_locked(self.path, fcntl.LOCK_EX)
        if fd is None:
            raise LogLockedError(f"{self.directory} is in use by another owner (lock held on {self.path})")
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


class ManagerLock(DirectoryLock):
    """A LogManager's lock on its data directory, which also makes it the owner of the partition
    directories in it (see PartitionClaim)."""

    def acquire(self) -> ManagerLock:
        """Take the lock; raises LogLockedError if anyone holds it."""
        super().acquire()
        with _managed_lock:
            _managed[_identity(self.directory)] = set()
        return self

    def claim_listed(self, names: Iterable[str]) -> None:
        """Claim the partitions a listing found before their logs open: standalone opens of them
        are refused from now on (each PartitionClaim still checks its partition when it opens)."""
        with _managed_lock:
            _managed[_identity(self.directory)].update(names)

    def release_claim(self, name: str) -> None:
        """Give back the partition `name` (idempotent): a deleted one, whatever claimed it."""
        with _managed_lock:
            _managed.get(_identity(self.directory), set()).discard(name)

    def release(self) -> None:
        """Drop the lock and the ownership of its partitions (idempotent)."""
        if self.held:
            with _managed_lock:
                _managed.pop(_identity(self.directory), None)
        super().release()


class PartitionClaim:
    """A partition directory held by its data directory's LogManager (of this process), without a
    descriptor: standalone opens of it are refused until `release()`."""

    def __init__(self, directory: str | os.PathLike[str]):
        self.directory = Path(directory)
        self._key: tuple[tuple[int, int], str] | None = None

    def acquire(self) -> PartitionClaim:
        """Claim the partition; LogLockedError if a standalone writer holds it."""
        key = (_identity(self.directory.parent), self.directory.name)
        with _managed_lock:
            names = _managed.get(key[0])
            if names is None:
                raise ValueError(f"{self.directory.parent} is not the data directory of a LogManager of this process")
            DirectoryLock(self.directory).acquire().release()  # free of standalone writers now
            names.add(key[1])
        self._key = key
        return self

    def release(self) -> None:
        """Give the partition back (idempotent)."""
        if self._key is not None:
            parent, name = self._key
            with _managed_lock:
                _managed.get(parent, set()).discard(name)
            self._key = None


def lock_partition(directory: str | os.PathLike[str]) -> DirectoryLock:
    """The lock of a standalone writer of the partition directory `directory`; LogLockedError if
    anyone holds it, if this process's LogManager holds the partition, or if a LogManager of
    another process owns its data directory."""
    path = Path(directory)
    parent = path.absolute().parent
    with _managed_lock:
        names = _managed.get(_identity(parent))
        if names is not None and path.name in names:
            raise LogLockedError(f"{directory} is held by the LogManager of {parent}")
        if names is None and _held_exclusively(parent / LOCK_FILE_NAME):
            raise LogLockedError(f"{directory} belongs to {parent}, owned by a LogManager of another process")
        return DirectoryLock(directory).acquire()


def _identity(directory: Path) -> tuple[int, int]:
    """The directory's device and inode."""
    stat = os.stat(directory)
    return stat.st_dev, stat.st_ino


def _held_exclusively(path: Path) -> bool:
    """True when some other open file description holds an exclusive `flock` on `path`."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        return not try_flock(fd, fcntl.LOCK_SH)
    finally:
        os.close(fd)  # drops the shared lock taken, if any

"""The clean-shutdown marker `.kafka_cleanshutdown` of a data directory (Kafka's
CleanShutdownFileHandler): written last by a clean stop, with the broker epoch the stopping
broker held, so that the next registration can show it as KIP-903's previous broker epoch
(KIP-966 treats a mismatch as an unclean shutdown). Opening the directory for writing takes the
marker away: a later stop that is not clean (kill -9, power loss) then leaves none.

Standalone logs (no LogManager) share their parent directory's marker: the first one opened
in this process takes it, the last one closed cleanly writes it back, unless writers of another
process are still open there. Each process with writers holds a shared `flock` on the data
directory's `.lock` (a LogManager holds it exclusively), so a clean close in one process never
vouches for logs another process is still writing and may yet crash.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from pathlib import Path

from logstore.checkpoint import atomic_write, fsync_dir
from logstore.lock import LOCK_FILE_NAME, open_locked, try_flock
from logstore.log_files import CLEAN_SHUTDOWN_FILE
from logstore.log_loader import LoadState

#: The broker epoch of a replica that never registered, or of a marker that names none.
NO_BROKER_EPOCH = -1
_VERSION = "0"

#: data directory -> (standalone logs open on it in this process, the descriptor holding the
#: shared lock on its `.lock`, or None when another owner holds the directory exclusively)
_claims: dict[Path, tuple[int, int | None]] = {}
_claims_lock = threading.Lock()


def marker_bytes(broker_epoch: int = NO_BROKER_EPOCH) -> bytes:
    """The marker's content: Kafka's JSON, string values in its HashMap order."""
    return json.dumps({"broker_epoch": str(broker_epoch), "version": _VERSION},
                      separators=(",", ":")).encode()


def write_marker(data_dir: Path, broker_epoch: int = NO_BROKER_EPOCH) -> None:
    """Write the marker of a clean stop of `data_dir` (atomically: write, fsync, rename)."""
    atomic_write(data_dir / CLEAN_SHUTDOWN_FILE, marker_bytes(broker_epoch))


def read_marker(data_dir: Path) -> int | None:
    """None without a marker (the last stop was not clean); else the broker epoch it holds
    (NO_BROKER_EPOCH when it names none or is unreadable, as Kafka's handler reads it)."""
    try:
        text = (data_dir / CLEAN_SHUTDOWN_FILE).read_bytes()
    except FileNotFoundError:
        return None
    try:
        return int(json.loads(text)["broker_epoch"])
    except (ValueError, KeyError, TypeError):
        return NO_BROKER_EPOCH


def claim(data_dir: Path) -> int | None:
    """A standalone log opens `data_dir` for writing: read the marker (see `read_marker`) and,
    if no other standalone log of this process holds the directory, remove it. None (recover)
    when another log of this process holds it, or a LogManager owns the directory."""
    key = data_dir.resolve()
    with _claims_lock:
        held, fd = _claims.get(key, (0, None))
        if held:
            _claims[key] = (held + 1, fd)
            return None  # the first one took the marker; this log cannot know how the last stop went
        fd = _lock_shared(data_dir)
        _claims[key] = (1, fd)
        if fd is None:
            return None  # a LogManager owns the directory and its marker
        broker_epoch = read_marker(data_dir)
        if broker_epoch is not None:
            (data_dir / CLEAN_SHUTDOWN_FILE).unlink()
            fsync_dir(data_dir)  # a marker back from the dead would vouch for a crash after this open
        return broker_epoch


def release(data_dir: Path, broker_epoch: int | None) -> None:
    """A standalone log of `data_dir` stops: cleanly with `broker_epoch` (the last one out of
    every process writes the marker), or, with None, after a failed open (no marker)."""
    key = data_dir.resolve()
    with _claims_lock:
        left, fd = _claims.get(key, (1, None))
        if left > 1:
            _claims[key] = (left - 1, fd)
            return
        _claims.pop(key, None)
        if fd is None:
            return
        try:
            if broker_epoch is not None and _only_holder(fd):
                write_marker(data_dir, broker_epoch)
        finally:
            os.close(fd)  # drops the lock


def _lock_shared(data_dir: Path) -> int | None:
    """A descriptor holding a shared lock on `data_dir/.lock`; None if it is held exclusively."""
    return open_locked(data_dir / LOCK_FILE_NAME, fcntl.LOCK_SH)


def _only_holder(fd: int) -> bool:
    """True when no other process holds the shared lock `fd` holds (it becomes exclusive)."""
    return try_flock(fd, fcntl.LOCK_EX)


class MarkerClaim:
    """A standalone log's hold on its data directory's marker, from its open to its close."""

    def __init__(self, data_dir: Path, load_state: LoadState):
        self.data_dir = data_dir
        self.broker_epoch = claim(data_dir)
        load_state.clean_shutdown = self.broker_epoch is not None
        self._held = True

    def release(self, broker_epoch: int | None) -> None:
        """Give the hold back (once): a clean stop naming `broker_epoch`, or None (no marker)."""
        if self._held:
            self._held = False
            release(self.data_dir, broker_epoch)

"""LazyLog: a partition of a LogManager's data directory whose Log opens on first use, once.

A manager learns its partitions from the directory listing and the checkpoints: opening every
Log at start took half a millisecond a partition (5 s at 10,000) before a server could answer
anything. Until the Log is open, the partition's checkpointed offsets stand for the log's, and
the load state it was found with (clean shutdown or not) is what its open recovers from.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from logstore.config import LogConfig
from logstore.errors import LogClosedError
from logstore.log import Log
from logstore.log_loader import LoadState


class LazyLog:
    """One partition directory and what opening its Log needs; `open()` opens it once, under
    the partition's own lock, so concurrent first uses get the same Log and a slow open holds
    up no other partition."""

    __slots__ = ("_lock", "_log", "_opener", "_retired", "config", "data_dir", "name", "origin", "state")

    def __init__(self, data_dir: Path, name: str, config: LogConfig, origin: str | None, state: LoadState,
                 opener: Callable[[LazyLog], Log]) -> None:
        self.data_dir = data_dir
        self.name = name  # the partition directory's name, `<topic>-<partition>`
        self.config = config
        self.origin = origin  # logstore.topic_configs ORIGIN_*: where the config came from
        self.state = state
        self._opener = opener
        self._lock = threading.Lock()
        self._log: Log | None = None
        self._retired = False

    @property
    def path(self) -> Path:
        """The partition directory (built on use: a Path per partition cost a reopen 10%)."""
        return self.data_dir / self.name

    @property
    def log(self) -> Log | None:
        """The Log once opened, else None."""
        return self._log

    @property
    def config_origin(self) -> str | None:
        """Where the partition's config came from (the Log's, once open)."""
        log = self._log
        return self.origin if log is None else log.config_origin

    @property
    def retired(self) -> bool:
        """True once `retire()` ran."""
        return self._retired

    @property
    def needs_recovery(self) -> bool:
        """Not opened since a start that was not clean: its segments may hold a torn tail."""
        return self._log is None and not self.state.clean_shutdown

    def open(self) -> Log:
        """The partition's Log, opened (and recovered, after an unclean shutdown) on the first
        call; the open's error propagates and the next call tries again. LogClosedError when
        retired (deleted, or its manager closed) before it was opened."""
        log = self.open_unless_retired()
        if log is None:
            raise LogClosedError(f"partition {self.name} of {self.data_dir} is closed")
        return log

    def open_unless_retired(self) -> Log | None:
        """As `open`, but None instead of LogClosedError."""
        log = self._log
        if log is not None:
            return log
        with self._lock:
            if self._log is None and not self._retired:
                self._log = self._opener(self)
            return self._log

    def set_config(self, config: LogConfig, origin: str) -> None:
        """Make `config` the partition's, the open Log's included."""
        with self._lock:
            self.config, self.origin = config, origin
            if self._log is not None:
                self._log.config = config
                self._log.config_origin = origin

    def offset(self, attribute: str) -> int | None:
        """The Log's `attribute` (recovery_point, log_start_offset, high_watermark) once open,
        else the checkpointed one it will open with (None: none checkpointed)."""
        log = self._log
        if log is not None:
            return getattr(log, attribute)
        return getattr(self.state, attribute)  # LoadState names them as Log does

    def retire(self, *, abandon: bool = False) -> None:
        """Close the Log if open (`abandon`: let it go unflushed, as a killed process does,
        Log.abandon); later opens raise LogClosedError."""
        with self._lock:
            self._retired = True
            if self._log is not None:
                (self._log.abandon if abandon else self._log.close)()


"""The policies the core is handed rather than imports, as Protocols: a retention pass and a
background log cleaner. `retention` and `compaction` provide them; whoever builds a LogManager
or a replication Partition passes them in (the core never imports those packages).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Protocol

from logstore.clock import Clock
from logstore.config import LogConfig
from logstore.log_like import SegmentedLogLike


class RetentionPass(Protocol):
    """One retention pass over a log, atomic under its lock (retention.apply_retention)."""

    def __call__(self, log: SegmentedLogLike, *, now_ms: int | None = None) -> object: ...


class BackgroundCleaner(Protocol):
    """The log cleaner a LogManager drives (compaction.LogCleaner)."""

    @property
    def enabled(self) -> bool: ...

    def run_until_idle(self, now_ms: int | None = None) -> object: ...

    def exclusive(self, log: SegmentedLogLike) -> AbstractContextManager[None]: ...

    def start(self) -> None: ...

    def stop(self, *, wait: bool = True) -> None: ...


class CleanerFactory(Protocol):
    """Builds a LogManager's cleaner over its logs, given its default config and clock
    (compaction.LogCleaner is one)."""

    def __call__(self, logs: Callable[[], Iterable[SegmentedLogLike]], config: LogConfig, *,
                 clock: Clock) -> BackgroundCleaner: ...

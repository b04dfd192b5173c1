"""What the layers above the core use of a Log, as Protocols (compaction, retention and
replication are written against these, not against `Log`).

`LogLike` is a replica's log as replication drives it: `Log` and the replication simulation's
in-memory log provide it. `SegmentedLogLike` adds the segment files that retention and the
cleaner act on; `Log` provides it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from logstore.clock import Clock
from logstore.config import LogConfig
from logstore.epoch import LeaderEpochFileCache
from logstore.log_results import AppendInfo, FetchResult
from logstore.segment import LogSegment


class LogLike(Protocol):
    """Offsets, the high watermark, leader and follower appends, reads, truncation and the log
    start offset of one partition replica."""

    topic: str
    partition: int
    high_watermark: int
    high_watermark_follows_log_end: bool

    @property
    def config(self) -> LogConfig: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    def append(self, records: Any, *, leader_epoch: int = 0) -> AppendInfo: ...

    def append_as_follower(self, batch_bytes: bytes | bytearray | memoryview) -> AppendInfo: ...

    def read(self, offset: int, max_bytes: int = 1_048_576, *, max_offset: int | None = None) -> FetchResult: ...

    def truncate_to(self, offset: int) -> bool: ...

    def truncate_fully_and_start_at(self, offset: int) -> None: ...

    def maybe_increment_log_start_offset(self, offset: int, reason: str = ...) -> bool: ...

    @property
    def leader_epoch_cache(self) -> LeaderEpochFileCache: ...

    def assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None: ...

    @property
    def had_clean_shutdown(self) -> bool:
        """True when it was opened after a clean stop (the clean-shutdown marker was there)."""
        ...

    def close(self, *, broker_epoch: int = ...) -> None:
        """A clean stop, leaving the clean-shutdown marker naming `broker_epoch` where it owns one."""
        ...


class SegmentedLogLike(LogLike, Protocol):
    """A LogLike kept in segment files: what retention and the cleaner read and change. The
    cleaner also reads `last_stable_offset` and `producer_state` where a log has them.
    `config_origin` None means the topic's configs are unknown: retention and cleaning refuse."""

    config_origin: str | None

    @property
    def dir(self) -> Path: ...

    @property
    def segments(self) -> Sequence[LogSegment]: ...

    @property
    def closed(self) -> bool: ...

    @property
    def read_only(self) -> bool: ...

    def locked(self) -> AbstractContextManager[None]: ...

    def roll(self) -> LogSegment: ...

    def delete_segments(self, segments: Iterable[LogSegment], reason: str = ...) -> int: ...

    def replace_segments(self, new_segments: Sequence[LogSegment], old_segments: Sequence[LogSegment]) -> None: ...

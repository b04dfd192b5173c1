"""SegmentOptions: what a LogSegment is opened or created with, in one immutable object
(Kafka's LogSegment.open takes the LogConfig the same way), built from a LogConfig by `of`."""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from typing import Any

from logstore.clock import Clock, SystemClock
from logstore.config import LogConfig

DEFAULT_INDEX_INTERVAL_BYTES = 4096
DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class SegmentOptions:
    """How a segment indexes (index.interval.bytes, segment.index.bytes), tells time, whether it
    may change its files, its roll jitter and the suffix its file names carry ('.swap', …)."""

    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    max_index_size: int = DEFAULT_MAX_INDEX_SIZE
    clock: Clock = dataclasses.field(default_factory=SystemClock)
    read_only: bool = False
    roll_jitter_ms: int = 0
    file_suffix: str = ""

    @classmethod
    def of(cls, config: LogConfig, clock: Clock, **changes: Any) -> SegmentOptions:
        """The options a log with `config` and `clock` opens its segments with, and `changes`."""
        return cls(index_interval_bytes=config.index_interval_bytes, max_index_size=config.segment_index_bytes,
                   clock=clock, **changes)

    def replace(self, **changes: Any) -> SegmentOptions:
        """These options with `changes` (e.g. `file_suffix`, `read_only`)."""
        return dataclasses.replace(self, **changes)


def roll_jitter_ms(config: LogConfig) -> int:
    """A new active segment's random segment.jitter.ms share (Kafka's randomSegmentJitter)."""
    jitter = config.segment_jitter_ms
    if jitter == 0:
        return 0
    return random.randrange(2**31) % min(jitter, config.segment_ms)

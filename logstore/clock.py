"""Clocks: the engine reads time only through an injected object with `time_ms() -> int`."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Anything with `time_ms()` returning wall-clock milliseconds since the epoch."""

    def time_ms(self) -> int:
        """Current time in milliseconds since the Unix epoch."""
        ...


class SystemClock:
    """The real wall clock."""

    def time_ms(self) -> int:
        """Current wall-clock time in milliseconds since the Unix epoch."""
        return time.time_ns() // 1_000_000

    def __repr__(self) -> str:
        return "SystemClock()"


class ManualClock:
    """A clock that moves only when told to; for tests and deterministic replays."""

    def __init__(self, now_ms: int = 0):
        self._now_ms = int(now_ms)

    def time_ms(self) -> int:
        """The time last set or advanced to."""
        return self._now_ms

    def advance(self, ms: int) -> int:
        """Move forward by `ms` (>= 0) and return the new time."""
        if ms < 0:
            raise ValueError(f"a clock does not go backwards (advance by {ms})")
        self._now_ms += int(ms)
        return self._now_ms

    def set(self, now_ms: int) -> None:
        """Jump to `now_ms` (any value; tests of clock skew may go backwards)."""
        self._now_ms = int(now_ms)

    def __repr__(self) -> str:
        return f"ManualClock({self._now_ms})"


SYSTEM_CLOCK = SystemClock()

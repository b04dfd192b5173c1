"""LogCleaner: background cleaning of a set of logs (Kafka's LogCleaner + LogCleanerManager).

`run_once(now_ms)` cleans the dirtiest due compacted log (tests drive it with a fake clock;
logs whose topic configs are unknown are left alone);
`start()` runs `log.cleaner.threads` threads doing the same, sleeping `log.cleaner.backoff.ms`
when nothing is due. A log is cleaned by one thread at a time. `stop(wait=True)` lets running
cleans finish; `stop(wait=False)` aborts them at their next segment (the group in progress is
not swapped in, its `.cleaned` files are removed and the checkpoint does not move).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from compaction.cleaner import Cleaner, CleanResult
from compaction.selection import dirtiest
from logstore.clock import Clock, SystemClock
from logstore.config import LogConfig
from logstore.errors import LogCleaningAbortedError, LogClosedError
from logstore.log_like import SegmentedLogLike


class LogCleaner:
    """Cleans the compacted logs returned by `logs()`; broker settings come from `config`."""

    def __init__(self, logs: Callable[[], Iterable[SegmentedLogLike]], config: LogConfig | Mapping[str, Any] | None = None,
                 *, clock: Clock | None = None) -> None:
        self._logs = logs
        self.config = LogConfig.coerce(config)
        self._clock = clock or SystemClock()
        self._lock = threading.Condition()
        self._in_progress: set[tuple[str, int]] = set()
        self._idle: list[Cleaner] = []
        self._running: dict[int, Cleaner] = {}
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self.results: list[CleanResult] = []  # the last results, newest last (bounded)

    @property
    def enabled(self) -> bool:
        """log.cleaner.enable and at least one cleaner thread."""
        return bool(self.config["log.cleaner.enable"]) and self.config["log.cleaner.threads"] > 0

    def _checkout(self) -> Cleaner:
        with self._lock:
            cleaner = self._idle.pop() if self._idle else Cleaner(self.config)
            self._running[threading.get_ident()] = cleaner
            return cleaner

    def _checkin(self, cleaner: Cleaner) -> None:
        with self._lock:
            self._running.pop(threading.get_ident(), None)
            self._idle.append(cleaner)

    def _grab_filthiest(self, cleaner: Cleaner, now_ms: int) -> SegmentedLogLike | None:
        with self._lock:
            candidates = []
            for log in self._logs():
                key = (log.topic, log.partition)
                if (log.closed or log.read_only or not log.config.compact or log.config_origin is None
                        or key in self._in_progress):
                    continue
                rng = cleaner.cleanable_range(log, now_ms)
                if rng.total_bytes > 0:
                    candidates.append((log, rng))
            picked = dirtiest(candidates)
            if picked is None:
                return None
            self._in_progress.add((picked[0].topic, picked[0].partition))
            return picked[0]

    def run_once(self, now_ms: int | None = None) -> CleanResult | None:
        """Clean the dirtiest due log now; None when no log is due. An aborted clean returns None."""
        clock_now = self._clock.time_ms() if now_ms is None else now_ms
        cleaner = self._checkout()
        try:
            log = self._grab_filthiest(cleaner, clock_now)
            if log is None:
                return None
            try:
                result = cleaner.clean(log, now_ms=clock_now)
            except (LogCleaningAbortedError, LogClosedError):
                return None
            finally:
                with self._lock:
                    self._in_progress.discard((log.topic, log.partition))
                    self._lock.notify_all()
            with self._lock:
                self.results = [*self.results[-99:], result]
            return result
        finally:
            self._checkin(cleaner)

    @contextmanager
    def exclusive(self, log: SegmentedLogLike) -> Iterator[None]:
        """Keep the cleaner off `log` (waiting for a clean of it to finish) while the block
        runs; LogManager's retention uses it, as Kafka's cleaner manager does."""
        key = (log.topic, log.partition)
        with self._lock:
            while key in self._in_progress:
                self._lock.wait()
            self._in_progress.add(key)
        try:
            yield
        finally:
            with self._lock:
                self._in_progress.discard(key)
                self._lock.notify_all()

    def run_until_idle(self, now_ms: int | None = None) -> list[CleanResult]:
        """Clean due logs, dirtiest first, until none is due; the results in order."""
        results = []
        while (result := self.run_once(now_ms)) is not None:
            results.append(result)
        return results

    def start(self) -> None:
        """Start `log.cleaner.threads` background threads (no-op when disabled or running)."""
        if not self.enabled or self._threads:
            return
        self._stop.clear()
        for i in range(self.config["log.cleaner.threads"]):
            thread = threading.Thread(target=self._loop, name=f"logstore-cleaner-{i}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _loop(self) -> None:
        backoff_s = self.config["log.cleaner.backoff.ms"] / 1000
        while not self._stop.is_set():
            if self.run_once() is None:
                self._stop.wait(backoff_s)

    @property
    def running(self) -> bool:
        """True while background threads run."""
        return bool(self._threads)

    def stop(self, *, wait: bool = True) -> None:
        """Stop the threads: let running cleans finish (`wait`) or abort them safely."""
        self._stop.set()
        if not wait:
            with self._lock:
                for cleaner in self._running.values():
                    cleaner.abort()
        for thread in self._threads:
            thread.join()
        self._threads = []
        if not wait:
            with self._lock:
                self._idle.clear()  # an abort request may still be pending on them

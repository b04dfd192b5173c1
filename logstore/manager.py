"""LogManager: the logs of one data directory, its checkpoint files, the clean-shutdown marker
and the background tasks (flush, checkpoints, retention, cleaning, delayed deletes), as Kafka's
LogManager. Retention and cleaning are policies handed in (logstore.policies), not imported.

Each topic's configs are stored in the data directory (logstore.topic_configs) when the topic
is created or its configs change, and apply again on reopen. A topic found on disk without
stored configs (a copy taken off a broker) is neither cleaned nor trimmed by retention until
`set_topic_config` gives it configs.

Partitions are learnt from the directory listing and the checkpoints; each partition's Log
opens on its first use (logstore.lazy_log), recovering then if the last shutdown was not clean,
so a manager of 10,000 partitions is ready in a fraction of the time opening them all takes.
What deletes or rewrites data (retention, the cleaner) opens every log first; `close()` recovers
any partition not yet opened since an unclean shutdown before its marker vouches for them all.

Background work runs from a Scheduler driven by the injected clock: tests call
`run_pending(now_ms)` and nothing sleeps; `start()` runs the same tasks on a thread, which
first opens the logs not opened yet, as Kafka's broker loads them all at start.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from logstore.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    fsync_dir,
    read_offsets_checkpoint,
    write_offsets_checkpoint,
)
from logstore.clean_shutdown import NO_BROKER_EPOCH, read_marker, write_marker
from logstore.clock import Clock, SystemClock
from logstore.config import LONG_MAX, LogConfig
from logstore.descriptor_pool import named_descriptor_errors
from logstore.errors import InvalidTopicError, LogClosedError, LogstoreError, ReservedTopicError
from logstore.internal_topics.metadata_schemas import METADATA_TOPIC
from logstore.lazy_log import LazyLog
from logstore.lock import ManagerLock
from logstore.log import Log
from logstore.log_files import (
    CLEAN_SHUTDOWN_FILE,
    DELETE_DIR_SUFFIX,
    FUTURE_DIR_SUFFIX,
    STRAY_DIR_SUFFIX,
    delete_dir_name,
    parse_partition_dir,
    partition_dir_name,
    validate_topic,
)
from logstore.log_loader import LoadState, check_writable_config
from logstore.policies import BackgroundCleaner, CleanerFactory, RetentionPass
from logstore.topic_configs import (
    ORIGIN_NEW,
    ORIGIN_STORED,
    config_values,
    has_data,
    read_topic_configs,
    store_topic_configs,
)

# How often the delayed-delete task looks for `.deleted` segments and `-delete` directories
# whose `file.delete.delay.ms` has passed (Kafka schedules one task per file instead).
DELETE_CHECK_INTERVAL_MS = 1000
# The background thread re-reads the clock at least this often, so a clock that is moved by
# hand (ManualClock) is noticed.
THREAD_POLL_MS = 100

_logger = logging.getLogger(__name__)


def refuse_reserved(topic: str) -> None:
    """InvalidTopicError for a bad name; ReservedTopicError for `__cluster_metadata`, the
    directory a KRaft broker keeps its metadata log in, which is not a topic of the log layer."""
    validate_topic(topic)
    if topic == METADATA_TOPIC:
        raise ReservedTopicError(f"creation of internal topic {METADATA_TOPIC} is prohibited: it is KRaft's "
                                 "metadata log, not a topic")


@dataclass
class ScheduledTask:
    """A named task run every `period_ms` from `next_run_ms` on."""

    name: str
    function: Callable[[int], Any]
    period_ms: int
    next_run_ms: int


class Scheduler:
    """Periodic tasks on an injected clock; `run_pending` runs what is due (no sleeping)."""

    def __init__(self, clock: Clock):
        self._clock = clock
        self._tasks: dict[str, ScheduledTask] = {}
        self._lock = threading.RLock()

    def schedule(self, name: str, function: Callable[[int], Any], period_ms: int,
                 initial_delay_ms: int = 0) -> None:
        """Run `function(now_ms)` every `period_ms` after `initial_delay_ms`; replaces a task of the same name."""
        if period_ms <= 0:
            raise ValueError(f"task {name!r} needs a positive period, got {period_ms}")
        with self._lock:
            self._tasks[name] = ScheduledTask(name, function, period_ms,
                                              self._clock.time_ms() + initial_delay_ms)

    def cancel(self, name: str) -> None:
        """Remove a task (no-op when absent)."""
        with self._lock:
            self._tasks.pop(name, None)

    @property
    def tasks(self) -> list[str]:
        """Names of the scheduled tasks."""
        return sorted(self._tasks)

    def next_due_ms(self) -> int | None:
        """Clock time of the next due task, or None without tasks."""
        with self._lock:
            return min((t.next_run_ms for t in self._tasks.values()), default=None)

    def run_pending(self, now_ms: int | None = None) -> list[str]:
        """Run every task due at `now_ms` (default: the clock) once; returns their names."""
        now = self._clock.time_ms() if now_ms is None else now_ms
        with self._lock:
            due = sorted((t for t in self._tasks.values() if t.next_run_ms <= now),
                         key=lambda t: (t.next_run_ms, t.name))
            for task in due:
                task.next_run_ms = now + task.period_ms if task.period_ms < LONG_MAX - now else LONG_MAX
        for task in due:
            task.function(now)
        return [t.name for t in due]

    tick = run_pending


class LogManager:
    """All partition logs (`<topic>-<partition>` directories) of one data directory."""

    def __init__(self, data_dir: str | os.PathLike[str], default_config: LogConfig | Mapping[str, Any] | None = None,
                 *, clock: Clock | None = None, cleaner: CleanerFactory | None = None,
                 retention: RetentionPass | None = None):
        """Open the data directory: lock it, list its partitions (each Log opens on first use,
        recovering then unless the last shutdown was clean) and register the background tasks.

        `cleaner` (compaction.LogCleaner) builds the log cleaner and `retention`
        (retention.apply_retention) is the retention pass; without them the manager neither
        cleans nor deletes old segments. Raises LogLockedError if another owner holds the directory.
        """
        self._dir = Path(data_dir)
        if self._dir.exists() and not self._dir.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "a data directory is a directory, not a file", str(self._dir))
        self._dir.mkdir(parents=True, exist_ok=True)
        self._default_config = LogConfig.coerce(default_config)
        self._clock = clock or SystemClock()
        self._lock = threading.RLock()
        self._logs: dict[tuple[str, int], LazyLog] = {}
        self._pending_dir_deletes: list[tuple[int, Path]] = []
        self._closed = False
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        with named_descriptor_errors(f"cannot lock {self._dir}"):
            self._dir_lock = ManagerLock(self._dir).acquire()
        try:
            with named_descriptor_errors(f"cannot list the logs of {self._dir}"):
                self._list_logs()
        except BaseException:
            self._dir_lock.release()
            raise
        self.scheduler = Scheduler(self._clock)
        self.log_cleaner: BackgroundCleaner | None = (
            None if cleaner is None else cleaner(self.logs, self._default_config, clock=self._clock))
        self._schedule_default_tasks(retention)

    # ------------------------------------------------------------------ loading

    def _list_logs(self) -> None:
        marker = self._dir / CLEAN_SHUTDOWN_FILE
        previous = read_marker(self._dir)
        clean = previous is not None
        # KIP-966: a cluster broker registers naming the epoch its clean stop wrote (none: unclean)
        self.previous_broker_epoch = NO_BROKER_EPOCH if previous is None else previous
        recovery_points = read_offsets_checkpoint(self._dir / RECOVERY_POINT_CHECKPOINT)
        start_offsets = read_offsets_checkpoint(self._dir / LOG_START_OFFSET_CHECKPOINT)
        high_watermarks = read_offsets_checkpoint(self._dir / REPLICATION_OFFSET_CHECKPOINT)
        stored = read_topic_configs(self._dir)
        topic_configs: dict[str, LogConfig] = {}
        now = self._clock.time_ms()
        for entry in sorted(os.scandir(self._dir), key=lambda e: e.name):
            if not entry.is_dir():
                continue
            if entry.name.endswith(DELETE_DIR_SUFFIX):
                self._pending_dir_deletes.append((now, Path(entry.path)))
                continue
            if entry.name.endswith((FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)):
                continue
            try:
                key = parse_partition_dir(entry.name)
            except InvalidTopicError:
                continue  # not a partition directory (Kafka keeps other things here too)
            if key[0] == METADATA_TOPIC:
                continue  # KRaft's metadata log: Kafka's LogManager leaves it to the Raft layer too
            state = LoadState(
                recovery_point=recovery_points.get(key, 0),
                log_start_offset=start_offsets.get(key, 0),
                high_watermark=high_watermarks.get(key),
                clean_shutdown=clean,
            )
            values = stored.get(key[0])
            if values is not None:
                if key[0] not in topic_configs:  # one LogConfig per topic, shared by its partitions
                    topic_configs[key[0]] = self._default_config.with_overrides(values)
                config, origin = topic_configs[key[0]], ORIGIN_STORED
            else:
                config, origin = self._default_config, None if has_data(entry.path) else ORIGIN_NEW
            self._logs[key] = LazyLog(self._dir, entry.name, config, origin, state, self._open_log)
        # Standalone opens of these partitions are refused from now on, opened or not.
        self._dir_lock.claim_listed(lazy.name for lazy in self._logs.values())
        if clean:
            # The marker only vouches for the shutdown before this start.
            marker.unlink()
            fsync_dir(self._dir)

    def _open_log(self, lazy: LazyLog) -> Log:
        with named_descriptor_errors(f"cannot open partition {lazy.name} of {self._dir}"):
            log = Log.open(lazy.path, lazy.config, clock=self._clock, load_state=lazy.state, managed=True)
        log.config_origin = lazy.origin
        log._on_start_offset_change = self._log_start_offset_changed
        return log

    def _schedule_default_tasks(self, retention: RetentionPass | None) -> None:
        config = self._default_config
        schedule = self.scheduler.schedule
        # As Kafka's LogManager.startup: the log tasks first run log.initial.task.delay.ms after
        # start, then every period; producer expiry and the cleaner keep their own timing.
        delay = config.log_initial_task_delay_ms
        if retention is not None:
            schedule("kafka-log-retention", lambda now: self._run_retention(retention, now),
                     config.log_retention_check_interval_ms, delay)
        schedule("kafka-log-flusher", self._run_flush, config.log_flush_scheduler_interval_ms, delay)
        if config.log_flush_offset_checkpoint_interval_ms > 0:
            schedule("kafka-recovery-point-checkpoint", lambda _now: self.checkpoint_recovery_points(),
                     config.log_flush_offset_checkpoint_interval_ms, delay)
        if config.log_flush_start_offset_checkpoint_interval_ms > 0:
            schedule("kafka-log-start-offset-checkpoint", lambda _now: self.checkpoint_log_start_offsets(),
                     config.log_flush_start_offset_checkpoint_interval_ms, delay)
        schedule("kafka-delete-logs", self.delete_expired_files, DELETE_CHECK_INTERVAL_MS, delay)
        schedule("PeriodicProducerExpirationCheck", self._expire_producers,
                 config.producer_id_expiration_check_interval_ms,
                 config.producer_id_expiration_check_interval_ms)
        if self.log_cleaner is not None and self.log_cleaner.enabled:
            schedule("kafka-log-cleaner", self.log_cleaner.run_until_idle, config.log_cleaner_backoff_ms,
                     config.log_cleaner_backoff_ms)

    # ------------------------------------------------------------------ background tasks

    def _run_retention(self, retention: RetentionPass, now_ms: int) -> None:
        # Every log with known configs: without `delete` in cleanup.policy the pass still drops
        # segments wholly below the log start offset, as Kafka's deleteOldSegments does.
        for log in self._open_logs(lambda lazy: lazy.config_origin is not None):
            if not log.closed:
                exclusive = nullcontext() if self.log_cleaner is None else self.log_cleaner.exclusive(log)
                with exclusive:  # never beside a clean of the same log
                    retention(log, now_ms=now_ms)

    def _expire_producers(self, now_ms: int) -> None:
        for log in self._opened_logs():
            if not log.closed and not log.read_only:
                log.remove_expired_producers(now_ms)

    def _run_flush(self, now_ms: int) -> None:
        for log in self._opened_logs():
            log.flush_if_due(now_ms)

    def delete_expired_files(self, now_ms: int | None = None) -> int:
        """Remove `.deleted` segments and `-delete` directories whose delay has passed."""
        now = self._clock.time_ms() if now_ms is None else now_ms
        removed = sum(log.delete_expired_files(now) for log in self._opened_logs())
        with self._lock:
            due = [p for t, p in self._pending_dir_deletes if t <= now]
            self._pending_dir_deletes = [(t, p) for t, p in self._pending_dir_deletes if t > now]
        for path in due:
            shutil.rmtree(path, ignore_errors=False)
            removed += 1
        if due:
            fsync_dir(self._dir)
        return removed

    def run_pending(self, now_ms: int | None = None) -> list[str]:
        """Run every background task due now (what the thread of `start()` does); returns their names."""
        return self.scheduler.run_pending(now_ms)

    tick = run_pending

    def start(self) -> None:
        """Run the background tasks on a daemon thread until `close()`."""
        with self._lock:
            if self._thread is not None:
                return
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="logstore-log-manager", daemon=True)
            self._thread.start()
            if self.log_cleaner is not None and self.log_cleaner.enabled:
                # log.cleaner.threads threads clean instead of the scheduler task.
                self.scheduler.cancel("kafka-log-cleaner")
                self.log_cleaner.start()

    def _loop(self) -> None:
        self._open_remaining()
        while not self._stop.is_set():
            self.scheduler.run_pending()
            due = self.scheduler.next_due_ms()
            wait_ms = THREAD_POLL_MS if due is None else min(max(due - self._clock.time_ms(), 0), THREAD_POLL_MS)
            self._stop.wait(wait_ms / 1000)

    def _open_remaining(self) -> None:
        """Open every log not opened yet, until `close()`. A partition that fails to open stays
        closed, and its next use raises the error again, where a caller sees it."""
        for lazy in self._lazy_logs():
            if self._stop.is_set():
                return
            try:
                lazy.open_unless_retired()
            except (LogstoreError, OSError) as exc:
                _logger.warning("%s stays closed until its next use: %s", lazy.path, exc)

    # ------------------------------------------------------------------ logs

    @property
    def data_dir(self) -> Path:
        """The data directory."""
        return self._dir

    @property
    def clock(self) -> Clock:
        """The injected clock."""
        return self._clock

    @property
    def default_config(self) -> LogConfig:
        """Config for logs created without their own."""
        return self._default_config

    def _require_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"log manager of {self._dir} is closed")

    def get_or_create(self, topic: str, partition: int,
                      config: LogConfig | Mapping[str, Any] | None = None) -> Log:
        """The log of `topic`-`partition`, created if missing. `config` holds the topic's
        overrides of the default config (Kafka key names); given, it becomes the topic's config
        (every open partition of the topic, and the stored configs). A new partition without
        `config` takes its topic's stored configs, or the defaults, which are then stored.
        ReservedTopicError for KRaft's metadata log, which no client write may reach."""
        refuse_reserved(topic)
        if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
            raise InvalidTopicError(f"partition must be a non-negative int, got {partition!r}")
        with self._lock:
            self._require_open()
            lazy = self._logs.get((topic, partition))
            if lazy is not None:
                if config is not None:
                    self.set_topic_config(topic, config)
                return lazy.open()
            with named_descriptor_errors(f"cannot create partition {topic}-{partition} in {self._dir}"):
                return self._create(topic, partition, config)

    def _create(self, topic: str, partition: int, config: LogConfig | Mapping[str, Any] | None) -> Log:
        if config is None:
            config = read_topic_configs(self._dir).get(topic, {})
        merged = self._merge_config(config)
        check_writable_config(merged)  # a config the open would refuse is not stored either
        # Stored first: the partition's data never exists without its configs.
        store_topic_configs(self._dir, topic, config_values(config))
        lazy = LazyLog(self._dir, partition_dir_name(topic, partition), merged, ORIGIN_STORED, LoadState(),
                       self._open_log)
        log = lazy.open()
        self._logs[(topic, partition)] = lazy
        fsync_dir(self._dir)
        return log

    def set_topic_config(self, topic: str, config: LogConfig | Mapping[str, Any]) -> None:
        """Make `config` (overrides of the default config; `{}`: the defaults) the configs of
        `topic`: stored crash-safely, then applied to every open partition of the topic. The
        way to let retention and cleaning act on a topic found without stored configs."""
        validate_topic(topic)
        with self._lock:
            self._require_open()
            merged = self._merge_config(config)
            store_topic_configs(self._dir, topic, config_values(config))
            for (name, _partition), lazy in self._logs.items():
                if name == topic:
                    lazy.set_config(merged, ORIGIN_STORED)

    def topics_without_configs(self) -> list[str]:
        """Topics found on disk with no stored configs: retention and cleaning leave them alone."""
        with self._lock:
            return sorted({topic for (topic, _partition), lazy in self._logs.items() if lazy.config_origin is None})

    def _merge_config(self, config: LogConfig | Mapping[str, Any]) -> LogConfig:
        if isinstance(config, LogConfig):
            return config
        return self._default_config.with_overrides(config)

    def get(self, topic: str, partition: int) -> Log | None:
        """The log of `topic`-`partition` (opened now if this is its first use), or None.
        Raises what opening it raised (LogClosedError once the manager is closed)."""
        lazy = self._logs.get((topic, partition))
        return None if lazy is None else lazy.open()

    def partitions(self) -> list[tuple[str, int]]:
        """Every partition's (topic, partition), sorted, without opening any log."""
        with self._lock:
            return sorted(self._logs)

    def logs(self) -> list[Log]:
        """Every log, ordered by topic and partition; those not yet used are opened now."""
        return self._open_logs(lambda _lazy: True)

    def _lazy_logs(self) -> list[LazyLog]:
        with self._lock:
            return [self._logs[k] for k in sorted(self._logs)]

    def _open_logs(self, wanted: Callable[[LazyLog], bool]) -> list[Log]:
        """The `wanted` logs, opened now where needed (a partition deleted meanwhile is left out)."""
        return [log for lazy in self._lazy_logs() if wanted(lazy) and (log := lazy.open_unless_retired()) is not None]

    def _opened_logs(self) -> list[Log]:
        """The logs opened so far: the others hold nothing to flush, expire or delete."""
        return [log for lazy in self._lazy_logs() if (log := lazy.log) is not None]

    def delete(self, topic: str, partition: int) -> Path:
        """Close the log and rename its directory to `<topic>-<partition>.<id>-delete`; the
        directory is removed `file.delete.delay.ms` later. Returns the renamed path."""
        with self._lock:
            self._require_open()
            if (topic, partition) not in self._logs:
                raise KeyError(f"no log for {topic}-{partition} in {self._dir}")
            target = self._retire(topic, partition)
            fsync_dir(self._dir)
            if not any(name == topic for name, _partition in self._logs):
                store_topic_configs(self._dir, topic, None)  # the topic's last partition here
            self._write_checkpoints()
            return target

    def delete_topic(self, topic: str) -> list[Path]:
        """Delete every partition of `topic` here as `delete` does one, syncing the directory and
        writing the checkpoints once for all of them (per partition, thousands took minutes)."""
        with self._lock:
            self._require_open()
            targets = [self._retire(*key) for key in sorted(k for k in self._logs if k[0] == topic)]
            fsync_dir(self._dir)
            store_topic_configs(self._dir, topic, None)
            self._write_checkpoints()
            return targets

    def _retire(self, topic: str, partition: int) -> Path:
        """Close the partition's log (unopened, it stays so), rename its directory to its
        `-delete` name and schedule the removal (the caller holds the lock, then syncs the data
        directory and writes checkpoints)."""
        lazy = self._logs.pop((topic, partition))
        delay = (lazy.config if lazy.log is None else lazy.log.config).file_delete_delay_ms
        lazy.retire()
        self._dir_lock.release_claim(lazy.name)  # an opened log's close released its own
        target = self._dir / delete_dir_name(topic, partition, uuid.uuid4().hex)
        os.replace(lazy.path, target)
        self._pending_dir_deletes.append((self._clock.time_ms() + delay, target))
        return target

    # ------------------------------------------------------------------ checkpoints

    def _offsets(self, attribute: str) -> dict[tuple[str, int], int]:
        """Each partition's offset: the Log's, or the checkpointed one of a log not opened."""
        with self._lock:
            lazies = list(self._logs.items())
        return {key: offset for key, lazy in lazies if (offset := lazy.offset(attribute)) is not None}

    def checkpoint_recovery_points(self) -> None:
        """Write `recovery-point-offset-checkpoint` (and the high watermarks) atomically."""
        write_offsets_checkpoint(self._dir / RECOVERY_POINT_CHECKPOINT, self._offsets("recovery_point"))
        write_offsets_checkpoint(self._dir / REPLICATION_OFFSET_CHECKPOINT, self._offsets("high_watermark"))

    def checkpoint_log_start_offsets(self) -> None:
        """Write `log-start-offset-checkpoint` atomically."""
        write_offsets_checkpoint(self._dir / LOG_START_OFFSET_CHECKPOINT, self._offsets("log_start_offset"))

    def _log_start_offset_changed(self, _log: Log) -> None:
        self.checkpoint_log_start_offsets()

    def _write_checkpoints(self) -> None:
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()

    # ------------------------------------------------------------------ shutdown

    def close(self, broker_epoch: int = NO_BROKER_EPOCH) -> None:
        """Stop the background thread, flush and close every log (first recovering those not
        opened since an unclean shutdown), write the checkpoints, then the `.kafka_cleanshutdown`
        marker (naming `broker_epoch`, a cluster broker's registration), and release the
        directory. Idempotent."""
        if not self._stop_background():
            return
        with self._lock:
            lazies = self._lazy_logs()
            try:
                try:
                    for lazy in lazies:
                        if lazy.needs_recovery:
                            lazy.open()  # recovered now: the marker below vouches for every partition
                finally:
                    for lazy in lazies:
                        lazy.retire()
                self._write_checkpoints()
                write_marker(self._dir, broker_epoch)
            finally:
                self._closed = True
                self._dir_lock.release()

    def abandon(self) -> None:
        """Let go of the data directory as a killed process does (fault injection): the
        background tasks stop, and no log is flushed or closed, no checkpoint or clean-shutdown
        marker written; the locks are released so that it can be opened again."""
        if not self._stop_background():
            return
        with self._lock:
            for lazy in self._lazy_logs():
                lazy.retire(abandon=True)
            self._closed = True
            self._dir_lock.release()

    def _stop_background(self) -> bool:
        """Stop the background thread, then the cleaner; False when the manager is closed already."""
        with self._lock:
            if self._closed:
                return False
            self._stop.set()
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        if self.log_cleaner is not None:
            self.log_cleaner.stop(wait=True)  # call log_cleaner.stop(wait=False) first to abandon
        return True

    def __enter__(self) -> LogManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LogManager({str(self._dir)!r}, logs={len(self._logs)})"

"""Log: one partition directory of segments, with Kafka's append, read, roll and flush rules
(Kafka's UnifiedLog and LocalLog). Truncation, log-start-offset moves and segment deletion are
LogRemoval's (log_removal.py), opening is LogLoader's work, batch validation LogValidator's,
producer state and leader epochs PartitionState's.

Offsets and timestamps of the log live in the segments; the recovery point, the log start
offset and the high watermark live in the data directory's checkpoint files (the directory
holding the partition directory). A standalone Log reads and updates its own entry there; a
Log opened by LogManager leaves the checkpoints to the manager.
"""

from __future__ import annotations

import dataclasses
import os
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from logstore import leader_append, list_offsets
from logstore.append_input import AppendInput
from logstore.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    update_offsets_checkpoints,
)
from logstore.clean_shutdown import NO_BROKER_EPOCH, MarkerClaim
from logstore.clock import Clock, SystemClock
from logstore.config import TIMESTAMP_TYPE_LOG_APPEND, LogConfig
from logstore.epoch import EPOCHS, LeaderEpochFileCache, epoch_argument
from logstore.errors import (
    InvalidRecordError,
    LogClosedError,
    OffsetOutOfRangeError,
    ReadOnlyLogError,
    RecordTooLargeError,
)
from logstore.file_records import TimestampAndOffset
from logstore.local_log import LocalLog
from logstore.lock import DirectoryLock, PartitionClaim, lock_partition
from logstore.log_files import parse_partition_dir
from logstore.log_loader import (
    LoadState,
    LogLoader,
    check_writable_config,
)
from logstore.log_removal import LogRemoval
from logstore.log_results import AppendInfo, FetchResult, append_info
from logstore.log_validator import (
    ValidatedBatches,
    finish_leader_append,
    leader_args,
    roll_offset,
    validate_follower_append,
)
from logstore.partition_state import PartitionState
from logstore.producer_append import ORIGINS, AppendAnalysis
from logstore.producer_state import ProducerStateManager
from logstore.record_iterator import iter_log_records
from logstore.records import Record
from logstore.records.header import NO_TIMESTAMP
from logstore.segment import LogSegment
from logstore.topic_configs import ORIGIN_GIVEN, resolve_log_config

_INT64 = struct.Struct(">q")
_LEADER_ORIGINS = frozenset(ORIGINS) - {"replication"}


class Log(LogRemoval):
    """An append-only partition log in a Kafka partition directory. Thread-safe: one lock
    serialises appends, reads and maintenance. Open with `Log.open`."""

    def __init__(self, directory: Path, config: LogConfig, clock: Clock, read_only: bool) -> None:
        self._dir = directory
        self.topic, self.partition = parse_partition_dir(directory.name)
        self._name = f"{self.topic}-{self.partition}"
        self._config = config
        self._checks, self._max_segment_ms, self._limits = leader_append.append_reads(self._config)
        # Where the config came from (logstore.topic_configs ORIGIN_*); None: unknown.
        self.config_origin: str | None = ORIGIN_GIVEN
        self._clock = clock
        self._read_only = read_only
        self._lock = threading.RLock()
        self._dir_lock: DirectoryLock | PartitionClaim | None = None
        self._state: PartitionState | None = None  # built by open() once the directory is locked
        self._local = LocalLog(directory, config, clock, self._name, self._lock)
        self._log_start_offset = 0
        self._log_end_offset = 0
        self._recovery_point = 0
        self._high_watermark = 0
        self._last_flush_ms = clock.time_ms()
        self._closed = False
        self._standalone = True
        self._on_start_offset_change: Callable[[Log], None] | None = None
        self._recovered_bytes = 0
        self._had_clean_shutdown = False
        self._marker: MarkerClaim | None = None  # a standalone writer's hold on .kafka_cleanshutdown
        self._input = AppendInput()
        self.high_watermark_follows_log_end = True

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(cls, path: str | os.PathLike[str], config: LogConfig | dict[str, Any] | None = None, *,
             clock: Clock | None = None, read_only: bool = False, load_state: LoadState | None = None,
             raw: bool = False, managed: bool = False) -> Log:
        """Open (creating if needed) the partition directory `path` (`<topic>-<partition>`).

        Loads segments, finishes or rolls back interrupted swaps, rebuilds missing or corrupt
        indexes and recovers from the recovery point unless the last shutdown was clean, with
        producer state, leader epochs and transaction indexes (see LogLoader).
        Without `config`, the topic's configs stored in the parent directory apply (see
        logstore.topic_configs; none stored: retention and cleaning refuse the log).
        `read_only=True` changes no byte on disk and shows what Kafka's recovery would keep (a
        torn or corrupt tail past the recovery point hidden, in memory); with `raw=True` too, every
        byte on disk, damage included (ValueError without read_only). `load_state` is passed by LogManager;
        standalone logs read the parent directory's checkpoints. `managed=True` (LogManager) holds
        the directory through the data directory's lock, with no descriptor of its own. Raises
        LogLockedError if another Log or a LogManager owns the directory.
        """
        if raw and not read_only:
            raise ValueError("raw=True is a read-only view: pass read_only=True too")
        directory = Path(path)
        config, origin = resolve_log_config(directory, config)
        log = cls(directory, config, clock or SystemClock(), read_only)
        log.config_origin = origin
        if read_only:
            if not directory.is_dir():
                raise FileNotFoundError(f"log directory {directory} does not exist")
        else:
            check_writable_config(config)  # a failed open leaves no trace
            if not directory.is_dir():  # a reopen finds it: a failing mkdir cost 10 us a partition
                directory.mkdir(parents=True, exist_ok=True)
            log._dir_lock = PartitionClaim(directory).acquire() if managed else lock_partition(directory)
        try:
            if load_state is None:
                load_state = LoadState.from_parent_dir(directory, log.topic, log.partition)
                log._marker = None if read_only else MarkerClaim(directory.parent, load_state)
            else:
                log._standalone = False
            log._load(dataclasses.replace(load_state, raw=True) if raw else load_state)
        except BaseException:
            log._release()
            raise
        return log

    def _load(self, load_state: LoadState) -> None:
        self._state = PartitionState(self._dir, clock=self._clock, read_only=self._read_only,
                                     producer_id_expiration_ms=self._config.producer_id_expiration_ms)
        loaded = LogLoader(self._dir, self._config, self._clock, self._read_only, self._state,
                           load_state).load()
        self._local.set_segments(loaded.segments)
        self._log_start_offset = loaded.log_start_offset
        self._log_end_offset = loaded.log_end_offset
        self._recovery_point = loaded.recovery_point
        self._high_watermark = loaded.log_end_offset
        self._recovered_bytes = loaded.recovered_bytes
        self._had_clean_shutdown = load_state.clean_shutdown

    # ------------------------------------------------------------------ properties

    @property
    def name(self) -> str:
        """The partition's `<topic>-<partition>` name."""
        return self._name

    @property
    def dir(self) -> Path:
        """The partition directory."""
        return self._dir

    @property
    def config(self) -> LogConfig:
        """The log's LogConfig."""
        return self._config

    @config.setter
    def config(self, config: LogConfig | dict[str, Any]) -> None:
        self._config = self._local.config = LogConfig.coerce(config)
        self._checks, self._max_segment_ms, self._limits = leader_append.append_reads(self._config)
        self.config_origin = ORIGIN_GIVEN

    @property
    def clock(self) -> Clock:
        """The injected clock."""
        return self._clock

    @property
    def read_only(self) -> bool:
        """True when opened with read_only=True."""
        return self._read_only

    @property
    def closed(self) -> bool:
        """True after close()."""
        return self._closed

    @property
    def segments(self) -> list[LogSegment]:
        """Live segments ordered by base offset; the last is the active segment."""
        return list(self._local.segments)

    @property
    def active_segment(self) -> LogSegment:
        """The segment appends go to."""
        return self._local.segments[-1]

    @property
    def log_start_offset(self) -> int:
        """First offset readers may fetch."""
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """Offset the next appended record gets."""
        return self._log_end_offset

    @property
    def recovery_point(self) -> int:
        """Everything below this offset is flushed to disk."""
        return self._recovery_point

    @property
    def high_watermark(self) -> int:
        """Offset below which records are committed (replicated)."""
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        with self._lock:
            self._high_watermark = min(max(int(offset), self._log_start_offset), self._log_end_offset)

    @property
    def size(self) -> int:
        """Total bytes of the live segments."""
        return self._local.size

    @property
    def unflushed_messages(self) -> int:
        """Offsets appended since the last flush."""
        return self._log_end_offset - self._recovery_point

    @property
    def last_flush_ms(self) -> int:
        """Clock time of the last flush (or of opening)."""
        return self._last_flush_ms

    @property
    def had_clean_shutdown(self) -> bool:
        """True when the last shutdown was clean (no recovery ran at open)."""
        return self._had_clean_shutdown

    @property
    def recovered_bytes(self) -> int:
        """Bytes dropped from invalid segment tails while opening."""
        return self._recovered_bytes

    # ------------------------------------------------------------------ append

    def _require_writable(self, action: str) -> None:
        if self._closed:
            raise LogClosedError(f"cannot {action}: log {self._dir} is closed")
        if self._read_only:
            raise ReadOnlyLogError(f"cannot {action}: log {self._dir} was opened read-only")

    def append(self, records: Any, *, leader_epoch: int = 0, origin: str = "client") -> AppendInfo:
        """Append as the leader: validate, assign offsets and the leader epoch in place, stamp
        LogAppendTime when configured, roll and flush as configured.

        `records`: raw batch bytes (a bytearray or writable memoryview is modified in place),
        Records, (key, value) tuples or a pyarrow table (key, value[, timestamp][, headers]).
        `leader_epoch`: an int32, or -1 for none. Raises InvalidRecordError (RecordTooLargeError,
        bad timestamps, bad counts) or CorruptRecordError.
        """
        if origin not in _LEADER_ORIGINS:
            raise ValueError(f"origin must be 'client' or 'coordinator', not {origin!r}")
        if type(leader_epoch) is not int or leader_epoch not in EPOCHS:  # the type first: `in` a range scans
            leader_epoch = epoch_argument(leader_epoch)
        self._lock.acquire()  # not `with`: it costs twice as much, on the hottest call
        try:
            if self._closed or self._read_only:
                self._require_writable("append")
            config = self._config
            now = self._clock.time_ms()
            data, size = self._input.to_buffer(records, now, config)
            start, table, active = self._log_end_offset, self._input.table, self._local.segments[-1]
            result = leader_append.append(data, size, table, self._input.validated, self._limits, active, start,
                                          leader_epoch, origin == "client", now,
                                          leader_epoch < 0 or self._state.epochs.covers(leader_epoch, start))
            if result[0] == leader_append.WRITTEN:  # the plain append, written by the one compiled call
                _, last, max_timestamp, offset_of_max, count = result
                self._log_end_offset = last + 1
                self._state.appended_without_producers(last + 1)
                if last + 1 - self._recovery_point >= config.flush_messages:
                    self.flush()
                if self.high_watermark_follows_log_end:
                    self._high_watermark = last + 1
                return append_info((start, last, max_timestamp, -1, count, size, offset_of_max))
            if result[0] == leader_append.FAILED:
                raise active.append_error(result[1], result[2], result[3])
            *result, crc_checked = self._input.validated.tolist()
            validated = finish_leader_append(memoryview(data)[:size], table, self._checks, tuple(result),
                                             leader_args(self._checks, start, now, leader_epoch, origin), origin,
                                             self._name, crc_checked=bool(crc_checked))
            analysis = self._state.analyze(validated, origin)
            duplicate = analysis.duplicate
            if duplicate is not None:
                # A producer retry: answer with the first append's offsets, write nothing.
                return AppendInfo(duplicate.first_offset, duplicate.last_offset, validated.max_timestamp,
                                  duplicate.timestamp, validated.record_count, 0,
                                  validated.offset_of_max_timestamp)
            self._write(validated, analysis, now)
            if self.high_watermark_follows_log_end:
                self._high_watermark = self._log_end_offset
            return AppendInfo(validated.first_offset, validated.last_offset, validated.max_timestamp,
                              now if config.message_timestamp_type == TIMESTAMP_TYPE_LOG_APPEND else -1,
                              validated.record_count, validated.data.nbytes, validated.offset_of_max_timestamp)
        finally:
            self._lock.release()

    def append_as_follower(self, batch_bytes: bytes | bytearray | memoryview) -> AppendInfo:
        """Append batches fetched from a leader, keeping their offsets and epochs.

        Raises InvalidRecordError if offsets do not increase or start below the log end offset.
        """
        with self._lock:
            self._require_writable("append")
            validated = validate_follower_append(batch_bytes, source=str(self._dir))
            if not len(validated.table):
                return AppendInfo(self._log_end_offset, self._log_end_offset - 1, NO_TIMESTAMP, -1, 0, 0, -1)
            if validated.first_offset < self._log_end_offset:
                raise InvalidRecordError(
                    f"unexpected offset in follower append to {self._dir}: first offset "
                    f"{validated.first_offset} is below the log end offset {self._log_end_offset}")
            self._write(validated, self._state.analyze(validated, "replication"), self._clock.time_ms())
            return AppendInfo(validated.first_offset, validated.last_offset, validated.max_timestamp, -1,
                              validated.record_count, validated.data.nbytes, validated.offset_of_max_timestamp)

    def _write(self, validated: ValidatedBatches, analysis: AppendAnalysis, now_ms: int) -> None:
        """Roll if needed (at clock time `now_ms`), record the batches' epochs, append to the
        active segment, move the log end offset, commit producer state, maybe flush (Kafka's
        UnifiedLog.append order)."""
        size = validated.data.nbytes
        config = self._config
        if size > config.segment_bytes:
            raise RecordTooLargeError(
                f"message batch size is {size} bytes in append to {self.name}, "
                f"which exceeds the maximum configured segment size of {config.segment_bytes}")
        segment = self._local.segments[-1]
        if segment.should_roll(config.segment_bytes, self._max_segment_ms, size, validated.max_timestamp,
                               validated.last_offset, now_ms):
            segment = self._roll(roll_offset(validated))
        self._state.assign_epochs(validated)
        segment.append(validated.last_offset, validated.max_timestamp,
                       validated.offset_of_max_timestamp, validated.data)
        self._log_end_offset = validated.last_offset + 1
        self._state.appended(analysis, segment, self._log_end_offset)
        if self.unflushed_messages >= config.flush_messages:
            self.flush()

    # ------------------------------------------------------------------ roll and flush

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset and return it."""
        with self._lock:
            self._require_writable("roll")
            return self._roll(self._log_end_offset)

    def _roll(self, expected_next_offset: int) -> LogSegment:
        new_offset = max(expected_next_offset, self._log_end_offset)
        segment = self._local.roll(new_offset)
        if segment is None:
            return self._local.segments[-1]  # rolling an empty segment onto itself changes nothing
        self._state.rolled(segment)
        # Kafka flushes the rolled segments right after a roll (asynchronously); so do we.
        self._flush_to(new_offset)
        return segment

    def flush(self, offset: int | None = None) -> None:
        """fsync segments up to `offset` (default: the log end) and move the recovery point."""
        with self._lock:
            if self._closed or self._read_only:
                return
            self._flush_to(self._log_end_offset if offset is None else min(offset, self._log_end_offset))

    def _flush_to(self, offset: int) -> None:
        if offset <= self._recovery_point:
            return
        self._local.flush(self._recovery_point, offset)
        self._recovery_point = offset
        self._last_flush_ms = self._clock.time_ms()
        if self._standalone:
            # A standalone log is its own LogManager: the new recovery point is durable at once.
            self._write_parent_checkpoints(RECOVERY_POINT_CHECKPOINT)

    def flush_if_due(self, now_ms: int | None = None) -> bool:
        """Flush when `flush.ms` has passed since the last flush; True if it flushed."""
        now = self._clock.time_ms() if now_ms is None else now_ms
        with self._lock:
            if self._closed or self._read_only or self.unflushed_messages == 0:
                return False
            if now - self._last_flush_ms < self._config.flush_ms:
                return False
            self._flush_to(self._log_end_offset)
            return True

    # ------------------------------------------------------------------ read

    def read(self, offset: int, max_bytes: int = 1_048_576, *, max_offset: int | None = None,
             min_one_batch: bool = True, isolation: str = "log_end", zero_copy: bool = False) -> FetchResult:
        """Whole batches from the one holding `offset`, at most `max_bytes` (but at least one
        batch with `min_one_batch`), only batches ending below `max_offset` (default: log end).
        Unlike Kafka, a batch cut by `max_bytes` is left out rather than returned partially.
        With `zero_copy` the records are a FileSlice of the segment file, not bytes: only batch
        headers are read, and the caller closes it once sent.

        `isolation` bounds the read as Kafka's fetch isolation does: 'log_end' (followers),
        'high_watermark' (read_uncommitted consumers) or 'read_committed' (up to the last stable
        offset, with the aborted transactions the consumer must drop).

        Raises OffsetOutOfRangeError naming the valid range when `offset` is outside
        [log start offset, log end offset].
        """
        with self._lock:
            if self._closed:
                raise LogClosedError(f"cannot read: log {self._dir} is closed")
            start, end = self._log_start_offset, self._log_end_offset
            if offset < start or offset > end:
                raise OffsetOutOfRangeError(
                    f"offset {offset} is out of range for {self.topic}-{self.partition}: "
                    f"valid offsets are [{start}, {end}]")
            limit = self._isolation_bound(isolation)
            if max_offset is not None:
                limit = min(max_offset, limit)
            hw = self._high_watermark
            found = None
            if offset < limit:
                found = self._local.read(offset, max_bytes, limit, end, min_one_batch, zero_copy=zero_copy)
            if found is None:
                return FetchResult(b"", offset, hw, start, end, offset)
            data, first, next_offset = found
            aborted = ()
            if isolation == "read_committed":
                aborted = self._state.aborted_transactions(self._local.segments, offset, limit)
            return FetchResult(data, first, hw, start, end, next_offset, aborted)

    @property
    def producer_state(self) -> ProducerStateManager:
        """Idempotent and transactional producers' state (Kafka's ProducerStateManager)."""
        return self._state.producer_state

    def remove_expired_producers(self, now_ms: int | None = None) -> list[int]:
        """Forget producer ids idle for `producer.id.expiration.ms` (no open transaction)."""
        with self._lock:
            return self._state.producer_state.remove_expired_producers(now_ms)

    @property
    def leader_epoch_cache(self) -> LeaderEpochFileCache:
        """Leader epochs and their start offsets (`leader-epoch-checkpoint`)."""
        return self._state.epochs

    def assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None:
        """Record that `leader_epoch` starts at `start_offset`, as a new leader does before its
        first append (Kafka's maybeAssignEpochStartOffset)."""
        with self._lock:
            self._require_writable("assign a leader epoch")
            self._state.epochs.assign(leader_epoch, start_offset)

    @property
    def last_stable_offset(self) -> int:
        """The last stable offset: the first offset of the earliest open or unreplicated
        transaction if below the high watermark, else the high watermark."""
        return self._state.last_stable_offset(self._high_watermark, self._log_start_offset)

    def _isolation_bound(self, isolation: str) -> int:
        if isolation == "log_end":
            return self._log_end_offset
        if isolation == "high_watermark":
            return self._high_watermark
        if isolation == "read_committed":
            return self.last_stable_offset
        raise ValueError(f"isolation must be 'log_end', 'high_watermark' or 'read_committed', not {isolation!r}")

    def records(self, offset: int | None = None, *, isolation: str = "log_end") -> Iterator[Record]:
        """Decoded records from `offset` (default: the log start) up to the isolation bound
        (see `read`); 'read_committed' drops aborted records and transaction markers."""
        position = self._log_start_offset if offset is None else offset
        yield from iter_log_records(lambda at: self.read(at, isolation=isolation), position,
                                    lambda: self._isolation_bound(isolation), isolation == "read_committed")

    # ------------------------------------------------------------------ timestamps

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """Kafka's ListOffsets for this log: the first record with timestamp >= `timestamp`, or
        LATEST_TIMESTAMP (-1), EARLIEST_TIMESTAMP (-2), MAX_TIMESTAMP (-3),
        EARLIEST_LOCAL_TIMESTAMP (-4) (logstore.list_offsets). None when no record qualifies."""
        with self._lock:
            return list_offsets.offset_for_timestamp(timestamp, self._log_start_offset, self._log_end_offset,
                                                     self._state.epochs, self._local)

    # ------------------------------------------------------------------ locking

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold this log's lock for the block, so a multi-step change (a retention pass:
        retention.apply_retention) is atomic to appends, reads, truncation and the cleaner."""
        with self._lock:
            yield

    # ------------------------------------------------------------------ checkpoints and close

    def _write_parent_checkpoints(self, *names: str) -> None:
        """Merge this log's entry into the parent directory's checkpoint files."""
        values = {RECOVERY_POINT_CHECKPOINT: self._recovery_point, LOG_START_OFFSET_CHECKPOINT: self._log_start_offset,
                  REPLICATION_OFFSET_CHECKPOINT: self._high_watermark}
        update_offsets_checkpoints(self._dir.parent, self.topic, self.partition, {n: values[n] for n in names})

    def close(self, *, broker_epoch: int = NO_BROKER_EPOCH) -> None:
        """Flush, close segments, write checkpoints and (standalone) a clean-shutdown marker naming `broker_epoch`."""
        with self._lock:
            if self._closed:
                return
            if not self._read_only:
                self._state.closing(self._log_end_offset)
                self._flush_to(self._log_end_offset)
            self._local.close()
            if not self._read_only and self._standalone:
                self._write_parent_checkpoints(
                    RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT)
            self._closed = True
            self._release(broker_epoch)

    def abandon(self) -> None:
        """Let go of the log as a killed process does (fault injection): nothing is flushed,
        checkpointed or marked clean; its descriptors are closed, as the kernel closes a killed
        process's, and the locks released so that it can be opened again."""
        with self._lock:
            if not self._closed:
                self._closed = True
                try:
                    self._local.close_handlers()
                finally:  # reopenable even if a mapping could not be closed
                    self._release()

    def _release(self, broker_epoch: int | None = None) -> None:
        if self._marker is not None:  # last: the marker vouches for every write before it
            self._marker.release(broker_epoch)
        if self._dir_lock is not None:
            self._dir_lock.release()
            self._dir_lock = None

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"Log({str(self._dir)!r}, start={self._log_start_offset}, end={self._log_end_offset}, "
                f"segments={len(self._local.segments)})")


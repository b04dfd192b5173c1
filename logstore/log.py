"""Log: one partition directory of segments, with Kafka's append, read, roll, flush, truncation
and recovery rules (Kafka's UnifiedLog, LocalLog, LogLoader and LogValidator).

Offsets and timestamps of the log live in the segments; the recovery point, the log start
offset and the high watermark live in the data directory's checkpoint files (the directory
holding the partition directory). A standalone Log reads and updates its own entry there; a
Log opened by LogManager leaves the checkpoints to the manager.
"""

from __future__ import annotations

import bisect
import os
import random
import struct
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from index.offset_index import OffsetIndex
from index.time_index import TimeIndex
from logstore import _kernels
from logstore.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    fsync_dir,
    read_offsets_checkpoint,
    write_offsets_checkpoint,
)
from logstore.clock import Clock, SystemClock
from logstore.config import LONG_MAX, TIMESTAMP_TYPE_LOG_APPEND, LogConfig
from logstore.epoch import LeaderEpochFileCache
from logstore.errors import (
    CorruptIndexError,
    CorruptRecordError,
    InvalidConfigError,
    InvalidRecordError,
    LogClosedError,
    OffsetOutOfRangeError,
    ReadOnlyLogError,
    RecordTooLargeError,
)
from logstore.lock import DirectoryLock
from logstore.log_files import (
    CLEAN_SHUTDOWN_FILE,
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIXES,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TXN_INDEX_SUFFIX,
    offset_from_file_name,
    parse_partition_dir,
)
from logstore.producer_state import ProducerStateManager, committed_batches
from logstore.records import (
    Record,
    RecordBatch,
    build_batch_columnar,
    crc32c,
    iter_batches,
    set_base_offset_and_epoch,
    set_log_append_time,
)
from logstore.records.header import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CRC_OFFSET,
    LOG_OVERHEAD,
    MAX_TIMESTAMP_OFFSET,
    NO_TIMESTAMP,
    SIZE_OFFSET,
    V2_HEADER_SIZE,
)
from logstore.segment import LogSegment, TimestampAndOffset
from logstore.txn_index import collect_aborted_txns

# ListOffsets special timestamps (Kafka's ListOffsetsRequest).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4

ORIGINS = ("client", "coordinator", "replication")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")
_SIZE = struct.Struct(">i")
_TIMESTAMP_TYPE_BIT = 0x08
_COMPRESSION_CODES = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
_PARENT_CHECKPOINT_LOCK = threading.Lock()
# Appends of immutable bytes up to this size are copied into one reused buffer per log.
SCRATCH_BUFFER_LIMIT = 16 * 1024 * 1024


class AppendInfo(NamedTuple):
    """What an append wrote: offsets, timestamps, record count and bytes."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time: int  # -1 unless message.timestamp.type=LogAppendTime
    record_count: int
    valid_bytes: int
    offset_of_max_timestamp: int  # last offset of the (first) batch holding max_timestamp


class FetchResult(NamedTuple):
    """Raw batch bytes read from the log and the log's offsets at read time."""

    records: bytes | memoryview  # whole batches; a memoryview when a partial tail was cut off
    first_offset: int  # base offset of the first batch returned (the fetch offset when empty)
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    aborted_transactions: tuple = ()  # AbortedTxn entries overlapping a read_committed fetch

    def batches(self) -> Iterator[RecordBatch]:
        """The complete batches in `records`."""
        return iter(iter_batches(self.records))


@dataclass(slots=True)
class LoadState:
    """Offsets a Log starts from, kept by whoever owns the data directory's checkpoints."""

    recovery_point: int = 0
    log_start_offset: int = 0
    high_watermark: int | None = None
    clean_shutdown: bool = False


class LogHooks:
    """Extension points for log-level state kept beside the segments (producer state,
    leader-epoch cache, transaction index). Every method defaults to doing nothing."""

    def loaded(self, log: Log) -> None:
        """After open and recovery, before any append."""

    def recovering_segment(self, log: Log, segment: LogSegment) -> None:
        """A segment is about to be recovered (its batches follow through recovered_batch)."""

    def recovered_batch(self, log: Log, batch: RecordBatch) -> None:
        """Each valid batch re-read while recovering a segment, in offset order."""

    def duplicate_of(self, log: Log, batches: list[RecordBatch], origin: str) -> Any:
        """For a leader append: the earlier append this one retries (an object with
        first_offset, last_offset and timestamp), or None. May raise to reject the append."""
        return None

    def before_append(self, log: Log, batches: list[RecordBatch], origin: str) -> None:
        """Batches about to be appended (offsets assigned); raise to reject the append."""

    def appended(self, log: Log, batches: list[RecordBatch], origin: str) -> None:
        """Batches just written to the active segment."""

    def rolled(self, log: Log, new_segment: LogSegment) -> None:
        """A new active segment was created (Kafka snapshots producer state here)."""

    def truncated(self, log: Log, end_offset: int) -> None:
        """Everything at and above `end_offset` was removed."""

    def start_offset_changed(self, log: Log, log_start_offset: int) -> None:
        """The log start offset moved up (or was reset by a full truncation)."""

    def segments_deleted(self, log: Log, segments: list[LogSegment]) -> None:
        """Segments left the log (their files are renamed `.deleted`)."""

    def closing(self, log: Log) -> None:
        """The log is about to close cleanly (Kafka snapshots producer state here)."""

    def epoch_for_offset(self, log: Log, offset: int) -> int | None:
        """Leader epoch of `offset`, if this hook tracks epochs."""
        return None

    def last_stable_offset(self, log: Log) -> int | None:
        """The LSO, if this hook tracks transactions."""
        return None

    def latest_epoch(self, log: Log) -> int | None:
        """Latest leader epoch, if this hook tracks epochs."""
        return None


class _Validated(NamedTuple):
    batches: list[RecordBatch]
    data: memoryview
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    record_count: int


def _index_files_look_sane(segment: LogSegment) -> bool:
    """Both index files exist and hold whole entries (checked with stat, without mapping them)."""
    for index in (segment.offset_index, segment.time_index):
        try:
            size = os.stat(index.path).st_size
        except FileNotFoundError:
            return False
        if size % index.ENTRY_SIZE:
            return False
    return True


def _check_writable_config(config: LogConfig) -> None:
    """Raise InvalidConfigError for a setting a segment's index files would reject, before
    the open creates the directory or its `.lock` (LogConfig allows Kafka's minimum of 4)."""
    for index in (OffsetIndex, TimeIndex):
        if config.segment_index_bytes < index.ENTRY_SIZE:
            raise InvalidConfigError(
                f"segment.index.bytes {config.segment_index_bytes} is smaller than one "
                f"{index.ENTRY_SIZE}-byte entry of a {index.KIND}")


def _set_max_timestamp(buf: bytearray | memoryview, position: int, end: int, timestamp: int) -> None:
    """Rewrite a CreateTime batch's maxTimestamp and its CRC (Kafka's setMaxTimestamp)."""
    _INT64.pack_into(buf, position + MAX_TIMESTAMP_OFFSET, timestamp)
    _UINT32.pack_into(buf, position + CRC_OFFSET, crc32c(memoryview(buf)[position + ATTRIBUTES_OFFSET : end]))


class Log:
    """An append-only partition log in a Kafka partition directory. Thread-safe: one lock
    serialises appends, reads and maintenance. Open with `Log.open`."""

    def __init__(self, directory: Path, config: LogConfig, clock: Clock, read_only: bool,
                 hooks: Sequence[LogHooks]) -> None:
        self._dir = directory
        self.topic, self.partition = parse_partition_dir(directory.name)
        self._config = config
        self._clock = clock
        self._read_only = read_only
        self._hooks = tuple(hooks)
        self._lock = threading.RLock()
        self._dir_lock: DirectoryLock | None = None
        self._segments: list[LogSegment] = []
        self._base_offsets: list[int] = []
        self._pending_deletes: list[tuple[int, LogSegment | Path]] = []
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
        self._partition_state: Any = None  # the PartitionState hook, set by open()
        self._scratch = bytearray()
        self.high_watermark_follows_log_end = True

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        config: LogConfig | dict[str, Any] | None = None,
        *,
        clock: Clock | None = None,
        read_only: bool = False,
        hooks: Sequence[LogHooks] = (),
        load_state: LoadState | None = None,
    ) -> Log:
        """Open (creating if needed) the partition directory `path` (`<topic>-<partition>`).

        Loads segments, finishes or rolls back interrupted swaps, rebuilds missing or corrupt
        indexes and recovers from the recovery point unless the last shutdown was clean.
        `read_only=True` changes no byte on disk. `load_state` is passed by LogManager;
        standalone logs read the parent directory's checkpoints. Raises LogLockedError if
        another Log owns the directory. A PartitionState hook (producer state, leader epochs,
        transaction indexes) is always installed; pass one in `hooks` to configure it.
        """
        from logstore.partition_state import PartitionState  # subclasses LogHooks: import here

        state = next((h for h in hooks if isinstance(h, PartitionState)), None)
        config = LogConfig.coerce(config)
        if state is None:  # producer state, leader epochs and txn indexes are always kept
            state = PartitionState(producer_id_expiration_ms=config.producer_id_expiration_ms)
            hooks = (state, *hooks)
        directory = Path(path)
        log = cls(directory, config, clock or SystemClock(), read_only, hooks)
        log._partition_state = state
        if read_only:
            if not directory.is_dir():
                raise FileNotFoundError(f"log directory {directory} does not exist")
        else:
            _check_writable_config(config)  # a failed open leaves no trace
            directory.mkdir(parents=True, exist_ok=True)
            log._dir_lock = DirectoryLock(directory).acquire()
        try:
            if load_state is None:
                load_state = log._read_parent_checkpoints()
            else:
                log._standalone = False
            log._load(load_state)
        except BaseException:
            log._release()
            raise
        return log

    def _read_parent_checkpoints(self) -> LoadState:
        parent = self._dir.parent
        key = (self.topic, self.partition)
        state = LoadState(
            recovery_point=read_offsets_checkpoint(parent / RECOVERY_POINT_CHECKPOINT).get(key, 0),
            log_start_offset=read_offsets_checkpoint(parent / LOG_START_OFFSET_CHECKPOINT).get(key, 0),
            high_watermark=read_offsets_checkpoint(parent / REPLICATION_OFFSET_CHECKPOINT).get(key),
            clean_shutdown=(parent / CLEAN_SHUTDOWN_FILE).exists(),
        )
        return state

    def _new_segment_args(self) -> dict[str, Any]:
        return {
            "index_interval_bytes": self._config.index_interval_bytes,
            "max_index_size": self._config.segment_index_bytes,
            "clock": self._clock,
        }

    def _roll_jitter_ms(self) -> int:
        jitter = self._config.segment_jitter_ms
        if jitter == 0:
            return 0
        return random.randrange(2**31) % min(jitter, self._config.segment_ms)

    def _open_segment(self, base_offset: int, suffix: str = "") -> LogSegment:
        return LogSegment.open(self._dir, base_offset, file_suffix=suffix,
                               read_only=self._read_only, **self._new_segment_args())

    def _load(self, state: LoadState) -> None:
        """Kafka's LogLoader: temp files, swaps, segment files, then recovery."""
        self._had_clean_shutdown = state.clean_shutdown
        if self._read_only:
            segments = self._load_segments_read_only()
        else:
            self._complete_swaps(self._remove_temp_files())
            segments, corrupt_txn_indexes = self._load_segment_files(state)
        self._set_segments(segments)
        if not self._read_only:
            # Kafka recovers a segment on any index problem rather than failing the load; once
            # the segment is live, PartitionState refills its .txnindex from the ABORT markers.
            # A read-only log rebuilds such an index in memory on its first read_committed read.
            for segment in corrupt_txn_indexes:
                self._recover_segment(segment)
            self._recover(state)
        if not self._segments:
            if self._read_only:
                raise FileNotFoundError(f"log directory {self._dir} holds no segments")
            self._set_segments([LogSegment.create(self._dir, state.log_start_offset,
                                                  roll_jitter_ms=self._roll_jitter_ms(),
                                                  **self._new_segment_args())])
        active = self._segments[-1]
        self._log_end_offset = active.next_offset
        if not self._read_only:
            active.resize_indexes(self._config.segment_index_bytes)
            active.roll_jitter_ms = self._roll_jitter_ms()
        self._log_start_offset = max(state.log_start_offset, self._segments[0].base_offset)
        if state.clean_shutdown:
            self._recovery_point = self._log_end_offset
        else:
            self._recovery_point = min(max(state.recovery_point, 0), self._log_end_offset)
        self._recovery_point = max(self._recovery_point, self._log_start_offset)
        hw = state.high_watermark
        if self.high_watermark_follows_log_end or hw is None:
            hw = self._log_end_offset
        self._high_watermark = min(max(hw, self._log_start_offset), self._log_end_offset)
        for hook in self._hooks:
            hook.loaded(self)

    def _load_segments_read_only(self) -> list[LogSegment]:
        segments = []
        for name in sorted(os.listdir(self._dir)):
            base = offset_from_file_name(name)
            if base is not None and name.endswith(LOG_SUFFIX) and name == f"{base:020d}{LOG_SUFFIX}":
                segments.append(self._open_segment(base))
        return segments

    def _remove_temp_files(self) -> list[Path]:
        """Delete `.deleted` and `.cleaned` files and `.swap` files of an unfinished clean."""
        swap_files, cleaned_files = [], []
        min_cleaned = LONG_MAX
        for entry in os.scandir(self._dir):
            if not entry.is_file():
                continue
            name = entry.name
            if name.endswith(DELETED_SUFFIX):
                os.unlink(entry.path)
            elif name.endswith(CLEANED_SUFFIX):
                offset = offset_from_file_name(name)
                if offset is not None:
                    min_cleaned = min(min_cleaned, offset)
                cleaned_files.append(Path(entry.path))
            elif name.endswith(SWAP_SUFFIX):
                swap_files.append(Path(entry.path))
        valid = []
        for path in swap_files:
            offset = offset_from_file_name(path.name)
            if offset is not None and offset >= min_cleaned:
                path.unlink()
            else:
                valid.append(path)
        for path in cleaned_files:
            path.unlink()
        return valid

    def _complete_swaps(self, swap_files: list[Path]) -> None:
        """Finish an interrupted replace: drop the old segments the `.swap` ones cover, then
        rename `.swap` files to live names (Kafka's LogLoader passes 1-3)."""
        swap_logs = [p for p in swap_files if p.name.endswith(LOG_SUFFIX + SWAP_SUFFIX)]
        if not swap_logs:
            for path in swap_files:
                path.unlink()
            return
        low, high = LONG_MAX, -1
        for path in swap_logs:
            base = offset_from_file_name(path.name)
            if base is None:
                continue
            segment = LogSegment.open(self._dir, base, file_suffix=SWAP_SUFFIX, read_only=True,
                                      **self._new_segment_args())
            low = min(low, base)
            high = max(high, segment.read_next_offset())
            segment.close_handlers()
        for entry in os.scandir(self._dir):
            offset = offset_from_file_name(entry.name)
            if entry.is_file() and not entry.name.endswith(SWAP_SUFFIX) and offset is not None \
                    and low <= offset < high:
                os.unlink(entry.path)
        for entry in os.scandir(self._dir):
            if entry.is_file() and entry.name.endswith(SWAP_SUFFIX):
                os.replace(entry.path, entry.path[: -len(SWAP_SUFFIX)])
        fsync_dir(self._dir)

    def _load_segment_files(self, state: LoadState) -> tuple[list[LogSegment], list[LogSegment]]:
        """(segments, those whose `.txnindex` is corrupt); recovers segments with missing or
        corrupt offset/time indexes, except the corrupt-txnindex ones, recovered once live."""
        names = sorted(e.name for e in os.scandir(self._dir) if e.is_file())
        present = set(names)
        segments, corrupt_txn = [], []
        for name in names:
            base = offset_from_file_name(name)
            if base is None:
                continue
            suffix = name[20:]
            if suffix in INDEX_SUFFIXES:
                if f"{base:020d}{LOG_SUFFIX}" not in present:
                    os.unlink(self._dir / name)  # an index without its log indexes nothing
            elif suffix == LOG_SUFFIX:
                segment = self._open_segment(base)
                if f"{base:020d}{TXN_INDEX_SUFFIX}" in present and not segment.txn_index.is_sound():
                    corrupt_txn.append(segment)
                elif not _index_files_look_sane(segment):
                    self._recover_segment(segment)
                segments.append(segment)
        if segments and (not corrupt_txn or corrupt_txn[-1] is not segments[-1]):
            # Older segments' indexes stay unmapped until first use (fast open of thousands of
            # segments); the active one is checked in full, as Kafka checks every segment.
            try:
                segments[-1].sanity_check()
            except CorruptIndexError:
                self._recover_segment(segments[-1])
        return segments, corrupt_txn

    def _recover_segment(self, segment: LogSegment) -> int:
        hooks = self._hooks
        for hook in hooks:
            hook.recovering_segment(self, segment)

        def on_batch(batch: RecordBatch) -> None:
            for hook in hooks:
                hook.recovered_batch(self, batch)

        dropped = segment.recover(on_batch=on_batch if hooks else None)
        self._recovered_bytes += dropped
        return dropped

    def _recover(self, state: LoadState) -> None:
        """Recover every segment from the one holding the recovery point on; after the first
        segment with an invalid tail, the later segments are deleted (Kafka's recoverLog)."""
        if state.clean_shutdown or not self._segments:
            return
        start = max(bisect.bisect_right(self._base_offsets, state.recovery_point) - 1, 0)
        for i in range(start, len(self._segments)):
            if self._recover_segment(self._segments[i]) > 0:
                doomed = self._segments[i + 1 :]
                self._set_segments(self._segments[: i + 1])
                for segment in doomed:
                    segment.delete()
                break

    def _set_segments(self, segments: list[LogSegment]) -> None:
        # Copy-on-write: readers keep the list they started with.
        self._segments = sorted(segments, key=lambda s: s.base_offset)
        self._base_offsets = [s.base_offset for s in self._segments]

    # ------------------------------------------------------------------ properties

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
        self._config = LogConfig.coerce(config)

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
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        """The segment appends go to."""
        return self._segments[-1]

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
        return sum(s.size for s in self._segments)

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

        `records`: raw batch bytes (a bytearray is modified in place), Records, (key, value)
        tuples or a pyarrow table (key, value[, timestamp][, headers]). Raises
        InvalidRecordError (RecordTooLargeError, bad timestamps, bad counts) or CorruptRecordError.
        """
        if origin not in ORIGINS or origin == "replication":
            raise ValueError(f"origin must be 'client' or 'coordinator', not {origin!r}")
        with self._lock:
            self._require_writable("append")
            now = self._clock.time_ms()
            buf = self._to_batch_buffer(records, now)
            validated = self._validate_and_assign(buf, now, leader_epoch, origin)
            for hook in self._hooks:
                duplicate = hook.duplicate_of(self, validated.batches, origin)
                if duplicate is not None:
                    # A producer retry: answer with the first append's offsets, write nothing.
                    return AppendInfo(duplicate.first_offset, duplicate.last_offset, validated.max_timestamp,
                                      duplicate.timestamp, validated.record_count, 0,
                                      validated.offset_of_max_timestamp)
            log_append_time = now if self._config.message_timestamp_type == TIMESTAMP_TYPE_LOG_APPEND else -1
            self._write(validated, origin)
            if self.high_watermark_follows_log_end:
                self._high_watermark = self._log_end_offset
            return AppendInfo(validated.first_offset, validated.last_offset, validated.max_timestamp,
                              log_append_time, validated.record_count, validated.data.nbytes,
                              validated.offset_of_max_timestamp)

    def append_as_follower(self, batch_bytes: bytes | bytearray | memoryview) -> AppendInfo:
        """Append batches fetched from a leader, keeping their offsets and epochs.

        Raises InvalidRecordError if offsets do not increase or start below the log end offset.
        """
        with self._lock:
            self._require_writable("append")
            view = memoryview(batch_bytes).cast("B")
            batches = self._complete_batches(view)
            last = -1
            max_ts, offset_of_max, count = NO_TIMESTAMP, -1, 0
            for batch in batches:
                batch.validate()
                if batch.last_offset <= last:
                    raise InvalidRecordError(
                        f"out of order offsets in follower append to {self._dir}: "
                        f"{batch.last_offset} after {last}")
                last = batch.last_offset
                if batch.max_timestamp > max_ts:
                    max_ts, offset_of_max = batch.max_timestamp, batch.last_offset
                count += batch.record_count
            if not batches:
                return AppendInfo(self._log_end_offset, self._log_end_offset - 1, NO_TIMESTAMP, -1, 0, 0, -1)
            first = batches[0].base_offset if batches[0].magic == 2 else batches[0].last_offset
            if first < self._log_end_offset:
                raise InvalidRecordError(
                    f"unexpected offset in follower append to {self._dir}: first offset {first} is "
                    f"below the log end offset {self._log_end_offset}")
            validated = _Validated(batches, view, first, last, max_ts, offset_of_max, count)
            self._write(validated, "replication")
            return AppendInfo(first, last, max_ts, -1, count, view.nbytes, offset_of_max)

    def _complete_batches(self, view: memoryview) -> list[RecordBatch]:
        it = iter_batches(view)
        batches = list(it)
        if it.valid_end != view.nbytes:
            raise CorruptRecordError(
                f"{view.nbytes - it.valid_end} trailing bytes do not form a complete batch",
                position=it.valid_end)
        return batches

    def _to_batch_buffer(self, records: Any, now: int) -> bytearray | memoryview:
        if isinstance(records, bytearray):
            return records
        if isinstance(records, bytes | memoryview):
            # The leader rewrites offsets in place, so immutable input is copied, into a reused
            # buffer: its pages are already mapped, which saves a page fault per 4 KiB appended.
            size = memoryview(records).nbytes
            if size > SCRATCH_BUFFER_LIMIT:
                return bytearray(records)
            if len(self._scratch) < size:
                self._scratch = bytearray(size)
            view = memoryview(self._scratch)[:size]
            view[:] = memoryview(records).cast("B")
            return view
        compression = self._config.compression_type
        compression = "none" if compression in ("producer", "uncompressed") else compression
        if _is_arrow_table(records):
            names = records.column_names
            n = records.num_rows
            timestamps = records.column("timestamp") if "timestamp" in names else np.full(n, now, np.int64)
            return bytearray(build_batch_columnar(
                records.column("key") if "key" in names else None,
                records.column("value") if "value" in names else None,
                timestamps=timestamps,
                headers=records.column("headers") if "headers" in names else None,
                compression=compression))
        items = list(records)
        if not items:
            raise InvalidRecordError("cannot append an empty list of records")
        keys, values, timestamps, headers = [], [], [], []
        for item in items:
            if isinstance(item, Record):
                keys.append(item.key)
                values.append(item.value)
                timestamps.append(now if item.timestamp is None or item.timestamp < 0 else item.timestamp)
                headers.append(item.headers)
            elif isinstance(item, tuple) and len(item) == 2:
                keys.append(item[0])
                values.append(item[1])
                timestamps.append(now)
                headers.append(())
            else:
                raise InvalidRecordError(f"expected Record or (key, value) tuples, got {type(item).__name__}")
        return bytearray(build_batch_columnar(keys, values, timestamps=timestamps, headers=headers,
                                              compression=compression))

    def _validate_and_assign(self, buf: bytearray | memoryview, now: int, leader_epoch: int,
                             origin: str) -> _Validated:
        """Kafka's leader path: analyzeAndValidateRecords + LogValidator, per batch."""
        config = self._config
        view = memoryview(buf).cast("B")
        batches = self._complete_batches(view)
        if not batches:
            raise InvalidRecordError("an append needs at least one record batch")
        target = config.compression_type
        if target not in ("producer",):
            target_code = _COMPRESSION_CODES["none" if target == "uncompressed" else target]
            if any(b.magic == 2 and (b.attributes & COMPRESSION_MASK) != target_code for b in batches):
                buf = self._recompress(batches, target_code, now)
                view = memoryview(buf).cast("B")
                batches = self._complete_batches(view)
        log_append = config.message_timestamp_type == TIMESTAMP_TYPE_LOG_APPEND
        next_offset = self._log_end_offset
        first_offset = next_offset
        max_timestamp, offset_of_max, count = NO_TIMESTAMP, -1, 0
        for batch in batches:
            self._validate_batch(batch, origin)
            n = batch.record_count
            low, high, null_key = self._scan_records(batch)
            if config.compact and null_key:
                raise InvalidRecordError(
                    f"compacted topic {self.topic} cannot accept a record without a key")
            batch_max = high
            if not log_append and n:
                self._check_timestamps(low, high, now, batch.position)
            set_base_offset_and_epoch(buf, batch.position, next_offset, leader_epoch)
            end = batch.position + batch.size_in_bytes
            if log_append:
                set_log_append_time(buf, batch.position, now)
                batch_max = now
            elif batch_max != batch.max_timestamp:
                _set_max_timestamp(buf, batch.position, end, batch_max)
            last = next_offset + batch.last_offset_delta
            if batch_max > max_timestamp:
                max_timestamp, offset_of_max = batch_max, last
            next_offset = last + 1
            count += n
        final = [RecordBatch(view, b.position) for b in batches]
        return _Validated(final, view, first_offset, next_offset - 1, max_timestamp, offset_of_max, count)

    def _validate_batch(self, batch: RecordBatch, origin: str) -> None:
        if batch.magic != 2:
            raise InvalidRecordError(
                f"leader appends take magic 2 batches only (got magic {batch.magic}); "
                "legacy batches are accepted by append_as_follower")
        size = batch.size_in_bytes
        if size > self._config.max_message_bytes:
            raise RecordTooLargeError(
                f"the record batch size in the append to {self.topic}-{self.partition} is {size} bytes "
                f"which exceeds the maximum configured value of {self._config.max_message_bytes}")
        batch.validate()
        if origin == "client":
            count_from_offsets = batch.last_offset_delta + 1
            if batch.record_count <= 0:
                raise InvalidRecordError(f"invalid reported count for record batch: {batch.record_count}")
            if count_from_offsets != batch.record_count:
                raise InvalidRecordError(
                    f"inconsistent batch offset range [{batch.base_offset}, {batch.last_offset}] "
                    f"and count of records {batch.record_count}")
            if batch.is_control:
                raise InvalidRecordError("clients are not allowed to write control records")
            if batch.producer_id >= 0 and batch.base_sequence < 0:
                raise InvalidRecordError(
                    f"invalid sequence number {batch.base_sequence} in record batch with "
                    f"producerId {batch.producer_id}")
            if batch.attributes & _TIMESTAMP_TYPE_BIT:
                raise InvalidRecordError(
                    "invalid timestamp type in a client batch: producers must not set LogAppendTime")

    def _scan_records(self, batch: RecordBatch) -> tuple[int, int, bool]:
        """Walk a batch's records without copying them (Kafka's skipKeyValueIterator):
        (min timestamp ignoring -1, max timestamp, any null key)."""
        body = batch.records_bytes()
        data = np.frombuffer(body, dtype=np.uint8)
        status, error, low, high, null_key = _kernels.scan_records(
            data, 0, data.size, batch.record_count, batch.base_timestamp)
        if status in (_kernels.ERR_OFFSET_DELTA, _kernels.ERR_TRAILING):
            raise InvalidRecordError(
                f"batch at position {batch.position} holds records that disagree with its "
                f"header count {batch.record_count}: {_kernels.STATUS_MESSAGES[status]}")
        if status != _kernels.OK:
            compressed = batch.attributes & COMPRESSION_MASK
            raise CorruptRecordError(
                f"{_kernels.STATUS_MESSAGES[status]} (record byte {error})",
                position=batch.position if compressed else batch.position + V2_HEADER_SIZE + error)
        return int(low), int(high), bool(null_key)

    def _check_timestamps(self, low: int, high: int, now: int, position: int) -> None:
        before = self._config.message_timestamp_before_max_ms
        after = self._config.message_timestamp_after_max_ms
        # Python ints: no int64 overflow for the Long.MAX defaults.
        if low != NO_TIMESTAMP and now - low > before:
            raise InvalidRecordError(
                f"timestamp {low} of a record in the batch at position {position} is more than "
                f"message.timestamp.before.max.ms={before} before the log's time {now}")
        if high != NO_TIMESTAMP and high - now > after:
            raise InvalidRecordError(
                f"timestamp {high} of a record in the batch at position {position} is more than "
                f"message.timestamp.after.max.ms={after} after the log's time {now}")

    def _recompress(self, batches: list[RecordBatch], code: int, now: int) -> bytearray:
        """Re-encode batches with the topic's compression.type (Kafka's buildRecordsAndAssignOffsets)."""
        name = next(k for k, v in _COMPRESSION_CODES.items() if v == code)
        out = bytearray()
        for batch in batches:
            self._validate_batch(batch, "client")
            table = batch.to_arrow()
            out += build_batch_columnar(
                table.column("key"), table.column("value"), timestamps=table.column("timestamp"),
                headers=table.column("headers"), compression=name,
                producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                base_sequence=batch.base_sequence, is_transactional=batch.is_transactional)
        return out

    def _write(self, validated: _Validated, origin: str) -> None:
        """Roll if needed, append to the active segment, move the log end offset, maybe flush."""
        size = validated.data.nbytes
        if size > self._config.segment_bytes:
            raise RecordTooLargeError(
                f"message batch size is {size} bytes in append to {self.topic}-{self.partition}, "
                f"which exceeds the maximum configured segment size of {self._config.segment_bytes}")
        for hook in self._hooks:
            hook.before_append(self, validated.batches, origin)
        segment = self._maybe_roll(size, validated)
        segment.append(validated.last_offset, validated.max_timestamp,
                       validated.offset_of_max_timestamp, validated.data)
        self._log_end_offset = validated.last_offset + 1
        for hook in self._hooks:
            hook.appended(self, validated.batches, origin)
        if self.unflushed_messages >= self._config.flush_messages:
            self.flush()

    def _max_segment_ms(self) -> int:
        config = self._config
        if config.compact and config.max_compaction_lag_ms > 0:
            return min(config.max_compaction_lag_ms, config.segment_ms)
        return config.segment_ms

    def _maybe_roll(self, size: int, validated: _Validated) -> LogSegment:
        segment = self._segments[-1]
        if segment.should_roll(
            max_segment_bytes=self._config.segment_bytes,
            max_segment_ms=self._max_segment_ms(),
            messages_size=size,
            max_timestamp_in_messages=validated.max_timestamp,
            max_offset_in_messages=validated.last_offset,
            now_ms=self._clock.time_ms(),
        ):
            return self._roll(validated.first_offset)
        return segment

    # ------------------------------------------------------------------ roll and flush

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset and return it."""
        with self._lock:
            self._require_writable("roll")
            return self._roll(self._log_end_offset)

    def _roll(self, expected_next_offset: int) -> LogSegment:
        new_offset = max(expected_next_offset, self._log_end_offset)
        active = self._segments[-1]
        if active.base_offset == new_offset and active.size == 0:
            return active  # rolling an empty segment onto itself changes nothing
        if new_offset < active.base_offset:
            raise InvalidRecordError(
                f"cannot roll {self._dir} to offset {new_offset} below the active segment {active.base_offset}")
        active.on_become_inactive_segment()
        segment = LogSegment.create(self._dir, new_offset, roll_jitter_ms=self._roll_jitter_ms(),
                                    **self._new_segment_args())
        self._set_segments([*self._segments, segment])
        for hook in self._hooks:
            hook.rolled(self, segment)
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
        start = max(bisect.bisect_right(self._base_offsets, self._recovery_point) - 1, 0)
        for segment in self._segments[start:]:
            if segment.base_offset >= offset:
                break
            segment.flush()
        fsync_dir(self._dir)
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
             min_one_batch: bool = True, isolation: str = "log_end") -> FetchResult:
        """Whole batches from the one holding `offset`, at most `max_bytes` (but at least one
        batch with `min_one_batch`), only batches ending below `max_offset` (default: log end).
        Unlike Kafka, a batch cut by `max_bytes` is left out rather than returned partially.

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
            empty = FetchResult(b"", offset, hw, start, end)
            if offset >= limit:
                return empty
            i = max(bisect.bisect_right(self._base_offsets, offset) - 1, 0)
            while i < len(self._segments):
                segment = self._segments[i]
                max_position = None
                if limit < end:
                    mapping = segment.translate_offset(limit)
                    max_position = mapping.position if mapping is not None else None
                try:
                    result = segment.read(offset, max_bytes, max_position, min_one_batch)
                except LogClosedError:
                    raise OffsetOutOfRangeError(
                        f"offset {offset} of {self.topic}-{self.partition} was deleted during the read") from None
                if result is not None:
                    data = _complete_prefix(result.data)
                    if not data:
                        return empty
                    first = _INT64.unpack_from(data, 0)[0]
                    aborted = ()
                    if isolation == "read_committed":
                        if self._read_only:  # rebuild missing or corrupt .txnindex in memory
                            first_segment = max(bisect.bisect_right(self._base_offsets, offset) - 1, 0)
                            self._partition_state.index_aborts_in_memory(
                                self, self._segments[first_segment:])
                        aborted = tuple(collect_aborted_txns(self._segments, offset, limit))
                    return FetchResult(data, first, hw, start, end, aborted)
                i += 1
            return empty

    @property
    def producer_state(self) -> ProducerStateManager:
        """Idempotent and transactional producers' state (Kafka's ProducerStateManager)."""
        return self._partition_state.producer_state

    def remove_expired_producers(self, now_ms: int | None = None) -> list[int]:
        """Forget producer ids idle for `producer.id.expiration.ms` (no open transaction)."""
        with self._lock:
            return self._partition_state.producer_state.remove_expired_producers(now_ms)

    @property
    def leader_epoch_cache(self) -> LeaderEpochFileCache:
        """Leader epochs and their start offsets (`leader-epoch-checkpoint`)."""
        return self._partition_state.leader_epoch_cache(self)

    @property
    def last_stable_offset(self) -> int:
        """The LSO from the transaction-tracking hook, else the high watermark."""
        for hook in self._hooks:
            lso = hook.last_stable_offset(self)
            if lso is not None:
                return lso
        return self._high_watermark

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
        while position < self._isolation_bound(isolation):
            fetched = self.read(position, isolation=isolation)
            if not fetched.records:
                return
            fetched_batches = list(fetched.batches())
            batches: Iterable[RecordBatch] = fetched_batches
            if isolation == "read_committed":
                batches = committed_batches(fetched_batches, fetched.aborted_transactions)
            for batch in batches:
                if batch.last_offset < position:
                    continue
                for record in batch.records():
                    if record.offset >= position:
                        yield record
            position = max(position, fetched_batches[-1].next_offset)

    # ------------------------------------------------------------------ timestamps

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """Kafka's ListOffsets for this log: the first record with timestamp >= `timestamp`, or
        LATEST_TIMESTAMP (-1), EARLIEST_TIMESTAMP (-2), MAX_TIMESTAMP (-3),
        EARLIEST_LOCAL_TIMESTAMP (-4). None when no record qualifies."""
        with self._lock:
            if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
                start = self._log_start_offset
                return TimestampAndOffset(NO_TIMESTAMP, start, self._hook_epoch_for(start))
            if timestamp == LATEST_TIMESTAMP:
                return TimestampAndOffset(NO_TIMESTAMP, self._log_end_offset, self._hook_latest_epoch())
            if timestamp == MAX_TIMESTAMP:
                return self._max_timestamp_offset()
            if timestamp < 0:
                raise ValueError(f"unsupported special timestamp {timestamp}")
            for segment in self._segments:
                if segment.largest_timestamp >= timestamp:
                    return segment.find_offset_by_timestamp(timestamp, self._log_start_offset)
            return None

    def _max_timestamp_offset(self) -> TimestampAndOffset | None:
        best = max(self._segments, key=lambda s: s.max_timestamp_so_far)  # first of the maxima
        target = best.max_timestamp_so_far
        if target < 0:
            return None
        position = best.offset_index.lookup(best.offset_of_max_timestamp).position
        for batch in best.iter_batches(position):
            if batch.max_timestamp == target:
                cols = batch.columns()
                hits = np.flatnonzero(cols.timestamp == target)
                if hits.size:
                    epoch = batch.partition_leader_epoch
                    return TimestampAndOffset(target, int(cols.offset[hits[0]]), epoch if epoch >= 0 else None)
        return None

    def _hook_epoch_for(self, offset: int) -> int | None:
        for hook in self._hooks:
            epoch = hook.epoch_for_offset(self, offset)
            if epoch is not None:
                return epoch
        return None

    def _hook_latest_epoch(self) -> int | None:
        for hook in self._hooks:
            epoch = hook.latest_epoch(self)
            if epoch is not None:
                return epoch
        return None

    # ------------------------------------------------------------------ truncation

    def truncate_to(self, offset: int) -> bool:
        """Remove every record at or above `offset` (whole batches); False if nothing to do."""
        with self._lock:
            self._require_writable("truncate")
            if offset < 0:
                raise ValueError(f"cannot truncate {self._dir} to a negative offset {offset}")
            if offset >= self._log_end_offset:
                return False
            if self._segments[0].base_offset > offset:
                self._truncate_fully(offset)
                return True
            keep = [s for s in self._segments if s.base_offset <= offset]
            doomed = [s for s in self._segments if s.base_offset > offset]
            if doomed:
                self._set_segments(keep)
                self._schedule_deletes(doomed)
            active = self._segments[-1]
            active.truncate_to(offset)
            active.resize_indexes(self._config.segment_index_bytes)
            self._log_end_offset = active.read_next_offset()
            self._log_start_offset = min(offset, self._log_start_offset)
            self._recovery_point = min(self._recovery_point, self._log_end_offset)
            self._high_watermark = min(self._high_watermark, self._log_end_offset)
            for hook in self._hooks:
                hook.truncated(self, self._log_end_offset)
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start an empty log at `offset` (a follower far behind)."""
        with self._lock:
            self._require_writable("truncate")
            self._truncate_fully(offset)

    def _truncate_fully(self, offset: int) -> None:
        doomed = list(self._segments)
        for segment in doomed:
            segment.change_file_suffixes("", DELETED_SUFFIX)
        segment = LogSegment.create(self._dir, offset, roll_jitter_ms=self._roll_jitter_ms(),
                                    **self._new_segment_args())
        self._set_segments([segment])
        self._schedule_deletes(doomed, renamed=True)
        self._log_end_offset = offset
        self._log_start_offset = offset
        self._recovery_point = offset
        self._high_watermark = offset
        for hook in self._hooks:
            hook.truncated(self, offset)
            hook.start_offset_changed(self, offset)
        self._start_offset_changed()

    # ------------------------------------------------------------------ log start offset

    def maybe_increment_log_start_offset(self, offset: int, reason: str = "client_record_deletion") -> bool:
        """Move the log start offset up to `offset` (never down); True if it moved.

        Raises OffsetOutOfRangeError above the high watermark. The new value is checkpointed.
        """
        with self._lock:
            self._require_writable(f"increment the log start offset ({reason})")
            if offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot increment the log start offset of {self.topic}-{self.partition} to "
                    f"{offset} ({reason}): it is above the high watermark {self._high_watermark}")
            if offset <= self._log_start_offset:
                return False
            self._set_log_start_offset(offset)
            return True

    def delete_records_before(self, offset: int) -> int:
        """Kafka's DeleteRecords: move the log start offset to `offset`; returns the new start."""
        self.maybe_increment_log_start_offset(offset, "client_record_deletion")
        return self._log_start_offset

    def _set_log_start_offset(self, offset: int) -> None:
        self._log_start_offset = offset
        if self._high_watermark < offset:
            self._high_watermark = offset
        if self._recovery_point < offset:
            self._recovery_point = offset
        for hook in self._hooks:
            hook.start_offset_changed(self, offset)
        self._start_offset_changed()

    def _start_offset_changed(self) -> None:
        if self._on_start_offset_change is not None:
            self._on_start_offset_change(self)
        elif self._standalone:
            self._write_parent_checkpoints(LOG_START_OFFSET_CHECKPOINT)

    # ------------------------------------------------------------------ segment deletion

    def delete_segments(self, segments: Iterable[LogSegment], reason: str = "retention") -> int:
        """Remove segments from the log, rename their files `.deleted` and delete them
        `file.delete.delay.ms` later; rolls first if the active segment is among them.
        Returns the number of segments removed."""
        with self._lock:
            self._require_writable(f"delete segments ({reason})")
            targets = {s.base_offset for s in segments}
            doomed = [s for s in self._segments if s.base_offset in targets]
            if not doomed:
                return 0
            if self._segments[-1] in doomed:
                self._roll(self._log_end_offset)
            self._set_segments([s for s in self._segments if s not in doomed])
            self._schedule_deletes(doomed)
            first = self._segments[0].base_offset
            if first > self._log_start_offset:
                self._set_log_start_offset(first)
            return len(doomed)

    def _schedule_deletes(self, segments: list[LogSegment], *, renamed: bool = False) -> None:
        if not renamed:
            for segment in segments:
                segment.change_file_suffixes("", DELETED_SUFFIX)
        for hook in self._hooks:
            hook.segments_deleted(self, segments)
        due = self._clock.time_ms() + self._config.file_delete_delay_ms
        self._pending_deletes.extend((due, s) for s in segments)
        if self._config.file_delete_delay_ms == 0:
            self.delete_expired_files()

    def delete_file_later(self, path: Path) -> None:
        """Remove `path`, a file already renamed `.deleted`, once file.delete.delay.ms has
        passed, as the segments deleted with it (a hook's file, e.g. a producer snapshot)."""
        with self._lock:
            self._pending_deletes.append((self._clock.time_ms() + self._config.file_delete_delay_ms, path))

    def delete_expired_files(self, now_ms: int | None = None) -> int:
        """Physically delete `.deleted` segments (and hooks' `.deleted` files) whose delay has
        passed; returns how many."""
        now = self._clock.time_ms() if now_ms is None else now_ms
        with self._lock:
            due = [s for t, s in self._pending_deletes if t <= now]
            self._pending_deletes = [(t, s) for t, s in self._pending_deletes if t > now]
        for item in due:
            if isinstance(item, LogSegment):
                item.delete()
            else:
                item.unlink(missing_ok=True)
        return len(due)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold this log's lock for the block, so a multi-step change (a retention pass:
        retention.apply_retention) is atomic to appends, reads, truncation and the cleaner."""
        with self._lock:
            yield

    @property
    def pending_deletes(self) -> list[LogSegment]:
        """Segments renamed `.deleted` and waiting for `file.delete.delay.ms`."""
        return [s for _, s in self._pending_deletes if isinstance(s, LogSegment)]

    def replace_segments(self, new_segments: Sequence[LogSegment], old_segments: Sequence[LogSegment]) -> None:
        """Swap cleaned segments (files ending `.cleaned`) in for `old_segments`, crash-safely:
        rename new files `.cleaned` -> `.swap`, old files -> `.deleted`, then drop `.swap`.
        A crash at any step reopens to either the old or the new segments."""
        with self._lock:
            self._require_writable("replace segments")
            new_sorted = sorted(new_segments, key=lambda s: s.base_offset)
            live = set(self._base_offsets)
            old_sorted = sorted((s for s in old_segments if s.base_offset in live), key=lambda s: s.base_offset)
            for segment in reversed(new_sorted):
                segment.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
            fsync_dir(self._dir)
            new_bases = {s.base_offset for s in new_sorted}
            old_ids = {id(s) for s in old_sorted}
            remaining = [s for s in self._segments if id(s) not in old_ids and s.base_offset not in new_bases]
            self._set_segments(remaining + list(new_sorted))
            self._schedule_deletes(old_sorted)
            for segment in new_sorted:
                segment.change_file_suffixes(SWAP_SUFFIX, "")
            fsync_dir(self._dir)

    # ------------------------------------------------------------------ checkpoints and close

    def _write_parent_checkpoints(self, *names: str) -> None:
        """Merge this log's entry into the parent directory's checkpoint files."""
        parent = self._dir.parent
        key = (self.topic, self.partition)
        values = {
            RECOVERY_POINT_CHECKPOINT: self._recovery_point,
            LOG_START_OFFSET_CHECKPOINT: self._log_start_offset,
            REPLICATION_OFFSET_CHECKPOINT: self._high_watermark,
        }
        with _PARENT_CHECKPOINT_LOCK:  # standalone logs of one parent share these files
            for name in names:
                offsets = read_offsets_checkpoint(parent / name)
                offsets[key] = values[name]
                write_offsets_checkpoint(parent / name, offsets)

    def close(self) -> None:
        """Flush, write the final time-index entries, trim indexes, write checkpoints (when
        standalone) and release the directory. Idempotent."""
        with self._lock:
            if self._closed:
                return
            if not self._read_only:
                for hook in self._hooks:
                    hook.closing(self)
                self._flush_to(self._log_end_offset)
            for segment in self._segments:
                segment.close()
            if not self._read_only and self._standalone:
                self._write_parent_checkpoints(
                    RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT)
            self._closed = True
            self._release()

    def _release(self) -> None:
        if self._dir_lock is not None:
            self._dir_lock.release()
            self._dir_lock = None

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"Log({str(self._dir)!r}, start={self._log_start_offset}, end={self._log_end_offset}, "
                f"segments={len(self._segments)})")


def _complete_prefix(data: bytes) -> bytes | memoryview:
    """`data` without a trailing partial batch (a read cut short by max_bytes), not copied."""
    position, total = 0, len(data)
    while position + LOG_OVERHEAD <= total:
        size = _SIZE.unpack_from(data, position + SIZE_OFFSET)[0] + LOG_OVERHEAD
        if position + size > total:
            break
        position += size
    return data if position == total else memoryview(data)[:position]


def _is_arrow_table(obj: Any) -> bool:
    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover - pyarrow is a runtime dependency
        return False
    return isinstance(obj, pa.Table | pa.RecordBatch)

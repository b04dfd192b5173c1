"""LogLoader: opens a partition directory's segments (Kafka's LogLoader): removes temporary
files, completes or rolls back an interrupted segment swap, rebuilds missing or corrupt indexes,
and recovers the segments from the recovery point unless the last shutdown was clean.
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass
from pathlib import Path

from index.offset_index import OffsetIndex
from index.time_index import TimeIndex
from logstore.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    fsync_dir,
    read_offsets_checkpoint,
)
from logstore.clock import Clock
from logstore.config import LONG_MAX, LogConfig
from logstore.errors import CorruptIndexError, InvalidConfigError
from logstore.log_files import (
    CLEAN_SHUTDOWN_FILE,
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    INDEX_SUFFIXES,
    LOG_SUFFIX,
    OFFSET_DIGITS,
    SNAPSHOT_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    is_segment_log_name,
    offset_from_file_name,
)
from logstore.partition_state import PartitionState
from logstore.read_only_recovery import recover_read_only
from logstore.segment import LogSegment
from logstore.segment_options import SegmentOptions, roll_jitter_ms

# Names of files an interrupted delete, clean or swap left (removed or completed on open).
_TEMP_SUFFIXES = (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX)


@dataclass(slots=True)
class LoadState:
    """Offsets a Log starts from, kept by whoever owns the data directory's checkpoints."""

    recovery_point: int = 0
    log_start_offset: int = 0
    high_watermark: int | None = None
    clean_shutdown: bool = False
    # A read-only open that shows every byte on disk, damage included (an audit reporting it),
    # rather than what Kafka's recovery keeps (read_only_recovery, in memory).
    raw: bool = False

    @classmethod
    def from_parent_dir(cls, directory: Path, topic: str, partition: int) -> LoadState:
        """The entry of `topic`-`partition` in the checkpoints of `directory`'s parent (a standalone Log)."""
        parent = directory.parent
        key = (topic, partition)
        return cls(
            recovery_point=read_offsets_checkpoint(parent / RECOVERY_POINT_CHECKPOINT).get(key, 0),
            log_start_offset=read_offsets_checkpoint(parent / LOG_START_OFFSET_CHECKPOINT).get(key, 0),
            high_watermark=read_offsets_checkpoint(parent / REPLICATION_OFFSET_CHECKPOINT).get(key),
            clean_shutdown=(parent / CLEAN_SHUTDOWN_FILE).exists(),
        )


@dataclass(slots=True)
class LoadedLog:
    """What loading found: the live segments and the log's offsets."""

    segments: list[LogSegment]
    log_start_offset: int
    log_end_offset: int
    recovery_point: int
    recovered_bytes: int


def check_writable_config(config: LogConfig) -> None:
    """Raise InvalidConfigError for a setting a segment's index files would reject, before
    the open creates the directory or its `.lock` (LogConfig allows Kafka's minimum of 4)."""
    for index in (OffsetIndex, TimeIndex):
        if config.segment_index_bytes < index.ENTRY_SIZE:
            raise InvalidConfigError(
                f"segment.index.bytes {config.segment_index_bytes} is smaller than one "
                f"{index.ENTRY_SIZE}-byte entry of a {index.KIND}")


def _list_files(directory: Path) -> dict[str, os.DirEntry[str]]:
    """The regular files of `directory` by name: the one listing an open reads."""
    return {entry.name: entry for entry in os.scandir(directory) if entry.is_file()}


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


class LogLoader:
    """Loads one partition directory; `load()` once, then hand the result to Log."""

    def __init__(self, directory: Path, config: LogConfig, clock: Clock, read_only: bool,
                 state: PartitionState, load_state: LoadState) -> None:
        self._dir = directory
        self._config = config
        self._clock = clock
        self._read_only = read_only
        self._state = state
        self._load_state = load_state
        self._segments: list[LogSegment] = []
        self._recovered_bytes = 0
        self._recovered: set[int] = set()  # base offsets of the segments recovered
        self._options: SegmentOptions | None = None  # what the live segments open with

    def load(self) -> LoadedLog:
        """Temp files, swaps, segment files, recovery; then the log's offsets. Loading a
        read-only log changes no byte: it recovers in memory and shows what Kafka's recovery keeps
        (unless `raw`); FileNotFoundError if it holds no segments."""
        state = self._load_state
        listing = _list_files(self._dir)
        if self._read_only:
            segments = self._load_segments_read_only(listing)
            if not state.raw and not state.clean_shutdown:
                segments, self._recovered_bytes = recover_read_only(segments, state.recovery_point)
        else:
            if any(name.endswith(_TEMP_SUFFIXES) for name in listing):
                self._complete_swaps(self._remove_temp_files(listing))
                listing = _list_files(self._dir)
            segments, corrupt_txn_indexes = self._load_segment_files(listing)
        self._segments = sorted(segments, key=lambda s: s.base_offset)
        if state.clean_shutdown and not state.raw and self._segments:
            self._end_from_snapshot(self._segments[-1], listing)
        if not self._read_only:
            # Kafka recovers a segment on any index problem rather than failing the load; once
            # the segment is live, its .txnindex is refilled from the ABORT markers.
            # A read-only log rebuilds such an index in memory on its first read_committed read.
            for segment in corrupt_txn_indexes:
                self._recover_segment(segment)
            self._recover()
            self._drop_segments_ending_below(state.log_start_offset)
        if not self._segments:
            if self._read_only:
                raise FileNotFoundError(f"log directory {self._dir} holds no segments")
            self._segments = [LogSegment.create(self._dir, state.log_start_offset, SegmentOptions.of(
                self._config, self._clock, roll_jitter_ms=roll_jitter_ms(self._config)))]
        active = self._segments[-1]
        log_end = active.next_offset
        if not self._read_only:
            for index in (active.offset_index, active.time_index):
                index.resize_on_load(self._config.segment_index_bytes)
            active.roll_jitter_ms = roll_jitter_ms(self._config)
        log_start = max(state.log_start_offset, self._segments[0].base_offset)
        recovery_point = log_end if state.clean_shutdown else min(max(state.recovery_point, 0), log_end)
        recovery_point = max(recovery_point, log_start)
        self._state.loaded(self._segments, log_start, log_end, clean_shutdown=state.clean_shutdown)
        return LoadedLog(self._segments, log_start, log_end, recovery_point, self._recovered_bytes)

    def _drop_segments_ending_below(self, log_start_offset: int) -> None:
        """A log that ends below its checkpointed start (a crash between a truncation and its
        checkpoint, or a power loss) restarts empty at that start, as Kafka's recoverLog does."""
        if not self._segments or self._segments[-1].next_offset >= log_start_offset:
            return
        for segment in self._segments:
            segment.delete()
        self._segments = []
        self._state.epochs.clear_and_flush()

    def _open_segment(self, base_offset: int) -> LogSegment:
        """The segment whose `.log` the listing showed (so not checked for again)."""
        if self._options is None:
            self._options = SegmentOptions.of(self._config, self._clock, read_only=self._read_only)
        return LogSegment(self._dir, base_offset, self._options)

    def _load_segments_read_only(self, listing: dict[str, os.DirEntry[str]]) -> list[LogSegment]:
        return [self._open_segment(offset_from_file_name(name)) for name in sorted(listing)
                if is_segment_log_name(name)]

    def _end_from_snapshot(self, active: LogSegment, listing: dict[str, os.DirEntry[str]]) -> None:
        """After a clean shutdown, take the active segment's next offset from the producer
        snapshot the close wrote at the log end (its name), so the open reads neither its index
        nor its last batches; an empty segment ends at its base. Without such a snapshot (or
        when the segment was recovered) the next offset is read from the segment on first use."""
        if active.base_offset in self._recovered:
            return
        if active.size == 0:
            active.assume_next_offset(active.base_offset)
            return
        snapshots = [offset_from_file_name(name) for name in listing if name.endswith(SNAPSHOT_SUFFIX)]
        end = max((offset for offset in snapshots if offset is not None), default=-1)
        if end > active.base_offset:
            active.assume_next_offset(end)

    def _remove_temp_files(self, listing: dict[str, os.DirEntry[str]]) -> list[Path]:
        """Delete `.deleted` and `.cleaned` files and `.swap` files of an unfinished clean."""
        swap_files, cleaned_files = [], []
        min_cleaned = LONG_MAX
        for name, entry in listing.items():
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
            segment = LogSegment.open(self._dir, base, SegmentOptions.of(
                self._config, self._clock, file_suffix=SWAP_SUFFIX, read_only=True))
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

    def _load_segment_files(self, listing: dict[str, os.DirEntry[str]]) -> tuple[list[LogSegment], list[LogSegment]]:
        """(segments, those whose `.txnindex` is corrupt); recovers segments with missing
        offset/time indexes, and after an unclean shutdown corrupt ones, except the
        corrupt-txnindex segments, recovered once live. After a clean shutdown no index is
        opened: as Kafka, only their presence is checked (in the listing)."""
        clean = self._load_state.clean_shutdown
        for name in listing:
            # An index without its log indexes nothing.
            if name[OFFSET_DIGITS:] in INDEX_SUFFIXES and name[:OFFSET_DIGITS] + LOG_SUFFIX not in listing \
                    and offset_from_file_name(name) is not None:
                os.unlink(self._dir / name)
        segments, corrupt_txn = [], []
        for name in sorted(name for name in listing if name[OFFSET_DIGITS:] == LOG_SUFFIX):
            base = offset_from_file_name(name)
            if base is None:
                continue
            prefix = name[:OFFSET_DIGITS]
            segment = self._open_segment(base)
            if prefix + TXN_INDEX_SUFFIX in listing and not segment.txn_index.is_sound():
                corrupt_txn.append(segment)
            elif prefix + INDEX_SUFFIX not in listing or prefix + TIME_INDEX_SUFFIX not in listing \
                    or (not clean and not _index_files_look_sane(segment)):
                self._recover_segment(segment)
            segments.append(segment)
        if segments and not clean and (not corrupt_txn or corrupt_txn[-1] is not segments[-1]):
            # Older segments' indexes stay unmapped until first use (fast open of thousands of
            # segments); the active one is checked in full, as Kafka checks every segment.
            try:
                segments[-1].sanity_check()
            except CorruptIndexError:
                self._recover_segment(segments[-1])
        return segments, corrupt_txn

    def _recover_segment(self, segment: LogSegment) -> int:
        self._recovered.add(segment.base_offset)
        self._state.recovering_segment(self._segments, segment)
        dropped = segment.recover(on_batch=self._state.recovered_batch)
        self._recovered_bytes += dropped
        return dropped

    def _recover(self) -> None:
        """Recover every segment from the one holding the recovery point on; after the first
        segment with an invalid tail, the later segments are deleted (Kafka's recoverLog)."""
        if self._load_state.clean_shutdown or not self._segments:
            return
        bases = [s.base_offset for s in self._segments]
        start = max(bisect.bisect_right(bases, self._load_state.recovery_point) - 1, 0)
        for i in range(start, len(self._segments)):
            if self._recover_segment(self._segments[i]) > 0:
                doomed = self._segments[i + 1 :]
                self._segments = self._segments[: i + 1]
                for segment in doomed:
                    segment.delete()
                break

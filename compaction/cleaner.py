"""Cleaner: one compaction round of a Log, Kafka's way (Cleaner.doClean / LogCleanerManager).

Order of work: pick the cleanable range (selection.evaluate) -> build the offset map over the
dirty segments (plan.map_batches) -> group the segments below the map's end (segment.bytes and
index limits) -> per group decide every batch (plan.decide) and write the kept bytes into a
new `.cleaned` segment, appended in the groups Kafka's read buffer would give (so indexes
match) -> `Log.replace_segments` swaps it in crash-safely -> `cleaner-offset-checkpoint`.

Both passes read a segment a chunk of whole batches at a time (decode.decode_chunks), as
Kafka's cleaner reads through its buffers: memory stays bounded whatever the segment size
(the offset map, log.cleaner.dedupe.buffer.size, aside). Segments small enough for
DECODE_CACHE_BYTES are decoded once for both passes (DecodeCache).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from compaction import _kernels
from compaction import decode as dec
from compaction.offset_map import OffsetMap
from compaction.plan import (
    COPY,
    DROP,
    EMPTY,
    REASON_NAMES,
    REWRITE,
    ProducerLastRecord,
    TxnTracker,
    decide,
    map_batches,
)
from compaction.selection import (
    CleanableRange,
    CleanerSegmentInfo,
    evaluate,
    group_segments_by_size,
)
from logstore.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    read_offsets_checkpoint,
    write_offsets_checkpoint,
)
from logstore.config import LogConfig
from logstore.errors import CorruptRecordError, LogCleaningAbortedError, UnknownTopicConfigError
from logstore.log_files import CLEANED_SUFFIX, INDEX_SUFFIXES, LOG_SUFFIX, segment_file_name
from logstore.log_like import SegmentedLogLike
from logstore.records.header import CONTROL_BIT, INT32_MAX, V2_HEADER_SIZE
from logstore.segment import LogSegment
from logstore.segment_options import SegmentOptions
from logstore.txn_index import AbortedTxn

# Decoded arrays of whole dirty segments the offset-map pass keeps for the cleaning pass (one
# decode instead of two for small segments); a segment beyond what is left is decoded again.
DECODE_CACHE_BYTES = 64 << 20


@dataclass
class CleanResult:
    """What one cleaning round read, wrote and removed (Kafka's CleanerStats, per log)."""

    topic: str
    partition: int
    first_dirty_offset: int = 0
    end_offset: int = 0  # the new cleaner checkpoint
    first_uncleanable_offset: int = 0
    dirty_ratio: float = 0.0
    due_reason: str | None = None
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_written: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0
    removed_by_reason: dict[str, int] = field(default_factory=dict)
    segments_cleaned: int = 0
    segments_written: int = 0
    map_keys: int = 0
    map_full: bool = False
    bytes_per_key: float = 0.0
    elapsed_s: float = 0.0
    dry_run: bool = False
    cleanable: CleanableRange | None = None  # the selection the round started from

    @property
    def cleaned(self) -> bool:
        """True when the round had anything to clean."""
        return self.segments_cleaned > 0


def _segment_infos(segments: list[LogSegment]) -> list[CleanerSegmentInfo]:
    infos = []
    for s in segments:
        first = s.first_batch_timestamp
        infos.append(CleanerSegmentInfo(s.base_offset, s.size, s.largest_timestamp,
                                        -1 if first is None else first))
    return infos


def last_stable_offset(log: SegmentedLogLike) -> int:
    """The log's LSO: `log.last_stable_offset` (attribute or method) where the transaction
    state provides one, else the high watermark (no open transactions are known)."""
    lso = getattr(log, "last_stable_offset", None)
    if callable(lso):
        lso = lso()
    return log.high_watermark if lso is None else int(lso)


def producers_of(log: SegmentedLogLike, segments: list[LogSegment]) -> dict[int, ProducerLastRecord]:
    """Kafka's lastRecordsOfActiveProducers: from `log.producer_state` (a ProducerStateManager)
    when the log carries one, else derived from the batch headers of `segments`."""
    psm = getattr(log, "producer_state", None)
    if psm is None:
        return active_producers(segments)
    return {pid: ProducerLastRecord(e.last_data_offset if e.last_data_offset >= 0 else None, e.producer_epoch)
            for pid, e in psm.producers.items()}


def cleaning_clock() -> float:
    """Seconds on a clock that stops while numba kernels compile or load from the cache (a
    one-off cost of the first use, not cleaning work)."""
    return time.perf_counter() - _kernels.kernel_loading_seconds()


def segment_chunks(segment: LogSegment) -> Iterator[dec.DecodedBatches]:
    """A (non-active) segment decoded a chunk of whole batches at a time
    (`decode.decode_chunks`). Bytes after its last complete batch raise CorruptRecordError:
    recovery would have truncated them, so they are corruption, never silently left out of a
    cleaned copy. A segment deleted or truncated meanwhile (retention, a follower's truncation)
    aborts the clean instead: LogCleaningAbortedError, not a report of damage."""
    truncations = segment.truncations
    try:
        yield from dec.decode_chunks(segment.log_path, segment_base=segment.base_offset, size=segment.size)
    except (FileNotFoundError, CorruptRecordError) as e:
        if isinstance(e, CorruptRecordError) and segment.truncations == truncations:
            raise
        raise LogCleaningAbortedError(
            f"segment {segment.log_path} was deleted or truncated while being cleaned") from e


class DecodeCache:
    """The decoded chunks of whole segments, kept from the offset-map pass for the cleaning
    pass within `limit` bytes of decoded arrays; other segments are decoded in each pass."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._chunks: dict[int, list[dec.DecodedBatches]] = {}

    def read(self, segment: LogSegment) -> Iterator[dec.DecodedBatches]:
        """The segment's chunks (decoded), kept if they all fit and all are read."""
        keep = self.used + segment.size <= self.limit  # the source bytes are in the arena
        kept: list[dec.DecodedBatches] = []
        kept_bytes = 0
        for d in segment_chunks(segment):
            if keep:
                kept.append(d)
                kept_bytes += d.nbytes
                if self.used + kept_bytes > self.limit:
                    keep, kept = False, []
            yield d
        if keep:
            self._chunks[segment.base_offset] = kept
            self.used += kept_bytes

    def take(self, segment: LogSegment) -> Iterator[dec.DecodedBatches]:
        """The segment's chunks, from the cache (which lets them go) or decoded again."""
        kept = self._chunks.pop(segment.base_offset, None)
        if kept is None:
            return segment_chunks(segment)
        self.used -= sum(d.nbytes for d in kept)
        return iter(kept)


def active_producers(segments: list[LogSegment]) -> dict[int, ProducerLastRecord]:
    """Each producer id's last data offset and epoch, from the batch headers of `segments`
    (read a chunk at a time)."""
    out: dict[int, ProducerLastRecord] = {}
    for d in (d for seg in segments for d in segment_chunks(seg)):
        raw = d.header[d.header["magic"] >= 2]
        pids = raw["producer_id"].astype(np.int64)
        for i in np.flatnonzero(pids >= 0):
            pid = int(pids[i])
            prev = out.get(pid)
            last_data = prev.last_data_offset if prev else None
            if not int(raw["attributes"][i]) & CONTROL_BIT:
                last_data = int(raw["base_offset"][i]) + int(raw["last_offset_delta"][i])
            out[pid] = ProducerLastRecord(last_data, int(raw["producer_epoch"][i]))
    return out


def aborted_txns(segments: list[LogSegment]) -> list[AbortedTxn]:
    """Every aborted transaction listed in the segments' `.txnindex` files, once each."""
    out: list[AbortedTxn] = []
    for seg in segments:
        if seg.txn_index.path.exists():
            out += seg.txn_index.all_aborted_txns()
    return list(dict.fromkeys(out))


def _remove_cleaned_files(directory: str | Path, base_offset: int) -> None:
    """Delete the `.cleaned` files of the segment at `base_offset`, by name: a directory scan
    per group costs a clean of a log with many segments time quadratic in their number."""
    for suffix in (LOG_SUFFIX, *INDEX_SUFFIXES):
        (Path(directory) / segment_file_name(base_offset, suffix, CLEANED_SUFFIX)).unlink(missing_ok=True)


class _ChunkParts:
    """What a decoded chunk writes, laid out for ReadBufferAppender: each kept batch's bytes lie
    in a buffer (the source arena for copies, the rebuilt ones' buffers, an emptied batch's
    header), and batches back to back in one buffer make one part."""

    def __init__(self, d: dec.DecodedBatches, action: np.ndarray, rebuilt: dec.RebuiltBatches | None,
                 max_timestamp: np.ndarray) -> None:
        kept = action != DROP
        buffers: list[np.ndarray | bytes] = [d.arena]
        where = np.zeros(len(action), np.int64)
        begin, end = d.position.copy(), d.position + d.size
        rewrite = np.flatnonzero(action == REWRITE)
        if rebuilt is not None and len(rewrite):
            where[rewrite] = rebuilt.buffer + len(buffers)
            begin[rewrite], end[rewrite] = rebuilt.start, rebuilt.end
            buffers += rebuilt.buffers
        for b in np.flatnonzero(action == EMPTY).tolist():
            raw = dec.empty_batch(d.header[b])
            where[b], begin[b], end[b] = len(buffers), 0, len(raw)
            buffers.append(raw)
        self._views = [memoryview(b) for b in buffers]
        # Runs: kept batches back to back in one buffer, each written as one part.
        ks = np.flatnonzero(kept)
        opens = np.ones(len(ks), np.bool_)
        opens[1:] = (where[ks[1:]] != where[ks[:-1]]) | (begin[ks[1:]] != end[ks[:-1]])
        first = ks[opens]
        last = ks[np.append(np.flatnonzero(opens)[1:] - 1, len(ks) - 1)] if len(ks) else ks
        self._run_buffer = where[first].tolist()
        self._run_start = begin[first].tolist()
        self._run_end = end[last].tolist()
        run_of = np.full(len(action), -1, np.int64)
        run_of[ks] = np.cumsum(opens) - 1
        self._run_of = run_of.tolist()
        self._batch_start, self._batch_end = begin.tolist(), end.tolist()
        self._kept_bytes = np.concatenate(([0], np.cumsum(np.where(kept, end - begin, 0)))).tolist()
        self.last_offset = d.batches.last_offset.tolist()
        # Per batch, the last kept batch up to it and the first from it (-1, len: none).
        index = np.arange(len(action))
        self.last_kept = np.maximum.accumulate(np.where(kept, index, -1)).tolist()
        self._next_kept = np.minimum.accumulate(np.where(kept, index, len(action))[::-1])[::-1].tolist()
        self.kept_timestamp = np.where(kept, max_timestamp, np.iinfo(np.int64).min)

    def parts(self, i: int, j: int) -> tuple[list[memoryview], int]:
        """The parts of the kept batches in [i, j) (at least one), and their bytes."""
        k0, k1 = self._next_kept[i], self.last_kept[j - 1]
        r0, r1 = self._run_of[k0], self._run_of[k1]
        parts = []
        for r in range(r0, r1 + 1):
            begin = self._batch_start[k0] if r == r0 else self._run_start[r]
            end = self._batch_end[k1] if r == r1 else self._run_end[r]
            parts.append(self._views[self._run_buffer[r]][begin:end])
        return parts, self._kept_bytes[k1 + 1] - self._kept_bytes[k0]


class ReadBufferAppender:
    """Appends one source segment's retained batches to a cleaned segment a read-buffer fill at
    a time, as Kafka's cleaner does (its indexes follow the appends): a fill holds the complete
    batches within `buffer_size` bytes from its first, and the buffer doubles for the rest of
    the segment while a batch does not fit it. Fed the segment's decoded chunks in order, so a
    fill may span two chunks; `finish` appends the last fill."""

    def __init__(self, cleaned: LogSegment, buffer_size: int) -> None:
        self.cleaned = cleaned
        self._cap = max(int(buffer_size), 1)
        self._fill_end = -1  # file position where the open fill's buffer ends; -1: none open
        self._fill_empty = True  # no batch (kept or not) read into the open fill yet
        self._parts: list[bytes | memoryview] = []
        self._last_offset = -1
        self._max_timestamp: int | None = None
        self._offset_of_max = -1

    def add(self, d: dec.DecodedBatches, action: np.ndarray, max_timestamp: np.ndarray,
            rebuilt: dec.RebuiltBatches | None = None) -> int:
        """Take the chunk's batches (`action` per batch, `max_timestamp` of what is written,
        `rebuilt` the REWRITE ones in order), appending every fill they complete; returns the
        bytes taken."""
        begin = d.position + d.file_position
        end = begin + d.size  # ascending: the batches are back to back
        chunk = _ChunkParts(d, action, rebuilt, max_timestamp)
        taken, i, n = 0, 0, len(begin)
        while i < n:
            if self._fill_end < 0:
                self._fill_end = int(begin[i]) + self._cap
            j = int(np.searchsorted(end, self._fill_end, side="right"))
            if j == i and self._fill_empty:  # one batch larger than the buffer: grow it
                self._cap *= 2
                self._fill_end = -1
                continue
            if j > i:
                taken += self._take(chunk, i, j)
                self._fill_empty = False
            if j < n:  # batch j does not fit: the fill is complete
                self._append()
            i = j
        return taken

    def _take(self, chunk: _ChunkParts, i: int, j: int) -> int:
        last = chunk.last_kept[j - 1]
        if last < i:
            return 0
        parts, nbytes = chunk.parts(i, j)
        self._parts += parts
        # The segment's time index takes the first batch with the largest timestamp.
        top = i + int(np.argmax(chunk.kept_timestamp[i:j]))
        if self._max_timestamp is None or chunk.kept_timestamp[top] > self._max_timestamp:
            self._max_timestamp = int(chunk.kept_timestamp[top])
            self._offset_of_max = chunk.last_offset[top]
        self._last_offset = chunk.last_offset[last]
        return nbytes

    def _append(self) -> None:
        if self._parts:
            self.cleaned.append(self._last_offset, self._max_timestamp, self._offset_of_max, self._parts)
            self.cleaned.write_behind()  # the disk writes while the next fill is prepared
        self._fill_end, self._fill_empty, self._parts, self._max_timestamp = -1, True, [], None

    def finish(self) -> None:
        """Append the open fill: the segment has no more batches."""
        self._append()


class Cleaner:
    """Cleans compacted logs. Holds the offset map (log.cleaner.dedupe.buffer.size split over
    log.cleaner.threads) and the I/O buffer size, both read from `config`'s broker keys."""

    def __init__(self, config: LogConfig | Mapping[str, Any] | None = None, *,
                 offset_map: OffsetMap | None = None) -> None:
        cfg = LogConfig.coerce(config)
        threads = max(int(cfg["log.cleaner.threads"]), 1)
        self.io_buffer_size = int(cfg["log.cleaner.io.buffer.size"]) // threads // 2
        self.offset_map = offset_map or OffsetMap(
            memory=min(int(cfg["log.cleaner.dedupe.buffer.size"]) // threads, INT32_MAX),
            load_factor=float(cfg["log.cleaner.io.buffer.load.factor"]))
        self._abort = threading.Event()

    def abort(self) -> None:
        """Ask a running clean to stop at its next segment; it raises LogCleaningAbortedError."""
        self._abort.set()

    def _check_abort(self) -> None:
        if self._abort.is_set():
            self._abort.clear()
            raise LogCleaningAbortedError("log cleaning aborted")

    # ------------------------------------------------------------------ selection

    @staticmethod
    def checkpoint_path(log: SegmentedLogLike) -> Path:
        """The data directory's `cleaner-offset-checkpoint`."""
        return Path(log.dir).parent / CLEANER_OFFSET_CHECKPOINT

    def read_checkpoint(self, log: SegmentedLogLike) -> int | None:
        """The log's cleaner checkpoint (first dirty offset), or None when never cleaned."""
        return read_offsets_checkpoint(self.checkpoint_path(log)).get((log.topic, log.partition))

    def write_checkpoint(self, log: SegmentedLogLike, offset: int) -> None:
        """Record `offset` as the log's first dirty offset (atomic rewrite of the file)."""
        path = self.checkpoint_path(log)
        offsets = read_offsets_checkpoint(path)
        offsets[(log.topic, log.partition)] = offset
        write_offsets_checkpoint(path, offsets)

    def cleanable_range(self, log: SegmentedLogLike, now_ms: int | None = None) -> CleanableRange:
        """The log's dirty range, dirty ratio and due reason now (Kafka's LogToClean)."""
        now = log.clock.time_ms() if now_ms is None else now_ms
        cfg = log.config
        return evaluate(_segment_infos(log.segments), log_start_offset=log.log_start_offset,
                        log_end_offset=log.log_end_offset, last_stable_offset=last_stable_offset(log),
                        checkpoint=self.read_checkpoint(log), now_ms=now,
                        min_compaction_lag_ms=cfg["min.compaction.lag.ms"],
                        max_compaction_lag_ms=cfg["max.compaction.lag.ms"],
                        min_cleanable_dirty_ratio=cfg["min.cleanable.dirty.ratio"])

    # ------------------------------------------------------------------ cleaning

    def clean(self, log: SegmentedLogLike, *, now_ms: int | None = None, dry_run: bool = False,
              distinct_keys: int | None = None) -> CleanResult:
        """Run one cleaning round on `log` (due or not) and return its statistics.

        Memory stays bounded whatever the segment size: segments are decoded a chunk at a
        time (decode.decode_chunks), for the offset map and again for the decisions, and the
        retained batches written as each chunk is decided. `dry_run` decides everything and
        counts what would be written, changing no file.
        `distinct_keys`, an upper bound on the distinct keys in the log (an audit counted
        them), lets the offset map work in a table of that size rather than one per record.
        Raises LogCleaningAbortedError when aborted (the checkpoint then stays where it was),
        UnknownTopicConfigError (unless `dry_run`) when the log's topic configs are unknown.
        """
        if log.config_origin is None and not dry_run:
            raise UnknownTopicConfigError(log.topic, "cleaning", log.dir)
        started = cleaning_clock()
        now = log.clock.time_ms() if now_ms is None else now_ms
        cfg = log.config
        rng = self.cleanable_range(log, now)
        result = CleanResult(log.topic, log.partition, first_dirty_offset=rng.first_dirty_offset,
                             first_uncleanable_offset=rng.first_uncleanable_offset,
                             dirty_ratio=rng.dirty_ratio, due_reason=rng.due_reason, dry_run=dry_run,
                             bytes_per_key=self.offset_map.bytes_per_key,
                             removed_by_reason={name: 0 for name in REASON_NAMES[1:]},
                             cleanable=rng)
        if rng.force_update_checkpoint and not dry_run:
            self.write_checkpoint(log, rng.first_dirty_offset)
        start, upper = rng.first_dirty_offset, rng.first_uncleanable_offset
        segments = list(log.segments)
        read_as = {id(s): s.truncations for s in segments}  # to tell a segment cut meanwhile
        if start >= upper:
            result.end_offset = start
            result.elapsed_s = cleaning_clock() - started
            return result

        # 1. The offset map over the dirty segments.
        omap = self.offset_map
        dirty = [s for i, s in enumerate(segments) if s.base_offset < upper
                 and (i + 1 == len(segments) or segments[i + 1].base_offset > start)]
        # A segment holds at most as many records as the offsets it spans (no header walk).
        ends = [s.base_offset for s in dirty[1:]] + [dirty[-1].next_offset]
        expected = sum(end - s.base_offset for s, end in zip(dirty, ends, strict=True))
        if distinct_keys is not None:
            expected = min(expected, max(int(distinct_keys), 0))
        omap.clear(base_offset=start, expected_keys=expected)
        tracker = TxnTracker(aborted_txns(dirty))
        full = False
        cache = DecodeCache(DECODE_CACHE_BYTES)
        for i, seg in enumerate(dirty):
            self._check_abort()
            for d in cache.read(seg):
                d.map_slot = np.full(len(d.records), -1, np.int64)  # spares the decisions' lookups
                full = map_batches(omap, d.records, d.batches, start, tracker, d.map_slot)
                if full:
                    break
            if full:
                break
            next_base = dirty[i + 1].base_offset if i + 1 < len(dirty) else upper
            omap.update_latest_offset(next_base - 1)
        end = omap.latest_offset + 1
        result.end_offset, result.map_full, result.map_keys = end, full, omap.size

        # 2. Group and clean every segment below the map's end.
        to_clean = [s for s in segments if s.base_offset < end]
        last_clean = [s for s in segments if s.base_offset < start]
        legacy_horizon = (last_clean[-1].last_modified_ms - cfg["delete.retention.ms"]) if last_clean else 0
        sizes = [(s.base_offset, s.size, s.offset_index.size_in_bytes, s.time_index.size_in_bytes)
                 for s in to_clean]
        groups = group_segments_by_size(sizes, cfg["segment.bytes"], cfg["segment.index.bytes"], upper)
        producers = producers_of(log, segments)
        tracker = TxnTracker(aborted_txns(to_clean))
        removed = np.zeros(len(REASON_NAMES), np.int64)
        for group in groups:
            self._check_abort()
            self._clean_group(log, [to_clean[i] for i in group], now, upper, producers, tracker,
                              legacy_horizon, result, removed, dry_run, cache, read_as)
        result.removed_by_reason = {name: int(removed[i]) for i, name in enumerate(REASON_NAMES) if i}
        if not dry_run:
            self.write_checkpoint(log, end)
        result.elapsed_s = cleaning_clock() - started
        return result

    def _clean_group(self, log: SegmentedLogLike, group: list[LogSegment], now: int, upper: int,
                     producers: Mapping[int, ProducerLastRecord], tracker: TxnTracker,
                     legacy_horizon: int, result: CleanResult, removed: np.ndarray, dry_run: bool,
                     cache: DecodeCache, read_as: Mapping[int, int]) -> None:
        cfg = log.config
        cleaned = None
        if not dry_run:
            _remove_cleaned_files(log.dir, group[0].base_offset)  # leftovers of an aborted clean
            cleaned = LogSegment.create(log.dir, group[0].base_offset,
                                        SegmentOptions.of(cfg, log.clock, file_suffix=CLEANED_SUFFIX))
        try:
            for seg in group:
                self._check_abort()
                # Decisions are per batch: a chunk at a time (Kafka's buffers restart per segment).
                appender = None if cleaned is None else ReadBufferAppender(cleaned, self.io_buffer_size)
                for d in cache.take(seg):
                    self._clean_chunk(d, appender, cfg, now, upper, producers, tracker,
                                      seg.last_modified_ms > legacy_horizon, result, removed)
                if appender is not None:
                    appender.finish()
            result.segments_cleaned += len(group)
            result.segments_written += 1
            if cleaned is None:
                return
            cleaned.on_become_inactive_segment()
            cleaned.flush()
            cleaned.set_last_modified_ms(group[-1].last_modified_ms)
            with log.locked():  # the check and the swap as one step to truncation and retention
                live = {id(s) for s in log.segments}
                if not all(id(s) in live and s.truncations == read_as[id(s)] for s in group):
                    raise LogCleaningAbortedError(
                        f"segments of {log.topic}-{log.partition} changed while being cleaned")
                log.replace_segments([cleaned], group)
        except BaseException:
            if cleaned is not None:
                cleaned.close()
                _remove_cleaned_files(log.dir, group[0].base_offset)
            raise

    def _clean_chunk(self, d: dec.DecodedBatches, appender: ReadBufferAppender | None, cfg: Any,
                     now: int, upper: int,
                     producers: Mapping[int, ProducerLastRecord], tracker: TxnTracker,
                     retain_legacy_deletes: bool, result: CleanResult, removed: np.ndarray) -> None:
        d.batches.legacy_retain_deletes[:] = retain_legacy_deletes
        plan = decide(d.records, d.batches, self.offset_map, now_ms=now,
                      delete_retention_ms=cfg["delete.retention.ms"], upper_bound_offset=upper,
                      active_producers=producers, tracker=tracker, map_slots=d.map_slot)
        if appender is not None:
            for txn in plan.retained_aborted_txns:
                appender.cleaned.txn_index.append(txn)
        result.bytes_read += int(d.size.sum())
        result.records_read += len(d.records)
        kept_rows = np.flatnonzero(plan.keep)
        result.records_written += len(kept_rows)
        result.records_removed += len(d.records) - len(kept_rows)
        result.tombstones_removed += int((~plan.keep & d.records.is_tombstone).sum())
        removed += np.bincount(plan.reason, minlength=len(REASON_NAMES))
        action = plan.batch_action
        rewrite = np.flatnonzero(action == REWRITE)
        if appender is None:  # a dry run only counts the bytes the appender would write
            sizes = np.where(action == COPY, d.size, np.where(action == EMPTY, V2_HEADER_SIZE, 0))
            sizes[rewrite] = dec.rebuilt_sizes(d, rewrite, plan.keep, plan.batch_delete_horizon[rewrite])
            result.bytes_written += int(sizes.sum())
            return
        rebuilt = dec.rebuild_layout(d, rewrite, plan.keep, plan.batch_delete_horizon[rewrite])
        max_ts = d.header["max_timestamp"].astype(np.int64)
        max_ts[rewrite] = rebuilt.max_timestamp
        result.bytes_written += appender.add(d, action, max_ts, rebuilt)

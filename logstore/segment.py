"""LogSegment: one `.log` file of record batches with its offset, time and transaction indexes.

The files themselves are SegmentFiles' (naming, renames, deletion) and the `.log`'s bytes
FileRecords'; this module holds what they mean. The rules follow Kafka's LogSegment: when index entries are added, how reads and timestamp
searches start from the sparse indexes and scan batch headers, how recovery validates and
truncates, and when a segment should roll. Not thread-safe: the owning Log serialises writers.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from index import NO_TIMESTAMP, TimestampOffset
from index.base import MAX_RELATIVE_OFFSET
from logstore import _segment_kernels as segment_kernels
from logstore._read_kernels import NO_MAX_OFFSET, whole_batches
from logstore.errors import (
    CorruptRecordError,
    IndexOffsetOverflowError,
    ReadOnlyLogError,
)
from logstore.file_records import (
    Buffer,
    LogOffsetPosition,
    TimestampAndOffset,
    nbytes_of,
)
from logstore.file_slice import FileSlice
from logstore.log_input_stream import HEADER_SCAN_CHUNK
from logstore.log_results import SegmentReadResult
from logstore.records import BatchHeader, RecordBatch, read_batch, read_batch_header
from logstore.records.header import V2_HEADER_SIZE
from logstore.segment_files import SegmentFiles
from logstore.segment_options import SegmentOptions

_NO_BYTES = np.empty(0, np.uint8)

DEFAULT_OPTIONS = SegmentOptions()
TAIL_WALK_BATCHES = 16  # a read this many first batches long finds its end from the offset index


class LogSegment(SegmentFiles):
    """A segment of a partition log: append, read, search, recover, truncate, roll and rename."""

    def __init__(self, directory: str | os.PathLike[str], base_offset: int,
                 options: SegmentOptions = DEFAULT_OPTIONS) -> None:
        """Describe the segment's files; nothing is opened until used (see `open`/`create`)."""
        super().__init__(directory, base_offset, options)
        self.index_interval_bytes = options.index_interval_bytes
        self.roll_jitter_ms = options.roll_jitter_ms
        self._clock = options.clock
        self._state.created_ms = self._clock.time_ms()
        # The batch after the last read's end, with the offset that read ends at (offsets from
        # there to the batch's last one start in it); forgotten whenever the file shrinks.
        self._following: tuple[int, LogOffsetPosition] | None = None
        #: How many times truncate_to has run: a reader outside the Log's lock (the cleaner)
        #: compares it to tell a segment cut and regrown since it read it.
        self.truncations = 0

    @property
    def index_interval_bytes(self) -> int:
        """Bytes appended between two index entries (index.interval.bytes)."""
        return self._state.index_interval_bytes

    @index_interval_bytes.setter
    def index_interval_bytes(self, interval: int) -> None:
        self._state.index_interval_bytes = interval

    @property
    def roll_jitter_ms(self) -> int:
        """What this segment's roll age is shortened by (its draw of segment.jitter.ms)."""
        return self._state.roll_jitter_ms

    @roll_jitter_ms.setter
    def roll_jitter_ms(self, jitter: int) -> None:
        self._state.roll_jitter_ms = jitter

    # ----------------------------------------------------------------- construction

    @classmethod
    def open(cls, directory: str | os.PathLike[str], base_offset: int,
             options: SegmentOptions = DEFAULT_OPTIONS) -> LogSegment:
        """Open an existing segment; indexes are mapped lazily on first use.

        Raises FileNotFoundError if the `.log` file is missing (a missing index is created
        empty on first use unless read-only; call `sanity_check()` to detect it).
        """
        segment = cls(directory, base_offset, options)
        if not segment.log_path.exists():
            raise FileNotFoundError(f"segment log file {segment.log_path} does not exist")
        return segment

    @classmethod
    def create(cls, directory: str | os.PathLike[str], base_offset: int,
               options: SegmentOptions = DEFAULT_OPTIONS) -> LogSegment:
        """Create a new empty active segment with preallocated indexes.

        Stale index files of the same name are replaced (they index nothing); raises
        FileExistsError if a non-empty `.log` of that name exists, ValueError for read-only options.
        """
        if options.read_only:
            raise ValueError(f"cannot create segment {base_offset} in {directory} with read-only options")
        segment = cls(directory, base_offset, options)
        if segment.size:
            raise FileExistsError(f"segment log file {segment.log_path} already holds data")
        for index in (segment._offset_index, segment._time_index):
            index.path.unlink(missing_ok=True)
            index.preallocate()
        segment.log_path.touch()
        return segment

    # ----------------------------------------------------------------- properties

    @property
    def created_ms(self) -> int:
        """Clock time when this object was created or last truncated to empty."""
        return self._state.created_ms

    def _read_max_timestamp_and_offset(self) -> TimestampOffset:
        # Loaded from the time index's last entry on first use, then kept up to date.
        if self._state.largest is None:
            self._state.largest = self._time_index.last_entry
        return self._state.largest

    @property
    def max_timestamp_so_far(self) -> int:
        """Largest batch max timestamp seen (may map the time index); -1 when none."""
        return self._read_max_timestamp_and_offset().timestamp

    @property
    def offset_of_max_timestamp(self) -> int:
        """Offset stored with `max_timestamp_so_far` (the last offset of its batch)."""
        return self._read_max_timestamp_and_offset().offset

    @property
    def largest_record_timestamp(self) -> int | None:
        """`max_timestamp_so_far` if any batch had a timestamp, else None."""
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else None

    @property
    def largest_timestamp(self) -> int:
        """Largest record timestamp, or the `.log` file's modification time (ms) when none."""
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else self.last_modified_ms

    @property
    def next_offset(self) -> int:
        """Offset after the last batch, or the base offset when empty (cached after first read)."""
        if self._state.next_offset is None:
            self._state.next_offset = self.read_next_offset()
        return self._state.next_offset

    def assume_next_offset(self, next_offset: int) -> None:
        """Take `next_offset` as the offset after the last batch without reading the segment
        (a clean shutdown's producer snapshot names the log end)."""
        self._state.next_offset = next_offset

    def read_next_offset(self) -> int:
        """Scan from the last offset-index entry to the last batch: its last offset + 1."""
        next_offset = self._base_offset
        if not self._state.size:
            return next_offset  # nothing to scan, no index to map
        start = self._offset_index.lookup(self._offset_index.last_offset).position
        for _, header in self.batch_headers(start):
            next_offset = header.next_offset
        return next_offset

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        """True if `offset` fits the indexes' 4-byte relative offsets."""
        return 0 <= offset - self._base_offset <= MAX_RELATIVE_OFFSET

    def has_overflow(self) -> bool:
        """True if the last batch's last offset does not fit a relative offset (legacy logs)."""
        next_offset = self.next_offset
        return next_offset > self._base_offset and not self.can_convert_to_relative_offset(
            next_offset - 1
        )

    # ----------------------------------------------------------------- scans

    def batch_headers(self, start: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of every complete batch from byte `start`, reading only headers.

        A read-only segment scanned from its start to its end also learns its next offset
        (it never changes), so a later `next_offset` needs no second scan.
        """
        header = None
        for position, header, _, _ in self._records.scan(start, full=False):
            yield position, header
        if start == 0 and self._read_only and self._state.next_offset is None:
            self._state.next_offset = self._base_offset if header is None else header.next_offset

    def hide_from(self, position: int, next_offset: int) -> None:
        """Show a read-only segment only up to byte `position` (what recovery would keep), in
        memory: reads, scans and `size` stop there and no file changes."""
        self._require_open()
        if not self._read_only:
            raise ReadOnlyLogError(f"hide_from is for read-only segments, not {self.log_path}")
        self._state.size = min(self._state.size, position)
        self._state.next_offset = next_offset
        self._following = None

    def iter_batches(self, start_position: int = 0) -> Iterator[RecordBatch]:
        """Every complete batch from `start_position`, each a RecordBatch over its own bytes."""
        return self._records.batches(start_position)

    # ----------------------------------------------------------------- append

    def append(
        self,
        largest_offset: int,
        largest_timestamp: int,
        offset_of_max_timestamp: int,
        records: Buffer | Sequence[Buffer],
    ) -> None:
        """Append batches whose offsets are already assigned, indexing as Kafka does.

        `records` is one buffer or a sequence of buffers written back to back (one pwritev,
        no joined copy). An offset-index entry (largest offset, start position of this call)
        and a time-index entry are added when the bytes appended before this call since the
        last entry exceed `index_interval_bytes`. Raises IndexOffsetOverflowError if
        `largest_offset` does not fit a relative offset.
        """
        args = (largest_offset, largest_timestamp, offset_of_max_timestamp)
        if isinstance(records, (list, tuple)):  # checked, written with pwritev, then committed
            parts = list(records)
            nbytes = sum(nbytes_of(part) for part in parts)
            self._compiled_append(_NO_BYTES, nbytes, args, segment_kernels.PREPARE)
            if nbytes:
                self._records.write(parts, nbytes, self._state.size)
                self._compiled_append(_NO_BYTES, nbytes, args, segment_kernels.COMMIT)
            return
        data = np.frombuffer(records, np.uint8)
        self._compiled_append(data, data.size, args, segment_kernels.WRITE)

    def compiled_append_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What the compiled appends take: the state array and both indexes' mapped bytes."""
        return self._state.array, self._offset_index._bytes, self._time_index._bytes

    def _compiled_append(self, data: np.ndarray, nbytes: int, args: tuple[int, int, int], mode: int) -> None:
        status, value = segment_kernels.append(*self.compiled_append_arrays(), data, nbytes, *args, mode)
        if status == segment_kernels.NOT_READY:
            self.prepare_append()
            status, value = segment_kernels.append(*self.compiled_append_arrays(), data, nbytes, *args, mode)
        if status != segment_kernels.OK:
            raise self.append_error(status, value, args[0])

    def prepare_append(self) -> None:
        """Open and load what the compiled append and roll rule read (the `.log` descriptor,
        both indexes, the largest and the first batch's timestamps). Raises LogClosedError or
        ReadOnlyLogError when the segment cannot be appended to."""
        self._require_writable("append to")
        self._records.fd()
        self._load_append_state()

    def _load_append_state(self) -> None:
        self._offset_index.max_entries  # noqa: B018 -- loads the mapping
        self._time_index.max_entries  # noqa: B018 -- loads the mapping
        self._read_max_timestamp_and_offset()
        self._load_first_batch_timestamp()
        if self._state.rolling_timestamp is None and self._state.size:
            self._state.rolling_timestamp = NO_TIMESTAMP  # no batch to date the roll age by

    def append_error(self, status: int, value: int, largest_offset: int) -> Exception:
        """The error for a compiled append of batches up to `largest_offset` that returned
        (status, value) (logstore._segment_kernels)."""
        if status == segment_kernels.OFFSET_OVERFLOW:
            return IndexOffsetOverflowError(f"offset {largest_offset} does not fit relative to base offset "
                                            f"{self._base_offset} of segment {self.log_path}")
        if status == segment_kernels.WRITE_ERROR:
            return OSError(value, os.strerror(value), str(self.log_path))
        if status == segment_kernels.OFFSET_INDEX_ERROR:
            return self._offset_index.append_error(value, largest_offset, self._state.size)
        if status == segment_kernels.TIME_INDEX_ERROR:
            return self._time_index.append_error(value, self.max_timestamp_so_far, self.offset_of_max_timestamp)
        return RuntimeError(f"segment {self.log_path} is not ready for a compiled append")

    def append_batches(self, records: bytes | bytearray | memoryview) -> None:
        """Append one or more complete batches, taking offsets and timestamps from their headers.

        The time-index candidate is the first batch with the largest max timestamp, stored with
        that batch's last offset (as Kafka's follower and cleaner appends do).
        """
        data = memoryview(records).cast("B")
        position, largest_offset = 0, -1
        max_timestamp, offset_of_max = NO_TIMESTAMP, -1
        while position < data.nbytes:
            header = read_batch_header(data, position)
            if position + header.size_in_bytes > data.nbytes:
                raise CorruptRecordError(
                    "batch runs past the end of the appended bytes", position=position
                )
            if header.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = header.max_timestamp, header.last_offset
            largest_offset = header.last_offset
            position += header.size_in_bytes
        self.append(largest_offset, max_timestamp, offset_of_max, data)

    # ----------------------------------------------------------------- read and search

    def translate_offset(self, offset: int, starting_position: int = 0) -> LogOffsetPosition | None:
        """The first batch whose last offset is >= `offset`, or None past the end.

        Starts at the offset index's entry for `offset` and scans batch headers only.
        """
        start = max(self._offset_index.lookup(offset).position, starting_position)
        return self._records.find_batch(offset, start)

    def _first_batch(self, start_offset: int, max_size: int,
                     min_one_message: bool) -> tuple[LogOffsetPosition, int] | None:
        """The batch holding `start_offset` (None past the end) and the bytes a read from it may
        take: `max_size`, or the whole batch with `min_one_message`. ValueError if `max_size` < 0."""
        if max_size < 0:
            raise ValueError(f"invalid max size {max_size} for a read from {self.log_path}")
        following = self._following
        if following is not None and following[0] <= start_offset <= following[1].offset:
            mapping = following[1]  # where the last read stopped: no index lookup or header scan
        else:
            mapping = self.translate_offset(start_offset)
            if mapping is None:
                return None
        return mapping, max(max_size, mapping.size) if min_one_message else max_size

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        min_one_message: bool = True,
        *,
        max_offset: int | None = None,
    ) -> SegmentReadResult | None:
        """Read whole batches from the one holding `start_offset`, at most `max_size` bytes, not
        past `max_position` (default: the end) and only batches whose last offsets are below
        `max_offset`; None if `start_offset` is past the end.

        With `min_one_message` the first batch is returned whole even if larger than `max_size`.
        The read takes the next batch's header along, so a read that starts where it stopped
        (a sequential reader) needs no index lookup or header scan; a read of many batches walks
        only the headers after the offset index's entry before its end. It stops before a batch
        with an impossible header it walks; a read from that batch raises CorruptRecordError.
        """
        first = self._first_batch(start_offset, max_size, min_one_message)
        if first is None:
            return None
        mapping, adjusted = first
        if adjusted == 0:
            return SegmentReadResult(b"", start_offset, mapping.position, False, start_offset)
        if max_offset is not None:  # the pread stops at the batch holding it, not at max_size
            bounding = self.translate_offset(max_offset, mapping.position)
            if bounding is not None:
                max_position = bounding.position if max_position is None else min(max_position, bounding.position)
        fetch_size = min(self._bound(mapping, adjusted, max_position) - mapping.position, adjusted)
        data = self.read_bytes(mapping.position, fetch_size + V2_HEADER_SIZE)
        limit, start = min(fetch_size, len(data)), 0
        if limit > TAIL_WALK_BATCHES * mapping.size:  # many batches: walk from the index entry before the end
            start = max(self._offset_index.lookup_before_position(mapping.position + limit).position - mapping.position, 0)
        end, next_offset, _ = self._walk(data, mapping.position, start, limit, max_offset)
        if next_offset < 0 < start:  # no whole batch after that entry (a damaged header): walk them all
            end, next_offset, _ = self._walk(data, mapping.position, 0, limit, max_offset)
        return SegmentReadResult(
            data if end == len(data) else memoryview(data)[:end],
            start_offset,
            mapping.position,
            adjusted < mapping.size,
            next_offset if next_offset >= 0 else start_offset,
        )

    def slice(self, start_offset: int, max_size: int, max_position: int | None = None, min_one_message: bool = True,
              *, max_offset: int | None = None) -> tuple[FileSlice, int] | None:
        """The batches `read` would return, as a FileSlice of the `.log` file instead of bytes,
        with the offset after them: only batch headers are read, in chunks, by the same walk
        (the caller closes the slice). None if `start_offset` is past the end."""
        first = self._first_batch(start_offset, max_size, min_one_message)
        if first is None:
            return None
        mapping, adjusted = first
        bound = self._bound(mapping, adjusted, max_position)
        entry = self._offset_index.lookup_before_position(bound)  # a whole batch, usually, from it to `bound`
        if max_offset is not None and entry.offset >= max_offset:
            entry = self._offset_index.lookup(max_offset)  # the batches before it end below max_offset
        start = max(mapping.position, entry.position)
        position, next_offset = self._walk_file(start, bound, max_offset)
        if next_offset < 0 < start - mapping.position:  # none whole after that entry (damage, or max_offset): walk all
            position, next_offset = self._walk_file(mapping.position, bound, max_offset)
        return (self.file_slice(mapping.position, position - mapping.position),
                next_offset if next_offset >= 0 else start_offset)

    def _walk_file(self, position: int, bound: int, max_offset: int | None) -> tuple[int, int]:
        """(end, offset after them or -1) of the whole batches from byte `position` of the `.log`
        that end by `bound`, their headers read in chunks."""
        next_offset = -1
        while True:
            requested = min(HEADER_SCAN_CHUNK, bound - position + V2_HEADER_SIZE)
            chunk = self.read_bytes(position, requested)
            end, walked_to, size = self._walk(chunk, position, 0, bound - position, max_offset)
            position += end
            next_offset = max(next_offset, walked_to)
            if size > 0 or end == 0 or len(chunk) < requested:  # found where they end, or the file's end
                return position, next_offset

    def _bound(self, mapping: LogOffsetPosition, adjusted: int, max_position: int | None) -> int:
        """The byte a read from `mapping` allowed `adjusted` bytes may not pass."""
        return min(self._state.size if max_position is None else max_position, mapping.position + adjusted)

    def _walk(self, data: bytes, position: int, start: int, limit: int, max_offset: int | None) -> tuple[int, int, int]:
        """(end, offset after them or -1, size of the following batch or -1) of the whole
        batches of `data` (read from byte `position`) from byte `start` that end by `limit` with
        last offsets below `max_offset` (the compiled walk both read and slice take); remembers
        the following batch for a sequential reader."""
        end, next_offset, last, size = whole_batches(data, start, limit,
                                                     NO_MAX_OFFSET if max_offset is None else max_offset)
        if next_offset >= 0 and size > 0:
            self._following = (next_offset, LogOffsetPosition(last, position + end, size))
        return end, next_offset, size

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int | None = None
    ) -> TimestampAndOffset | None:
        """The first record with timestamp >= `timestamp` and offset >= `starting_offset`.

        Starts from the time index, then the offset index, scans headers and decodes only
        the batch whose max timestamp reaches the target. None if no record qualifies.
        """
        if starting_offset is None:
            starting_offset = self._base_offset
        indexed = self._time_index.lookup(timestamp)
        position = self._offset_index.lookup(max(indexed.offset, starting_offset)).position
        return self._records.search_for_timestamp(timestamp, position, starting_offset)

    def largest_timestamp_after(self, position: int) -> TimestampOffset:
        """Largest batch max timestamp from `position` on, with its batch's last offset."""
        return self._records.largest_timestamp_after(position)

    # ----------------------------------------------------------------- recovery and truncation

    def recover(self, max_message_size: int | None = None, *,
                on_batch: Callable[[RecordBatch], None] | None = None) -> int:
        """Validate every batch (sizes, magic, CRC, header sanity, offsets increasing: a batch
        going back may hold its CRC, but no index or fetch finds it), rebuild both indexes,
        truncate the log at the first invalid or torn batch, and return the bytes dropped.

        `on_batch` sees each valid batch in order (producer state, epoch cache); a
        CorruptRecordError it raises makes that batch the first invalid one. The transaction
        index is truncated to the recovered end. Raises IndexOffsetOverflowError for a batch
        whose offset does not fit the indexes.
        """
        self._require_writable("recover")
        self._offset_index.reset()
        self._time_index.reset()
        self._state.largest = TimestampOffset(NO_TIMESTAMP, self._base_offset)
        valid_bytes = 0
        last_index_entry = 0
        next_offset = self._base_offset
        try:
            for position, header, buf, off in self._records.scan(0, full=True, max_entry_size=max_message_size):
                batch = read_batch(buf, off)
                batch.validate()
                if batch.last_offset < batch.base_offset or (valid_bytes and batch.base_offset < next_offset):
                    raise CorruptRecordError(
                        f"offsets {batch.base_offset}..{batch.last_offset} do not increase past {next_offset}",
                        position=position, path=str(self.log_path))
                if not self.can_convert_to_relative_offset(header.last_offset):
                    raise IndexOffsetOverflowError(
                        f"offset {header.last_offset} at position {position} does not fit "
                        f"relative to base offset {self._base_offset} of {self.log_path}"
                    )
                if on_batch is not None:
                    # Before the batch counts as valid: records it cannot decode (a control
                    # batch's marker) make it the first invalid batch, as in Kafka.
                    on_batch(batch)
                if header.max_timestamp > self.max_timestamp_so_far:
                    self._state.largest = TimestampOffset(
                        header.max_timestamp, header.last_offset
                    )
                if valid_bytes - last_index_entry > self.index_interval_bytes:
                    self._offset_index.append(header.last_offset, valid_bytes)
                    self._time_index.maybe_append(
                        self.max_timestamp_so_far, self.offset_of_max_timestamp
                    )
                    last_index_entry = valid_bytes
                valid_bytes += header.size_in_bytes
                next_offset = header.next_offset
        except CorruptRecordError:
            pass  # everything from valid_bytes on is dropped below
        truncated = self._state.size - valid_bytes
        self._records.truncate_to(valid_bytes)
        self._following = None
        self._txn_index.truncate_to(next_offset)
        self._offset_index.trim_to_valid_size()
        # A cleanly closed segment always ends with its largest timestamp; recovery does too.
        self._time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp, True)
        self._time_index.trim_to_valid_size()
        self._state.bytes_since_index = valid_bytes - last_index_entry
        self._state.next_offset = next_offset
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove the batch holding `offset` and everything after it; return the bytes removed.

        Regrows the indexes to `max_index_size` (the segment becomes active again).
        """
        self._require_writable("truncate")
        self.truncations += 1
        mapping = self.translate_offset(offset)
        self._offset_index.truncate_to(offset)
        self._time_index.truncate_to(offset)
        self._txn_index.truncate_to(offset)
        self._offset_index.resize(self.max_index_size)
        self._time_index.resize(self.max_index_size)
        truncated = 0 if mapping is None else self._records.truncate_to(mapping.position)
        self._following = None
        if self._state.size == 0:
            self._state.created_ms = self._clock.time_ms()
            self._state.rolling_timestamp = None
        self._state.bytes_since_index = 0
        if self.max_timestamp_so_far >= 0:
            self._state.largest = self._read_largest_timestamp()
        self._state.next_offset = None
        return truncated

    def _read_largest_timestamp(self) -> TimestampOffset:
        last = self._time_index.last_entry
        position = self._offset_index.lookup(last.offset).position
        after = self.largest_timestamp_after(position)
        return after if after.timestamp > last.timestamp else last

    # ----------------------------------------------------------------- roll decisions

    def _load_first_batch_timestamp(self) -> None:
        if self._state.rolling_timestamp is None:
            for _, header in self.batch_headers(0):
                self._state.rolling_timestamp = header.max_timestamp
                break

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Time since the first batch's timestamp (or, without one, since creation)."""
        ts = self._state.rolling_timestamp
        if ts is None:
            self._load_first_batch_timestamp()
            ts = self._state.rolling_timestamp
        if ts is not None and ts >= 0:
            return message_timestamp - ts
        return now_ms - self._state.created_ms

    @property
    def first_batch_timestamp(self) -> int | None:
        """Max timestamp of the first batch, or None when empty or without timestamps."""
        self._load_first_batch_timestamp()
        ts = self._state.rolling_timestamp
        return ts if ts is not None and ts >= 0 else None

    def should_roll(
        self,
        max_segment_bytes: int,
        max_segment_ms: int,
        messages_size: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        now_ms: int,
    ) -> bool:
        """Kafka's roll rule for an append of `messages_size` bytes: the segment would pass
        `segment.bytes`, is non-empty and older than `segment.ms` minus this segment's jitter,
        has a full index, or cannot hold `max_offset_in_messages` as a relative offset."""
        args = (max_segment_bytes, max_segment_ms, messages_size, max_timestamp_in_messages,
                max_offset_in_messages, now_ms)
        verdict = segment_kernels.should_roll(self._state.array, *args)
        if verdict == segment_kernels.NOT_READY:
            self._load_append_state()
            verdict = segment_kernels.should_roll(self._state.array, *args)
        return verdict == segment_kernels.ROLL

    def on_become_inactive_segment(self) -> None:
        """On roll: add the final time-index entry if needed and trim both indexes."""
        self._time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp, True)
        self._offset_index.trim_to_valid_size()
        self._time_index.trim_to_valid_size()

    # ----------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Add the final time-index entry if needed, trim and unmap the indexes, close the log."""
        if self._closed:
            return
        if self._state.largest is not None and not self._read_only:
            self._time_index.maybe_append(
                self._state.largest.timestamp,
                self._state.largest.offset,
                True,
            )
        self._close_files(trim=True)

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self._base_offset}, size={self._state.size}, path={str(self.log_path)!r})"


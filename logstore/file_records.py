"""FileRecords: a segment's `.log` file of record batches (Kafka's FileRecords).

Owns the descriptor (opened on first use, counted in the segment's account of
logstore.descriptor_pool, given back and reopened as the pool asks), positional reads and scans of batch headers,
pwritev of appended buffers, write-behind hints, truncation, fsync, rename and delete. Size
and descriptor live in the segment's SegmentState, where the compiled append reads and moves
them; the indexes and the offsets they map are LogSegment's.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple, TypeAlias

from index import NO_TIMESTAMP, TimestampOffset
from index.base import OUT_OF_DESCRIPTORS, UNCOUNTED, DescriptorAccount, fsync_path
from logstore import _read_kernels
from logstore.errors import CorruptRecordError, LogClosedError, descriptor_limit_error
from logstore.log_input_stream import HEADER_SCAN_CHUNK, scan_entries
from logstore.records import BatchHeader, RecordBatch, read_batch
from logstore.segment_state import SegmentState

# What a segment appends: anything exposing a contiguous byte buffer.
Buffer: TypeAlias = bytes | bytearray | memoryview

# Buffers per pwritev call (the kernel's UIO_MAXIOV on Linux).
IOV_MAX = os.sysconf("SC_IOV_MAX")

# sync_file_range(2) flag: start writeback of the range's dirty pages, do not wait.
SYNC_FILE_RANGE_WRITE = 2
# write_behind() waits for this many new bytes: fewer, larger writeback submissions.
WRITE_BEHIND_MIN_BYTES = 4 * 1024 * 1024


def _load_sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """libc's sync_file_range (Linux only; None elsewhere)."""
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    return function


_SYNC_FILE_RANGE = _load_sync_file_range()


class LogOffsetPosition(NamedTuple):
    """The batch found for an offset: its last offset, file position and size in bytes."""

    offset: int
    position: int
    size: int


class TimestampAndOffset(NamedTuple):
    """A record found by timestamp: its timestamp, offset and its batch's leader epoch."""

    timestamp: int
    offset: int
    leader_epoch: int | None


class FileRecords:
    """The `.log` file of one segment: read, scan, write, truncate, flush, rename, delete."""

    def __init__(self, path: Path, state: SegmentState, *, read_only: bool,
                 account: DescriptorAccount = UNCOUNTED) -> None:
        """Describe the file at `path`, whose size `state` already holds (the segment stats it);
        nothing is opened. `account` counts the descriptor while it is open."""
        self.path = path
        self._state = state
        self._read_only = read_only
        self._account = account
        self.closed = False
        self._needs_sync = False  # written through a descriptor since given back: flush() fsyncs
        self._written_behind = 0  # bytes write_behind() has already sent to the disk

    def require_open(self) -> None:
        """Raise LogClosedError once closed."""
        if self.closed:
            raise LogClosedError(f"segment {self.path} is closed")

    def fd(self) -> int:
        """The descriptor, opened on first use (read-only or read-write as the segment is);
        DescriptorLimitError when none is left."""
        self.require_open()
        self._account.touch()  # first: from here on no other thread takes it back
        fd = self._state.fd
        if fd is None:
            self._account.acquire()
            try:
                fd = os.open(self.path, os.O_RDONLY if self._read_only else os.O_RDWR | os.O_CREAT, 0o644)
            except BaseException as exc:
                self._account.release()
                if isinstance(exc, OSError) and exc.errno in OUT_OF_DESCRIPTORS:
                    raise descriptor_limit_error(f"cannot open segment {self.path}") from exc
                raise
            self._state.fd = fd
        return fd

    def release(self) -> None:
        """Close the descriptor for now (the next use opens it again); what was written stays
        in the page cache and the next `flush()` syncs it."""
        fd = self._state.fd
        if fd is None:
            return
        self._state.fd = None
        os.close(fd)
        self._account.release()
        self._needs_sync = self._needs_sync or not self._read_only

    @property
    def last_modified_ms(self) -> int:
        """Modification time of the file in ms."""
        return self.path.stat().st_mtime_ns // 1_000_000

    # ----------------------------------------------------------------- read and search

    def read(self, position: int, size: int) -> bytes:
        """Up to `size` bytes from `position` (fewer at the end of the file)."""
        size = min(size, self._state.size - position)
        if size <= 0:
            return b""
        if self._account.touch():  # no other thread gives the descriptor back meanwhile
            fd = self._state.fd
            return os.pread(self.fd() if fd is None else fd, size, position)
        with self._account.pinned():  # used without its Log's lock: keep the descriptor for the read
            return os.pread(self.fd(), size, position)

    def scan(
        self, start: int, *, full: bool, max_entry_size: int | None = None
    ) -> Iterator[tuple[int, BatchHeader, bytes, int]]:
        """Every entry from byte `start` (see log_input_stream.scan_entries)."""
        return scan_entries(self.read, self._state.size, start, full=full, max_entry_size=max_entry_size,
                            path=str(self.path))

    def find_batch(self, target: int, start: int) -> LogOffsetPosition | None:
        """The first batch from byte `start` whose last offset is >= `target`, None past the end
        (Kafka's searchForOffsetWithSize): a compiled walk over headers read in chunks."""
        end = self._state.size
        position = start
        while True:
            chunk = self.read(position, HEADER_SCAN_CHUNK)
            status, at, last, size = _read_kernels.find_batch(chunk, end - position, target)
            position += at
            if status == _read_kernels.FOUND:
                return LogOffsetPosition(last, position, size)
            if status == _read_kernels.PAST_END:
                return None
            if status == _read_kernels.CORRUPT:
                for _ in self.scan(position, full=False):  # raises the scan's error naming the problem
                    break
                raise CorruptRecordError("impossible entry header", position=position, path=str(self.path))

    def batches(self, start: int = 0) -> Iterator[RecordBatch]:
        """Every complete batch from byte `start`, each a RecordBatch over its own bytes."""
        for _, _, buf, off in self.scan(start, full=True):
            yield read_batch(buf, off)

    def search_for_timestamp(self, timestamp: int, start: int, starting_offset: int) -> TimestampAndOffset | None:
        """The first record from byte `start` with timestamp >= `timestamp` and offset >=
        `starting_offset`; decodes only batches whose max timestamp reaches the target."""
        for _, header, buf, off in self.scan(start, full=True):
            if header.max_timestamp < timestamp:
                continue
            for record in read_batch(buf, off).records():
                if record.timestamp >= timestamp and record.offset >= starting_offset:
                    epoch = header.partition_leader_epoch
                    return TimestampAndOffset(record.timestamp, record.offset, epoch if epoch >= 0 else None)
        return None

    def largest_timestamp_after(self, start: int) -> TimestampOffset:
        """Largest batch max timestamp from byte `start` on, with its batch's last offset."""
        best = TimestampOffset(NO_TIMESTAMP, -1)
        for _, header, _, _ in self.scan(start, full=False):
            if header.max_timestamp > best.timestamp:
                best = TimestampOffset(header.max_timestamp, header.last_offset)
        return best

    # ----------------------------------------------------------------- write

    def write(self, parts: list[Buffer], nbytes: int, position: int) -> None:
        """pwritev `parts` (`nbytes` in all) at `position`, resuming after short writes; on an
        error the state's size covers what was written (on success the caller moves it)."""
        fd = self.fd()
        first, done = 0, 0
        try:
            while first < len(parts):
                written = os.pwritev(fd, parts[first : first + IOV_MAX], position + done)
                done += written
                if done == nbytes:
                    return
                while first < len(parts) and written >= nbytes_of(parts[first]):
                    written -= nbytes_of(parts[first])
                    first += 1
                if written:
                    parts[first] = memoryview(parts[first]).cast("B")[written:]
        except BaseException:
            self._state.size = position + done
            raise

    def write_behind(self) -> None:
        """Start writing the bytes appended since the last call to disk, without waiting, once
        there are WRITE_BEHIND_MIN_BYTES of them (Linux sync_file_range; a no-op elsewhere).
        Not a durability point (`flush()` is): the device works while the caller prepares
        the next bytes."""
        start, size, fd = self._written_behind, self._state.size, self._state.fd
        if _SYNC_FILE_RANGE is None or fd is None or size - start < WRITE_BEHIND_MIN_BYTES:
            return
        # Only a hint: a write error surfaces at flush()'s fsync.
        _SYNC_FILE_RANGE(fd, start, size - start, SYNC_FILE_RANGE_WRITE)
        self._written_behind = size

    def truncate_to(self, size: int) -> int:
        """Cut the file to `size` bytes (never grows it); return the bytes removed."""
        removed = self._state.size - size
        if removed > 0:
            os.ftruncate(self.fd(), size)
            self._state.size = size
            self._written_behind = min(self._written_behind, size)
        return max(removed, 0)

    # ----------------------------------------------------------------- lifecycle

    def flush(self) -> None:
        """fsync the file if it was opened for writing (through a short-lived descriptor when
        the segment's was given back meanwhile)."""
        if self._read_only:
            return
        fd = self._state.fd
        if fd is not None:
            os.fsync(fd)
        elif self._needs_sync and not self.closed:
            fsync_path(self.path)
        self._needs_sync = False

    def close(self) -> None:
        """Close the descriptor; the segment takes no more appends or reads."""
        fd = self._state.fd
        self.closed = True
        self._state.writable = False
        if fd is not None:
            self._state.fd = None
            self._account.close(fd)  # after the last pin, should a send from it be under way

    def rename_to(self, path: Path) -> None:
        """Rename the file (open or closed) to `path`."""
        os.replace(self.path, path)
        self.path = path


def nbytes_of(buffer: Buffer) -> int:
    """Bytes in `buffer`."""
    if isinstance(buffer, memoryview):
        return buffer.nbytes
    return len(buffer) if isinstance(buffer, (bytes, bytearray)) else memoryview(buffer).nbytes

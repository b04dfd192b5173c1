"""SegmentFiles: the four files of one segment (`.log`, `.index`, `.timeindex`, `.txnindex`),
handled as a set: named by base offset and suffix, opened read-only or writable, flushed,
renamed by suffix, followed to a renamed directory, checked, deleted. Their descriptors (the
`.log`'s and the mapped indexes') are counted in one account of the process's descriptor pool
(logstore.descriptor_pool), which takes them back when unused and lets a caller pin them.

LogSegment builds on it with what the files hold: offsets, appends, reads, recovery, rolls.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np

from index import OffsetIndex, TimeIndex
from logstore.descriptor_pool import SegmentDescriptors, process_pool
from logstore.errors import CorruptIndexError, LogClosedError, ReadOnlyLogError
from logstore.file_records import FileRecords
from logstore.file_slice import FileSlice
from logstore.log_files import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    segment_file_name,
)
from logstore.segment_options import SegmentOptions
from logstore.segment_state import SegmentState
from logstore.txn_index import TransactionIndex

_BASE_OFFSET = struct.Struct(">q")  # a batch's first field

T = TypeVar("T")
IndexT = TypeVar("IndexT", OffsetIndex, TimeIndex)

# Held while one of a segment's file objects is built, so two threads (a fetch under the Log's
# lock, the cleaner outside it) never build two objects for one file.
_BUILDING = threading.Lock()


class _BuiltOnFirstUse(Generic[T]):
    """A segment attribute (the `.log`'s FileRecords, an index) built by `build` on first read
    and kept in the instance, which then answers later reads without this descriptor: a log of
    thousands of segments opens without an object per file, and the hot paths pay nothing."""

    def __init__(self, build: Callable[[Any], T]) -> None:
        self._build = build
        self._name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def __get__(self, segment: Any, owner: type | None = None) -> T:
        with _BUILDING:
            built = segment.__dict__.get(self._name)
            if built is None:
                built = segment.__dict__[self._name] = self._build(segment)
        return built


class SegmentFiles:
    """The `.log`, `.index`, `.timeindex` and `.txnindex` files of the segment at `base_offset`."""

    def __init__(self, directory: str | os.PathLike[str], base_offset: int, options: SegmentOptions) -> None:
        """Describe the files (with `options.file_suffix`) and stat the `.log`; nothing is opened,
        and the objects for the files are built on first use (see _BuiltOnFirstUse)."""
        self._dir = directory if isinstance(directory, Path) else Path(directory)
        self._base_offset = base_offset
        self._file_suffix = options.file_suffix
        read_only = options.read_only
        self._state = SegmentState(base_offset, writable=not read_only)
        self.max_index_size = options.max_index_size
        self._read_only = read_only
        self._closed = False
        #: This segment's account of open descriptors in the process's pool.
        self.descriptors: SegmentDescriptors = process_pool().account(self, self._state.array)
        try:
            self._state.size = os.stat(os.path.join(self._dir, self._file_name(LOG_SUFFIX))).st_size
        except FileNotFoundError:
            self._state.size = 0

    def _file_name(self, suffix: str) -> str:
        return segment_file_name(self._base_offset, suffix, self._file_suffix)

    def _new_records(self) -> FileRecords:
        records = FileRecords(self._dir / self._file_name(LOG_SUFFIX), self._state, read_only=self._read_only,
                              account=self.descriptors)
        if self._closed:
            records.close()
        return records

    def _new_index(self, kind: type[IndexT], suffix: str, meta: np.ndarray) -> IndexT:
        index = kind(self._dir / self._file_name(suffix), self._base_offset, self.max_index_size,
                     writable=not self._read_only, meta=meta, account=self.descriptors)
        if self._closed:
            index.close_handler()
        return index

    def _new_offset_index(self) -> OffsetIndex:
        return self._new_index(OffsetIndex, INDEX_SUFFIX, self._state.offset_index_counters)

    def _new_time_index(self) -> TimeIndex:
        return self._new_index(TimeIndex, TIME_INDEX_SUFFIX, self._state.time_index_counters)

    def _new_txn_index(self) -> TransactionIndex:
        return TransactionIndex(self._base_offset, self._dir / self._file_name(TXN_INDEX_SUFFIX))

    _records = _BuiltOnFirstUse(_new_records)
    _offset_index = _BuiltOnFirstUse(_new_offset_index)
    _time_index = _BuiltOnFirstUse(_new_time_index)
    _txn_index = _BuiltOnFirstUse(_new_txn_index)

    def _built(self) -> tuple[FileRecords | None, OffsetIndex | None, TimeIndex | None, TransactionIndex | None]:
        """The file objects built so far (None for the others): what close and flush must reach."""
        built = self.__dict__
        return built.get("_records"), built.get("_offset_index"), built.get("_time_index"), built.get("_txn_index")

    @property
    def base_offset(self) -> int:
        """Lower bound of the offsets in this segment; also its file name."""
        return self._base_offset

    @property
    def size(self) -> int:
        """Bytes in the `.log` file."""
        return self._state.size

    @property
    def log_path(self) -> Path:
        """The `.log` file (with its current suffix)."""
        return self._records.path

    @property
    def records(self) -> FileRecords:
        """The `.log` file's reads, writes and scans."""
        return self._records

    @property
    def offset_index(self) -> OffsetIndex:
        """The `.index` file."""
        return self._offset_index

    @property
    def index(self) -> OffsetIndex:
        """Alias of `offset_index`."""
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        """The `.timeindex` file."""
        return self._time_index

    @property
    def txn_index(self) -> TransactionIndex:
        """The `.txnindex` file of aborted transactions (written by the producer-state code)."""
        return self._txn_index

    @property
    def read_only(self) -> bool:
        """True when opened read-only: no file is ever changed."""
        return self._read_only

    @property
    def last_modified_ms(self) -> int:
        """Modification time of the `.log` file in ms."""
        return self._records.last_modified_ms

    def set_last_modified_ms(self, ms: int) -> None:
        """Set the modification time of the `.log`, `.index` and `.timeindex` files."""
        self._require_writable("set the modification time of")
        ns = ms * 1_000_000
        for path in (self.log_path, self._offset_index.path, self._time_index.path):
            if path.exists():
                os.utime(path, ns=(ns, ns))

    @property
    def guard(self) -> threading.RLock | None:
        """The lock this segment is used under (its Log's), which the descriptor pool must
        take to close its descriptors from another thread; None: used by one thread."""
        return self.descriptors.guard

    @guard.setter
    def guard(self, guard: threading.RLock | None) -> None:
        self.descriptors.adopt(guard)

    def release_descriptors(self) -> None:
        """Close the `.log` descriptor and unmap the indexes for now, keeping every count and
        write (the next use opens and maps them again); a mapping still being read stays."""
        records, offset_index, time_index, _ = self._built()
        if records is not None:
            records.release()
        for index in (offset_index, time_index):
            if index is not None:
                index.unload()

    @contextmanager
    def pinned(self) -> Iterator[int]:
        """The `.log` descriptor (opened if needed), kept open until the `with` ends: for a
        send or read outside the segment's Log lock (see logstore.descriptor_pool)."""
        with self.descriptors.pool.pinned(self.descriptors):
            yield self._records.fd()

    def file_slice(self, position: int, size: int) -> FileSlice:
        """`size` bytes of the `.log` from `position`, its descriptor pinned in the pool until the
        slice is closed (so a send outside the Log's lock keeps it); call under that lock."""
        pin = ExitStack()
        return FileSlice(pin.enter_context(self.pinned()), position, size, pin.close)

    def has_suffix(self, suffix: str) -> bool:
        """True if the log and both index files all end with `suffix`."""
        return all(
            p.name.endswith(suffix)
            for p in (self.log_path, self._offset_index.path, self._time_index.path)
        )

    def _require_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"segment {self.log_path} is closed")

    def _require_writable(self, action: str) -> None:
        self._require_open()
        self._require_not_read_only(action)

    def _require_not_read_only(self, action: str) -> None:
        if self._read_only:
            raise ReadOnlyLogError(f"cannot {action} read-only segment {self.log_path}")

    def read_bytes(self, position: int, size: int) -> bytes:
        """Up to `size` bytes of the `.log` from `position` (fewer at the end of the file)."""
        return self._records.read(position, size)

    def base_offset_at(self, position: int) -> int:
        """The base offset of the batch that starts at byte `position` of the `.log`."""
        return _BASE_OFFSET.unpack(self.read_bytes(position, _BASE_OFFSET.size))[0]

    def write_behind(self) -> None:
        """Hint the disk to start writing what was appended (see FileRecords.write_behind)."""
        self._records.write_behind()

    def resize_indexes(self, size: int) -> None:
        """Resize both index files (to `max_index_size` when the segment becomes active)."""
        self._offset_index.resize(size)
        self._time_index.resize(size)

    def sanity_check(self) -> None:
        """Raise CorruptIndexError if the offset index file is missing or an index is corrupt."""
        if not self._offset_index.path.exists():
            raise CorruptIndexError(f"offset index file {self._offset_index.path} does not exist")
        if not self._time_index.path.exists():
            raise CorruptIndexError(f"time index file {self._time_index.path} does not exist")
        self._offset_index.sanity_check()
        self._time_index.sanity_check()
        self._txn_index.sanity_check()

    def flush(self) -> None:
        """fsync the `.log` and the indexes."""
        self._require_open()
        records, offset_index, time_index, txn_index = self._built()  # no other was written
        for written in (records, offset_index, time_index):
            if written is not None:
                written.flush()
        if txn_index is not None and not self._read_only:
            txn_index.flush()

    def close_handlers(self) -> None:
        """Release file handles and mappings without writing anything."""
        self._close_files(trim=False)

    def _close_files(self, *, trim: bool) -> None:
        """Close the file objects built so far (trimming the indexes to their entries with
        `trim`); the segment takes no more appends or reads, and objects built later are closed."""
        records, offset_index, time_index, txn_index = self._built()
        self._closed = True
        self._state.writable = False
        for index in (offset_index, time_index):
            if index is not None:
                if trim:
                    index.close()
                else:
                    index.close_handler()
        if txn_index is not None:
            txn_index.close()
        if records is not None:
            records.close()

    def delete(self) -> None:
        """Close (if still open) and delete the `.log`, `.index`, `.timeindex` and `.txnindex`
        files that exist."""
        self._require_not_read_only("delete")
        self.close_handlers()
        self._offset_index.delete()
        self._time_index.delete()
        self._txn_index.delete()
        self.log_path.unlink(missing_ok=True)

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename every file of the segment from `old_suffix` to `new_suffix` (e.g. '' to
        '.deleted', '.cleaned' to '.swap', '.swap' to ''); works on open or closed segments."""
        self._require_not_read_only("rename")
        self._records.rename_to(_replace_suffix(self.log_path, old_suffix, new_suffix))
        self._offset_index.rename_to(
            _replace_suffix(self._offset_index.path, old_suffix, new_suffix)
        )
        self._time_index.rename_to(_replace_suffix(self._time_index.path, old_suffix, new_suffix))
        self._txn_index.rename_to(_replace_suffix(self._txn_index.path, old_suffix, new_suffix))

    def update_parent_dir(self, directory: str | os.PathLike[str]) -> None:
        """Follow the files after their directory was renamed."""
        self._dir = Path(directory)  # objects not built yet are built there
        records, offset_index, time_index, txn_index = self._built()
        if records is not None:
            records.path = self._dir / records.path.name
        for index in (offset_index, time_index):
            if index is not None:
                index.update_parent_dir(self._dir)
        if txn_index is not None:
            txn_index.path = self._dir / txn_index.path.name


def _replace_suffix(path: Path, old_suffix: str, new_suffix: str) -> Path:
    name = path.name
    if not name.endswith(old_suffix):
        raise ValueError(f"{path} does not end with {old_suffix!r}")
    return path.with_name(name[: len(name) - len(old_suffix)] + new_suffix)

"""What the offset and time indexes share: a lazily mapped file of fixed-size big-endian entries.

Layouts are in docs/FORMAT.md ("Segment files"). Rules follow Kafka's AbstractIndex:
- a new writable index file is preallocated to `max_index_size` rounded down to the entry size;
- an existing file, opened writable, holds `file size // entry size` entries, whatever the
  bytes are (an active index that was never trimmed reads as full; its zero-filled slots fail
  `sanity_check()` and the segment is recovered);
- opened read-only, it holds the strictly ascending prefix of its entries, which drops the
  zero-filled slots of an untrimmed active index without writing a byte (like Kafka's
  DumpLogSegments);
- nothing is opened or mapped until first use, so opening thousands of segments is cheap;
- a mapping holds a file descriptor (Python < 3.13's mmap keeps a duplicate), counted in the
  `DescriptorAccount` the index is given; `unload()` gives it back and keeps the entry count, so
  the next use maps the file again (logstore.descriptor_pool decides when);
- the free slots of a writable mapping are advised MADV_RANDOM: they are a hole in the file, and
  the first write there would otherwise fault in the kernel's whole read-around window
  (read_ahead_kb, up to megabytes of zero-filled page cache) for one 8- or 12-byte entry.
"""

from __future__ import annotations

import errno
import mmap
import os
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import ClassVar, Protocol

import numpy as np

from index._kernels import (
    ENTRIES,
    LOADED,
    MAX_ENTRIES,
    MAX_RELATIVE_OFFSET,
    META_SIZE,
    WRITABLE,
    largest_lower_bound,
)
from index.errors import (
    CorruptIndexError,
    IndexOffsetOverflowError,
    InvalidConfigError,
    LogClosedError,
    ReadOnlyLogError,
    descriptor_limit_error,
)

# open()/mmap() errors that mean "no descriptor left" (per process, per system).
OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)


class DescriptorAccount(Protocol):
    """Where an index counts the descriptor its mapping holds (logstore.descriptor_pool's
    SegmentDescriptors): `acquire` before mapping (may raise DescriptorLimitError), `release`
    after unmapping, `touch` on each use (the pool gives back what is least recently used)."""

    def acquire(self) -> None: ...

    def release(self) -> None: ...

    def touch(self) -> bool: ...

    def pinned(self) -> AbstractContextManager[object]: ...

    def close(self, fd: int) -> None:
        """Close the counted descriptor `fd` (later, while it is pinned) and `release` it."""
        ...


class _Uncounted:
    """The account of an index used on its own: nothing is counted."""

    def acquire(self) -> None:
        """Nothing to count."""

    def release(self) -> None:
        """Nothing to count."""

    def touch(self) -> bool:
        """Nothing to count: no other thread takes anything back."""
        return True

    def pinned(self) -> AbstractContextManager[object]:
        """Nothing to pin."""
        return nullcontext()

    def close(self, fd: int) -> None:
        """Close `fd` now: nothing pins it."""
        os.close(fd)


UNCOUNTED = _Uncounted()
_NOTHING_TO_HOLD = nullcontext()


def fsync_path(path: Path) -> None:
    """fsync the file at `path` through a short-lived descriptor (a file written through a
    mapping or descriptor since given back); no-op when the file is gone."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    except OSError as exc:
        if exc.errno in OUT_OF_DESCRIPTORS:
            raise descriptor_limit_error(f"cannot fsync {path}") from exc
        raise
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def round_down(number: int, factor: int) -> int:
    """The largest multiple of `factor` that is <= `number` (Kafka's roundDownToExactMultiple)."""
    return factor * (number // factor)


class AbstractIndex:
    """A sparse index of one segment: ascending fixed-size entries in a memory-mapped file.

    Subclasses declare the entry layout (`ENTRY_DTYPE`, whose first field is the search key)
    and the meaning of entries; this class owns the file, the mapping and the binary search.
    Not thread-safe: the owning log serialises writers.
    """

    ENTRY_DTYPE: ClassVar[np.dtype]
    ENTRY_SIZE: ClassVar[int]
    KIND: ClassVar[str]

    def __init__(
        self,
        path: str | os.PathLike[str],
        base_offset: int,
        max_index_size: int = -1,
        *,
        writable: bool = True,
        meta: np.ndarray | None = None,
        account: DescriptorAccount = UNCOUNTED,
    ) -> None:
        """Describe the index at `path`; the file is opened (and created if missing) on first use.

        `meta` is where the entry counters are kept (index._kernels' META_SIZE int64 slots): a
        view into the owning segment's state lets its compiled append update them; default, an
        array of its own. `account` counts the descriptor the mapping holds.
        """
        self._meta = np.zeros(META_SIZE, np.int64) if meta is None else meta
        self._meta[:] = 0
        self._meta[WRITABLE] = writable
        self._path = path if isinstance(path, Path) else Path(path)  # parsing a long path costs
        self._base_offset = base_offset
        self._max_index_size = max_index_size
        self._writable = writable
        self._loaded = False
        self._closed = False
        self._account = account
        self._unloaded = False  # given back by unload(): the entry count in `_meta` still holds
        self._needs_sync = False  # written through a mapping since unloaded: flush() fsyncs the file
        self._mmap: mmap.mmap | None = None
        self._bytes = np.empty(0, dtype=np.uint8)
        self._view = np.empty(0, dtype=self.ENTRY_DTYPE)
        self._length = 0
        self._size_on_load: int | None = None  # a resize asked for before the first mapping

    # ----------------------------------------------------------------- counters (in `_meta`)

    @property
    def _entries(self) -> int:
        return int(self._meta[ENTRIES])

    @_entries.setter
    def _entries(self, entries: int) -> None:
        self._meta[ENTRIES] = entries

    @property
    def _max_entries(self) -> int:
        return int(self._meta[MAX_ENTRIES])

    @_max_entries.setter
    def _max_entries(self, entries: int) -> None:
        self._meta[MAX_ENTRIES] = entries

    # ----------------------------------------------------------------- properties (no I/O)

    @property
    def path(self) -> Path:
        """The index file."""
        return self._path

    @property
    def base_offset(self) -> int:
        """Base offset of the segment this index belongs to."""
        return self._base_offset

    @property
    def max_index_size(self) -> int:
        """Size in bytes the file is preallocated to while its segment is active."""
        return self._max_index_size

    @property
    def writable(self) -> bool:
        """False when opened read-only: the file is then never changed."""
        return self._writable

    @property
    def is_loaded(self) -> bool:
        """True once the file has been opened and mapped."""
        return self._loaded

    # ----------------------------------------------------------------- sizes (load on use)

    @property
    def entry_count(self) -> int:
        """Number of valid entries."""
        if not self._loaded or self._closed:
            self._ensure_loaded()
        self._account.touch()
        return self._entries

    def __len__(self) -> int:
        return self.entry_count

    @property
    def max_entries(self) -> int:
        """Number of entry slots the file currently has room for."""
        if not self._loaded or self._closed:
            self._ensure_loaded()
        return self._max_entries

    @property
    def length(self) -> int:
        """Current size of the file in bytes (preallocated or trimmed)."""
        self._ensure_loaded()
        return self._length

    @property
    def size_in_bytes(self) -> int:
        """Bytes used by the valid entries."""
        return self.entry_count * self.ENTRY_SIZE

    @property
    def is_full(self) -> bool:
        """True when no slot is left for another entry."""
        if not self._loaded or self._closed:
            self._ensure_loaded()
        return self._entries >= self._max_entries

    # ----------------------------------------------------------------- relative offsets

    def can_append_offset(self, offset: int) -> bool:
        """True if `offset` fits as a 4-byte offset relative to the base offset."""
        return 0 <= offset - self._base_offset <= MAX_RELATIVE_OFFSET

    def relative_offset(self, offset: int) -> int:
        """`offset - base_offset`; raises IndexOffsetOverflowError if it does not fit an int32."""
        if not self.can_append_offset(offset):
            raise IndexOffsetOverflowError(
                f"offset {offset} does not fit relative to base offset {self._base_offset} ({self._path})"
            )
        return offset - self._base_offset

    # ----------------------------------------------------------------- file lifecycle

    def _ensure_loaded(self) -> None:
        if self._closed:
            raise LogClosedError(f"{self.KIND} {self._path} is closed")
        if not self._loaded:
            self._load()

    def _create_file(self) -> None:
        """Create the file, preallocated to `max_index_size` (FileExistsError if it exists)."""
        if self._max_index_size < self.ENTRY_SIZE:
            raise InvalidConfigError(
                f"segment.index.bytes {self._max_index_size} is smaller than one "
                f"{self.ENTRY_SIZE}-byte entry of new {self.KIND} {self._path}"
            )
        with open(self._path, "xb") as f:
            f.truncate(round_down(self._max_index_size, self.ENTRY_SIZE))

    def preallocate(self) -> None:
        """Create the file of a new active segment, preallocated and empty, without mapping it
        (the first use does): a new segment holds no descriptor until appended to or read."""
        self._require_writable("create")
        self._create_file()
        self._entries = 0
        self._unloaded = True

    def _load(self) -> None:
        newly_created = False
        if self._writable and not self._path.exists():
            self._create_file()
            newly_created = True
        self._map(self._path.stat().st_size if self._path.exists() else 0)
        if newly_created:
            self._entries = 0
        elif self._unloaded:
            self._entries = min(self._entries, self._max_entries)
        elif self._writable:
            self._entries = self._max_entries
        else:
            self._entries = self._ascending_prefix()
        self._advise_free_slots()
        self._loaded = True
        self._unloaded = False
        self._meta[LOADED] = 1
        if self._size_on_load is not None:
            size, self._size_on_load = self._size_on_load, None
            self.resize(size)

    def _map(self, length: int) -> None:
        """Map the first `length` bytes of the file (nothing when 0) and build the numpy views."""
        self._length = length
        self._max_entries = length // self.ENTRY_SIZE
        if length == 0:
            self._mmap = None
        else:
            self._account.acquire()  # may give back another segment's descriptors first
            try:
                with open(self._path, "r+b" if self._writable else "rb") as f:
                    access = mmap.ACCESS_WRITE if self._writable else mmap.ACCESS_READ
                    self._mmap = mmap.mmap(f.fileno(), length, access=access)
            except BaseException as exc:
                self._account.release()
                if isinstance(exc, OSError) and exc.errno in OUT_OF_DESCRIPTORS:
                    raise descriptor_limit_error(f"cannot map {self.KIND} {self._path}") from exc
                raise
        self._set_views()

    def _set_views(self) -> None:
        """The numpy views of the mapping (empty without one)."""
        self._bytes = np.empty(0, dtype=np.uint8) if self._mmap is None else np.frombuffer(self._mmap, np.uint8)
        usable = self._max_entries * self.ENTRY_SIZE
        self._view = self._bytes[:usable].view(self.ENTRY_DTYPE)

    def _advise_free_slots(self) -> None:
        """Fault the free slots in page by page: appends touch them one entry at a time."""
        if self._mmap is None or not self._writable:
            return
        start = round_down(self._entries * self.ENTRY_SIZE, mmap.PAGESIZE)
        if start < self._length:
            self._mmap.madvise(mmap.MADV_RANDOM, start, self._length - start)

    def _unmap(self) -> None:
        # numpy views export the mmap's buffer; drop them before closing it. No slots are left
        # for a compiled append until the file is mapped again.
        self._max_entries = 0
        self._view = np.empty(0, dtype=self.ENTRY_DTYPE)
        self._bytes = np.empty(0, dtype=np.uint8)
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None
            self._account.release()

    def unload(self) -> bool:
        """Give the mapping and its descriptor back, keeping the entry count: the next use maps
        the file again and a later `flush()` still syncs what was written. False, changing
        nothing, while a view of the mapping is in use."""
        if not self._loaded or self._closed:
            return True
        mapping, self._mmap = self._mmap, None
        self._view = np.empty(0, dtype=self.ENTRY_DTYPE)
        self._bytes = np.empty(0, dtype=np.uint8)
        if mapping is not None:
            try:
                mapping.close()
            except BufferError:  # someone still reads it
                self._mmap = mapping
                self._set_views()
                return False
            self._account.release()
        self._max_entries = 0
        self._loaded = False
        self._unloaded = True
        self._meta[LOADED] = 0
        self._needs_sync = self._needs_sync or self._writable
        return True

    def _ascending_prefix(self) -> int:
        keys = self._view[self.ENTRY_DTYPE.names[0]].astype(np.int64)
        if len(keys) < 2:
            return len(keys)
        not_ascending = np.flatnonzero(np.diff(keys) <= 0)
        return int(not_ascending[0]) + 1 if len(not_ascending) else len(keys)

    def resize(self, new_size: int) -> bool:
        """Set the file size to `new_size` rounded down to the entry size; False if unchanged.

        Entries beyond the new size are dropped. Used to trim on roll and close and to regrow
        to `max_index_size` when a segment becomes active again. An unloaded index stays unmapped.
        """
        rounded = round_down(new_size, self.ENTRY_SIZE)
        if self._unloaded and not self._closed:
            return self._resize_unmapped(rounded)
        self._ensure_loaded()
        if rounded == self._length:
            return False
        self._require_writable("resize")
        self._unmap()
        os.truncate(self._path, rounded)
        self._map(rounded)
        self._entries = min(self._entries, self._max_entries)
        self._advise_free_slots()
        return True

    def _resize_unmapped(self, rounded: int) -> bool:
        """`resize` of an index whose entry count is known but whose file is not mapped."""
        if rounded == self._path.stat().st_size:
            return False
        self._require_writable("resize")
        os.truncate(self._path, rounded)
        self._entries = min(self._entries, rounded // self.ENTRY_SIZE)
        return True

    def resize_on_load(self, new_size: int) -> None:
        """`resize(new_size)` now if its entry count is known, else at the first mapping: a
        reopened active segment's indexes regrow without being read by the open (Kafka's LazyIndex)."""
        if (self._loaded or self._unloaded) and not self._closed:
            self.resize(new_size)
        else:
            self._size_on_load = new_size

    def trim_to_valid_size(self) -> None:
        """Shrink the file to exactly its valid entries (no-op when never loaded or read-only);
        an unloaded index is trimmed without mapping it again."""
        if not self._writable or self._closed:
            return
        if self._loaded or self._unloaded:
            self.resize(self.ENTRY_SIZE * self._entries)

    def reset(self) -> None:
        """Remove every entry and regrow the file to `max_index_size`."""
        self.truncate()
        self.resize(self._max_index_size)

    def truncate(self) -> None:
        """Remove every entry (the file keeps its size)."""
        self._truncate_to_entries(0)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with an offset >= `offset` (no effect past the last entry)."""
        slot = self._largest_lower_bound_slot(offset - self.base_offset, "relative_offset")
        if slot < 0:
            keep = 0
        elif self.entry(slot).offset == offset:
            keep = slot
        else:
            keep = slot + 1
        self._truncate_to_entries(keep)

    def _truncate_to_entries(self, entries: int) -> None:
        self._ensure_loaded()
        self._require_writable("truncate")
        self._entries = entries

    def flush(self) -> None:
        """msync the mapped entries to disk (no-op when never loaded); fsync the file when they
        were written through a mapping since given back."""
        if self._loaded and self._mmap is not None and self._writable:
            self._mmap.flush()
        elif self._needs_sync and not self._closed:
            fsync_path(self._path)
        self._needs_sync = False

    def close(self) -> None:
        """Trim to the valid entries and unmap; a never-loaded index is left untouched."""
        if self._closed:
            return
        self.trim_to_valid_size()
        self.close_handler()

    def close_handler(self) -> None:
        """Unmap without writing anything (used when the disk may have failed)."""
        self._unmap()
        self._closed = True
        self._meta[LOADED] = 0

    def delete(self) -> bool:
        """Unmap and delete the file; True if a file was deleted."""
        self.close_handler()
        try:
            self._path.unlink()
        except FileNotFoundError:
            return False
        return True

    def rename_to(self, new_path: str | os.PathLike[str]) -> None:
        """Rename the backing file (the mapping stays valid); the new name is kept even on error."""
        new_path = Path(new_path)
        try:
            if self._path.exists():
                os.replace(self._path, new_path)
        finally:
            self._path = new_path

    def update_parent_dir(self, parent: str | os.PathLike[str]) -> None:
        """Point at the same file name in another directory (after a directory rename)."""
        self._path = Path(parent) / self._path.name

    def _require_writable(self, action: str) -> None:
        if not self._writable:
            raise ReadOnlyLogError(f"cannot {action} read-only {self.KIND} {self._path}")

    # ----------------------------------------------------------------- entries and search

    def _largest_lower_bound_slot(self, target: int, field: str) -> int:
        """Slot of the last entry whose `field` is <= target (fields hold relative values)."""
        if not self._loaded or self._closed:
            self._ensure_loaded()
        self._account.touch()
        if not self._entries:
            return -1
        dtype, pos = self.ENTRY_DTYPE.fields[field][:2]
        return largest_lower_bound(
            self._bytes, self.ENTRY_SIZE, pos, dtype.itemsize, self._entries, target
        )

    def _held(self) -> AbstractContextManager[object]:
        """Keep the mapping for a read by this thread: pinned in the pool when the segment is used
        without its Log's lock (another thread could unmap it mid-read), else nothing to do."""
        return _NOTHING_TO_HOLD if self._account.touch() else self._account.pinned()

    def _raw_entries(self) -> np.ndarray:
        """Valid entries as stored (relative, big-endian), a view: copy before keeping."""
        with self._held():  # the view, once taken, keeps the mapping itself
            self._ensure_loaded()
            return self._view[: self._entries]

    def _check_length(self) -> None:
        if self._length % self.ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"{self.KIND} {self._path} is corrupt, found {self._length} bytes "
                f"which is not a multiple of {self.ENTRY_SIZE}"
            )

    def _check_ascending(self, field: str, what: str) -> None:
        values = self._raw_entries()[field].astype(np.int64)
        bad = np.flatnonzero(np.diff(values) <= 0)
        if len(bad):
            slot = int(bad[0]) + 1
            raise CorruptIndexError(
                f"corrupt {self.KIND} {self._path}: {what} at slot {slot} ({int(values[slot])}) "
                f"is not greater than at slot {slot - 1} ({int(values[slot - 1])})"
            )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self._path)!r}, base_offset={self._base_offset})"

"""The per-segment transaction index (`.txnindex`): one 34-byte entry per aborted transaction
whose ABORT marker lies in the segment, in Kafka's layout (docs/FORMAT.md "Segment files").

The file is created on the first append only, is never preallocated, and is read whole with a
numpy structured view, so the fetch path (`collect_aborted_txns`) is vectorised.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple, Protocol

import numpy as np

from logstore.errors import CorruptIndexError, CorruptTxnIndexError
from logstore.log_files import TXN_INDEX_SUFFIX, segment_file_name

ABORTED_TXN_VERSION = 0
# docs/FORMAT.md: int16 version, int64 producerId, int64 firstOffset, int64 lastOffset,
# int64 lastStableOffset; big-endian, packed.
ENTRY_DTYPE = np.dtype(
    [
        ("version", ">i2"),
        ("producer_id", ">i8"),
        ("first_offset", ">i8"),
        ("last_offset", ">i8"),
        ("last_stable_offset", ">i8"),
    ]
)
ENTRY_SIZE = ENTRY_DTYPE.itemsize  # 34


def parse_aborted_txns(data: bytes | memoryview, path: Path | str | None = None) -> np.ndarray:
    """The whole 34-byte entries of `.txnindex` bytes as an ENTRY_DTYPE array (a torn trailing
    partial entry is ignored, as Kafka does). Raises CorruptTxnIndexError naming `path` and the
    entry's byte position when an entry's version is newer than ABORTED_TXN_VERSION."""
    entries = np.frombuffer(data, dtype=ENTRY_DTYPE, count=len(data) // ENTRY_SIZE)
    bad = np.flatnonzero(entries["version"] > ABORTED_TXN_VERSION)
    if len(bad):
        raise CorruptTxnIndexError(
            f"Unexpected aborted transaction version {int(entries['version'][bad[0]])} in "
            f"transaction index {path}, current version is {ABORTED_TXN_VERSION}",
            position=int(bad[0]) * ENTRY_SIZE,
        )
    return entries


class AbortedTxn(NamedTuple):
    """An aborted transaction: its producer, first and last (marker) offsets, and the LSO
    at the time the marker was written."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def to_bytes(self) -> bytes:
        """The 34-byte `.txnindex` entry (version 0)."""
        row = np.array(
            [(ABORTED_TXN_VERSION, *self)],
            dtype=ENTRY_DTYPE,
        )
        return row.tobytes()


class TxnIndexSearchResult(NamedTuple):
    """Aborted transactions overlapping a fetch range; `is_complete` means later segments
    cannot hold more (an entry's LSO reached the range's upper bound)."""

    aborted: list[AbortedTxn]
    is_complete: bool


class TransactionIndex:
    """The `.txnindex` of the segment starting at `start_offset`, stored at `path`; the file is
    read on use, so a corrupt one is reported by `sanity_check` or a read, not on construction."""

    def __init__(self, start_offset: int, path: Path | str):
        self.start_offset = start_offset
        self.path = path if isinstance(path, Path) else Path(path)
        self._last_offset: int | None = None
        self._last_offset_known = False
        self._memory: bytearray | None = None  # entries held here instead of in the file
        # The entries as last read: every change goes through this object, which drops them, so
        # a read_committed fetch does not reread (or fail to open) the file of every segment.
        self._entries: np.ndarray | None = None

    @classmethod
    def for_segment(cls, log_dir: Path | str, base_offset: int) -> TransactionIndex:
        """The index named after a segment's base offset (`<20 digits>.txnindex`)."""
        return cls(base_offset, Path(log_dir) / segment_file_name(base_offset, TXN_INDEX_SUFFIX))

    @property
    def in_memory(self) -> bool:
        """True once `keep_in_memory` was called: the file is no longer read or written."""
        return self._memory is not None

    def keep_in_memory(self) -> None:
        """Hold the entries in memory from now on, starting empty, and never touch the file
        again (a read-only log rebuilding a missing or corrupt index without writing)."""
        self._memory = bytearray()
        self._entries = None
        self._last_offset, self._last_offset_known = None, True

    def _read(self) -> np.ndarray:
        """All complete entries (a torn trailing partial entry is ignored, as Kafka does); a
        read-only view, kept until the next change."""
        if self._entries is None:
            self._entries = self._load()
            self._entries.flags.writeable = False
        return self._entries

    def _load(self) -> np.ndarray:
        if self._memory is not None:
            return parse_aborted_txns(bytes(self._memory), self.path)
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return np.empty(0, dtype=ENTRY_DTYPE)
        return parse_aborted_txns(data, self.path)

    def _known_last_offset(self) -> int | None:
        if not self._last_offset_known:
            entries = self._read()
            self._last_offset = int(entries["last_offset"][-1]) if len(entries) else None
            self._last_offset_known = True
        return self._last_offset

    @staticmethod
    def _to_txns(entries: np.ndarray) -> list[AbortedTxn]:
        cols = [entries[name].tolist() for name in AbortedTxn._fields]
        return [AbortedTxn(*row) for row in zip(*cols, strict=True)]

    def append(self, txn: AbortedTxn) -> None:
        """Append an entry; raises ValueError unless its last offset exceeds the previous one."""
        last = self._known_last_offset()
        if last is not None and last >= txn.last_offset:
            raise ValueError(
                f"{self.path}: last offset of appended transactions must increase, but "
                f"{txn.last_offset} is not greater than {last}"
            )
        self._entries = None
        if self._memory is not None:
            self._memory += txn.to_bytes()
        else:
            with open(self.path, "ab") as f:
                f.write(txn.to_bytes())
        self._last_offset = txn.last_offset

    def has_entries(self) -> bool:
        """True when the index holds at least one aborted transaction."""
        entries = self._entries
        return len(self._read() if entries is None else entries) > 0

    def all_aborted_txns(self) -> list[AbortedTxn]:
        """Every entry, in file order."""
        return self._to_txns(self._read())

    def __len__(self) -> int:
        return len(self._read())

    def collect_aborted_txns(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> TxnIndexSearchResult:
        """Aborted transactions overlapping [fetch_offset, upper_bound_offset).

        Scans in file order and stops after the first entry whose LSO is at or past the upper
        bound; that also marks the search complete (no later segment can contribute).
        """
        entries = self._read()
        stop = np.flatnonzero(entries["last_stable_offset"] >= upper_bound_offset)
        complete = bool(len(stop))
        if complete:
            entries = entries[: stop[0] + 1]
        hit = (entries["last_offset"] >= fetch_offset) & (
            entries["first_offset"] < upper_bound_offset
        )
        return TxnIndexSearchResult(self._to_txns(entries[hit]), complete)

    def truncate_to(self, offset: int) -> None:
        """Drop the first entry whose last offset is >= `offset` and everything after it."""
        if self._memory is None and not self.path.exists():
            return
        entries = self._read()
        cut = np.flatnonzero(entries["last_offset"] >= offset)
        if not len(cut):
            return
        keep = int(cut[0])
        self._entries = None
        if self._memory is not None:
            del self._memory[keep * ENTRY_SIZE :]
        else:
            os.truncate(self.path, keep * ENTRY_SIZE)
        self._last_offset = int(entries["last_offset"][keep - 1]) if keep else None
        self._last_offset_known = True

    def reset(self) -> None:
        """Remove every entry (the file stays, empty, if it exists)."""
        self._entries = None
        if self._memory is not None:
            self._memory.clear()
        elif self.path.exists():
            os.truncate(self.path, 0)
        self._last_offset, self._last_offset_known = None, True

    def sanity_check(self) -> None:
        """Raise CorruptIndexError if an entry ends before this segment starts."""
        entries = self._read()
        bad = np.flatnonzero(entries["last_offset"] < self.start_offset)
        if len(bad):
            txn = self._to_txns(entries[bad[:1]])[0]
            raise CorruptIndexError(
                f"{self.path}: last offset of aborted transaction {txn} is less than the "
                f"segment start offset {self.start_offset}"
            )

    def is_sound(self) -> bool:
        """True when the file exists, parses and passes `sanity_check` (False if it is missing
        or corrupt: the segment's recovery, or a read-only rebuild in memory, must refill it)."""
        if not self.path.exists():
            return False
        try:
            self.sanity_check()
        except CorruptIndexError:
            return False
        return True

    def flush(self) -> None:
        """fsync the file, if it exists (nothing to do for entries held in memory)."""
        if self._memory is None and self.path.exists():
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def close(self) -> None:
        """Nothing stays open between calls; present for the segment's file lifecycle."""

    def rename_to(self, new_path: Path | str) -> None:
        """Rename the file (if it exists) and follow it; used for `.deleted`/`.cleaned`/`.swap`."""
        new_path = Path(new_path)
        try:
            if self.path.exists():
                os.replace(self.path, new_path)
        finally:
            self.path = new_path

    def delete(self) -> bool:
        """Delete the file; True if it existed."""
        self._entries = None
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True


class SegmentWithTxnIndex(Protocol):
    """What collect_aborted_txns needs of a segment (LogSegment has it)."""

    base_offset: int
    txn_index: TransactionIndex


def collect_aborted_txns(
    segments: Sequence[SegmentWithTxnIndex], fetch_offset: int, upper_bound_offset: int
) -> list[AbortedTxn]:
    """Aborted transactions overlapping [fetch_offset, upper_bound_offset), searching the
    segment holding `fetch_offset` and the later ones until an index says the search is complete."""
    found: list[AbortedTxn] = []
    start = max(bisect.bisect_right(segments, fetch_offset, key=_base_offset) - 1, 0)
    # A transaction's ABORT marker (hence its entry) may lie segments after the fetch range;
    # most segments have none and are passed over.
    for segment in segments[start:]:
        index = segment.txn_index
        if not index.has_entries():
            continue
        result = index.collect_aborted_txns(fetch_offset, upper_bound_offset)
        found.extend(result.aborted)
        if result.is_complete:
            break
    return found


def _base_offset(segment: SegmentWithTxnIndex) -> int:
    return segment.base_offset

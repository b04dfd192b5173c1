"""Producer-state snapshot files (`<offset>.snapshot`, docs/FORMAT.md "Producer-state snapshot"):
their byte layout, and the java.util.HashMap order Kafka writes entries in, so our files are
byte-identical to Kafka's.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from crc32c import crc32c

from logstore.checkpoint import atomic_write
from logstore.errors import CorruptSnapshotError
from logstore.log_files import SNAPSHOT_SUFFIX, offset_prefix, segment_file_name
from logstore.producer_append import BatchMetadata, ProducerStateEntry

SNAPSHOT_VERSION = 1
# docs/FORMAT.md "Producer-state snapshot": int16 version, uint32 crc (CRC-32C of every byte
# after it), int32 entry count, then 46-byte entries; all big-endian.
SNAPSHOT_HEADER_DTYPE = np.dtype([("version", ">i2"), ("crc", ">u4"), ("count", ">i4")])
SNAPSHOT_ENTRY_DTYPE = np.dtype(
    [
        ("producer_id", ">i8"),
        ("producer_epoch", ">i2"),
        ("last_sequence", ">i4"),
        ("last_offset", ">i8"),
        ("offset_delta", ">i4"),
        ("timestamp", ">i8"),
        ("coordinator_epoch", ">i4"),
        ("current_txn_first_offset", ">i8"),
    ]
)
SNAPSHOT_HEADER_SIZE = SNAPSHOT_HEADER_DTYPE.itemsize  # 10
SNAPSHOT_ENTRY_SIZE = SNAPSHOT_ENTRY_DTYPE.itemsize  # 46
SNAPSHOT_CRC_END = 6  # the CRC covers bytes [6, end)


def _as_path(path: Path | str) -> Path:
    return path if isinstance(path, Path) else Path(path)  # Path(path) parses it again


def snapshot_path(log_dir: Path | str, offset: int) -> Path:
    """`<dir>/<offset, 20 digits>.snapshot`."""
    return _as_path(log_dir) / segment_file_name(offset, SNAPSHOT_SUFFIX)


def list_snapshot_names(log_dir: Path | str) -> dict[int, str]:
    """{offset: file name} of the regular `*.snapshot` files in a directory: names, not paths,
    as a log holds a snapshot for each of its segments (thousands) and uses one or two."""
    try:
        entries = list(os.scandir(log_dir))
    except (FileNotFoundError, NotADirectoryError):
        return {}
    found: dict[int, str] = {}
    for entry in entries:
        name = entry.name
        if name.endswith(SNAPSHOT_SUFFIX) and entry.is_file():
            offset = offset_prefix(name)
            if offset is not None:
                found[offset] = name
    return found


def list_snapshot_files(log_dir: Path | str) -> dict[int, Path]:
    """{offset: path} of the regular `*.snapshot` files in a directory."""
    directory = _as_path(log_dir)
    return {offset: directory / name for offset, name in list_snapshot_names(directory).items()}


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """The `.snapshot` bytes for these entries, in the order given."""
    rows = [
        (
            e.producer_id,
            e.producer_epoch,
            e.last_seq,
            e.last_data_offset,
            e.last_offset_delta,
            e.last_timestamp,
            e.coordinator_epoch,
            -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
        )
        for e in entries
    ]
    header = np.zeros(1, dtype=SNAPSHOT_HEADER_DTYPE)
    header["version"] = SNAPSHOT_VERSION
    header["count"] = len(rows)
    body = np.array(rows, dtype=SNAPSHOT_ENTRY_DTYPE).tobytes()
    data = bytearray(header.tobytes() + body)
    crc = crc32c(memoryview(data)[SNAPSHOT_CRC_END:])
    data[2:SNAPSHOT_CRC_END] = crc.to_bytes(4, "big")
    return bytes(data)


# What a CorruptSnapshotError's `reason` says went wrong, in the order Kafka's reader finds it.
SNAPSHOT_TRUNCATED = "truncated"  # facts: field (a header field) or entry_field
SNAPSHOT_NEGATIVE_COUNT = "negative count"  # facts: count
SNAPSHOT_COUNT_PAST_END = "count past end"  # facts: count, available (bytes after the header)
SNAPSHOT_UNKNOWN_VERSION = "unknown version"  # facts: version
SNAPSHOT_CRC_MISMATCH = "crc mismatch"  # facts: stored, computed
SNAPSHOT_TRAILING_BYTES = "trailing bytes"  # facts: count, available


def _corrupt(message: str, path: object, reason: str, position: int | None = None,
             **facts: object) -> CorruptSnapshotError:
    return CorruptSnapshotError(message, path=path, reason=reason, facts=facts, position=position)


def _first_field_past(dtype: np.dtype, available: int) -> str:
    """The first field of `dtype` that does not fit in `available` bytes."""
    return next(name for name in dtype.names if dtype.fields[name][1] + dtype[name].itemsize > available)


def read_snapshot_rows(data: bytes | memoryview, path: object = None, *, exact: bool = True) -> np.ndarray:
    """The entries of `.snapshot` bytes (SNAPSHOT_ENTRY_DTYPE rows), checked in the order of
    Kafka's ProducerStateManager.readSnapshot: the schema (header, entry count, whole entries),
    then the version, then the CRC. With `exact`, bytes after the entries are refused too
    (Kafka ignores them when the CRC covers them). Raises CorruptSnapshotError."""
    size = len(data)
    if size < SNAPSHOT_HEADER_SIZE:
        field = _first_field_past(SNAPSHOT_HEADER_DTYPE, size)
        raise _corrupt(f"snapshot of {size} bytes is shorter than its header", path, SNAPSHOT_TRUNCATED,
                       SNAPSHOT_HEADER_DTYPE.fields[field][1], field=field)
    header = np.frombuffer(data, dtype=SNAPSHOT_HEADER_DTYPE, count=1)[0]
    version, stored, count = int(header["version"]), int(header["crc"]), int(header["count"])
    available = size - SNAPSHOT_HEADER_SIZE
    if count < 0:
        raise _corrupt(f"snapshot claims {count} entries", path, SNAPSHOT_NEGATIVE_COUNT, count=count)
    if count > available:
        raise _corrupt(f"snapshot claims {count} entries but holds {available} bytes", path,
                       SNAPSHOT_COUNT_PAST_END, count=count, available=available)
    if count * SNAPSHOT_ENTRY_SIZE > available:
        whole = available // SNAPSHOT_ENTRY_SIZE
        field = _first_field_past(SNAPSHOT_ENTRY_DTYPE, available - whole * SNAPSHOT_ENTRY_SIZE)
        raise _corrupt(f"snapshot claims {count} entries but holds {available} bytes", path,
                       SNAPSHOT_TRUNCATED, SNAPSHOT_HEADER_SIZE + whole * SNAPSHOT_ENTRY_SIZE, entry_field=field)
    if version != SNAPSHOT_VERSION:
        raise _corrupt(f"unknown snapshot version {version}", path, SNAPSHOT_UNKNOWN_VERSION, 0, version=version)
    computed = crc32c(memoryview(data)[SNAPSHOT_CRC_END:])
    if stored != computed:
        raise _corrupt(f"snapshot CRC mismatch: stored {stored}, computed {computed}", path,
                       SNAPSHOT_CRC_MISMATCH, stored=stored, computed=computed)
    if exact and count * SNAPSHOT_ENTRY_SIZE != available:
        raise _corrupt(f"snapshot claims {count} entries but holds {available} bytes", path,
                       SNAPSHOT_TRAILING_BYTES, SNAPSHOT_HEADER_SIZE + count * SNAPSHOT_ENTRY_SIZE,
                       count=count, available=available)
    return np.frombuffer(data, dtype=SNAPSHOT_ENTRY_DTYPE, count=count, offset=SNAPSHOT_HEADER_SIZE)


def decode_snapshot(data: bytes, path: Path | str | None = None) -> list[ProducerStateEntry]:
    """Parse `.snapshot` bytes into producer state; raises CorruptSnapshotError (read_snapshot_rows)."""
    entries = []
    for pid, epoch, seq, last_offset, delta, ts, coord, txn_first in read_snapshot_rows(data, path).tolist():
        entry = ProducerStateEntry(pid, epoch, coord, ts, txn_first if txn_first >= 0 else None)
        if last_offset >= 0:
            entry.batch_metadata.append(BatchMetadata(seq, last_offset, delta, ts))
        entries.append(entry)
    return entries


def write_snapshot_file(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Write a snapshot via a temporary file and a rename; with `sync`, crash-safely (fsync the
    file and the directory). An unsynced snapshot lost in a crash fails its CRC and is skipped."""
    if sync:
        atomic_write(path, data)
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


# ---- Java HashMap iteration order ----------------------------------------------------------
# Kafka writes snapshot entries in the iteration order of a java.util.HashMap<Long, ...>:
# bucket by bucket, and inside a bucket in insertion order. The table starts at 16 buckets and
# doubles whenever the size exceeds 3/4 of it (it never shrinks), or when a bucket reaches
# 8 entries while the table is under 64 buckets. Emulating it makes our files byte-identical.

_JAVA_INITIAL_CAPACITY = 16
_JAVA_LOAD_FACTOR_NUM, _JAVA_LOAD_FACTOR_DEN = 3, 4
_JAVA_TREEIFY_THRESHOLD = 8
_JAVA_MIN_TREEIFY_CAPACITY = 64


def java_long_hash(value: int) -> int:
    """java.util.HashMap's spread hash of a java.lang.Long key, as an unsigned 32-bit int."""
    v = value & 0xFFFF_FFFF_FFFF_FFFF
    h = (v ^ (v >> 32)) & 0xFFFF_FFFF
    return h ^ (h >> 16)


class JavaHashMapOrder:
    """Tracks a HashMap's table capacity so keys can be listed in its iteration order."""

    def __init__(self) -> None:
        self.capacity = _JAVA_INITIAL_CAPACITY

    def on_insert(self, key: int, existing_keys: Iterable[int], new_size: int) -> None:
        """Account for inserting a new `key` into a map that becomes `new_size` long."""
        mask = self.capacity - 1
        bucket = java_long_hash(key) & mask
        in_bucket = sum(1 for k in existing_keys if java_long_hash(k) & mask == bucket)
        if in_bucket >= _JAVA_TREEIFY_THRESHOLD and self.capacity < _JAVA_MIN_TREEIFY_CAPACITY:
            self.capacity *= 2
        if new_size * _JAVA_LOAD_FACTOR_DEN > self.capacity * _JAVA_LOAD_FACTOR_NUM:
            self.capacity *= 2

    def order(self, keys_in_insertion_order: Iterable[int]) -> list[int]:
        """The keys in the map's iteration order."""
        mask = self.capacity - 1
        return sorted(keys_in_insertion_order, key=lambda k: java_long_hash(k) & mask)

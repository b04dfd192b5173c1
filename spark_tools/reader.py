"""Segment files to Arrow: one row per record, built from logstore.records' columnar decode.

The walk is per batch (header parse, CRC check, one numba decode of the records); every column
is then built with numpy over whole chunks, batch metadata by ``np.repeat`` over the batch
headers, key hashes by one kernel call per chunk. No Python object per record.

A local segment is memory-mapped. A remote one (object store, HDFS) is read by byte ranges
through pyarrow's file handle (``RangedFile``), walked by the engine's own entry walk
(``scan_entries``): a full scan fetches growing windows of whole batches, a header walk
(``read_segment_metadata``) fetches the headers and skips the bodies of large batches, and a
task holds one window and one chunk of decoded batches, nothing else of the file.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from dataclasses import dataclass
from os import PathLike, fspath

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs

from logstore.errors import CorruptRecordError
from logstore.log_files import parse_partition_dir, segment_log_offset
from logstore.log_input_stream import scan_entries
from logstore.records import RecordBatch, iter_batches, read_batch
from logstore.records.batch import TIMESTAMP_TYPES
from logstore.records.compression import COMPRESSION_NAMES
from logstore.records.header import (
    COMPRESSION_MASK,
    CONTROL_BIT,
    INT32_MAX,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
)
from spark_tools import _kernels
from spark_tools.layout import redact, resolve_filesystem
from spark_tools.ranged_file import RangedFile

DEFAULT_CHUNK_ROWS = 1 << 16
DEFAULT_CHUNK_BYTES = 16 << 20  # a chunk also ends once its batches hold this many bytes
# Column of each BatchHeader field when headers are stacked into an int64 matrix.
_H = {name: i for i, name in enumerate(BatchHeader._fields)}

RECORD_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("segment_base_offset", pa.int64()),
        ("batch_base_offset", pa.int64()),
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("timestamp_type", pa.string()),
        ("key", pa.binary()),
        ("key_hash", pa.int64()),
        ("key_size", pa.int32()),
        ("value_size", pa.int32()),
        ("header_count", pa.int32()),
        ("is_tombstone", pa.bool_()),
        ("batch_position", pa.int64()),
        ("batch_size", pa.int32()),
        ("compression", pa.string()),
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int16()),
        ("is_transactional", pa.bool_()),
        ("is_control", pa.bool_()),
        ("magic", pa.int8()),
        ("partition_leader_epoch", pa.int32()),
    ]
)
"""Columns of ``read_segments``: sizes are -1 for a null key or value (a tombstone);
``key_hash`` is ``mmh3.hash64(key)[0]`` (null for a null key)."""

_TIMESTAMP_TYPE_NAMES = pa.array(TIMESTAMP_TYPES, pa.string())
_COMPRESSION_NAMES = pa.array(COMPRESSION_NAMES, pa.string())


@dataclass
class SegmentScan:
    """Decoded columns of (part of) one segment: per batch, and per record in offset order."""

    # per batch
    position: np.ndarray  # int64 byte position in the file
    size: np.ndarray  # int64 bytes including the 12-byte log overhead
    base_offset: np.ndarray
    last_offset: np.ndarray
    partition_leader_epoch: np.ndarray
    magic: np.ndarray
    attributes: np.ndarray
    base_timestamp: np.ndarray
    max_timestamp: np.ndarray
    producer_id: np.ndarray
    producer_epoch: np.ndarray
    record_count: np.ndarray  # records decoded (the header count for magic 2)
    # per record
    batch_index: np.ndarray
    offset: np.ndarray
    timestamp: np.ndarray
    key_data: np.ndarray  # uint8, keys back to back
    key_offsets: np.ndarray  # int32 Arrow offsets into key_data (len = records + 1)
    key_size: np.ndarray  # -1 for a null key
    value_size: np.ndarray  # -1 for a null value
    header_count: np.ndarray
    key_hash1: np.ndarray  # uint64 MurmurHash3 x64_128 words (seed 0); 0 for null keys
    key_hash2: np.ndarray

    @property
    def num_batches(self) -> int:
        """Batches in this scan."""
        return len(self.position)

    @property
    def num_records(self) -> int:
        """Records in this scan."""
        return len(self.offset)


def segment_base_offset(path: str | PathLike[str]) -> int:
    """The base offset in a segment file name (``00000000000000000105.log`` -> 105)."""
    name = fspath(path).replace("\\", "/").rsplit("/", 1)[-1]
    base_offset = segment_log_offset(name)
    if base_offset is None:
        raise CorruptRecordError("not a segment file name (<20-digit base offset>.log)",
                                 path=fspath(path))
    return base_offset


def topic_partition_of(path: str | PathLike[str]) -> tuple[str, int]:
    """(topic, partition) from the segment's ``<topic>-<partition>`` parent directory."""
    parts = fspath(path).replace("\\", "/").rsplit("/", 2)
    return parse_partition_dir(parts[-2] if len(parts) >= 2 else "")


class SegmentBatches:
    """The complete batches of one segment file as (file position, RecordBatch), from a memory
    map when the file is local, else read by byte ranges (``RangedFile``); ``headers()`` walks
    only their headers.

    Afterwards ``valid_end`` is where the last complete batch ends and ``torn`` says whether a
    partial batch follows it; ``size`` is the file's size and ``bytes_read`` what a remote read
    fetched. A header that cannot be valid raises CorruptRecordError at its file position.
    """

    def __init__(self, path: str | PathLike[str], filesystem: pafs.FileSystem | None = None):
        self._fs, self._inner = resolve_filesystem(path, filesystem)
        self.local = isinstance(self._fs, pafs.LocalFileSystem)
        self.valid_end = 0
        self.torn = False
        self.size = 0
        self.bytes_read = 0

    def __iter__(self) -> Iterator[tuple[int, RecordBatch]]:
        return self._mapped() if self.local else self._ranged(full=True)

    def headers(self) -> Iterator[tuple[int, BatchHeader]]:
        """(file position, header) of each complete batch; a remote file's bodies are not read."""
        if self.local:
            return ((position, batch.header) for position, batch in self._mapped())
        return ((position, header) for position, header, _ in self._ranged(full=False))

    def _mapped(self) -> Iterator[tuple[int, RecordBatch]]:
        with open(self._inner, "rb") as f:
            self.size = f.seek(0, 2)
            view = (memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
                    if self.size else memoryview(b""))
        batches = iter_batches(view)
        for batch in batches:
            self.valid_end = batches.valid_end
            yield batch.position, batch
        self.torn = batches.torn

    def _ranged(self, *, full: bool) -> Iterator:
        """(file position, RecordBatch) with ``full``, else (file position, BatchHeader, None)."""
        with RangedFile(self._fs, self._inner) as f:
            self.size = f.size
            try:
                for position, header, buf, off in scan_entries(f.read_at, f.size, 0, full=full,
                                                               path=redact(self._inner)):
                    self.valid_end = position + header.size_in_bytes
                    self.bytes_read = f.bytes_read
                    if not full:
                        yield position, header, None
                        continue
                    try:
                        yield position, read_batch(buf, off)
                    except CorruptRecordError as exc:
                        raise CorruptRecordError(_message(exc), position=position) from None
            finally:
                self.bytes_read = f.bytes_read
        self.torn = self.valid_end < self.size


def scan_segment(
    path: str | PathLike[str],
    *,
    filesystem: pafs.FileSystem | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
) -> Iterator[SegmentScan]:
    """Decode one segment file into SegmentScan chunks of about ``chunk_rows`` records.

    Every batch's CRC is checked. Raises CorruptRecordError (naming the file and byte position)
    for a bad batch or a partial batch at the end of the file.
    """
    batches = SegmentBatches(path, filesystem)
    pending: list[tuple[int, RecordBatch, object]] = []
    rows = nbytes = 0
    yielded = False
    try:
        for position, batch in batches:
            columns = _decode(batch, position)
            pending.append((position, batch, columns))
            rows += len(columns.offset)
            nbytes += len(batch.view)
            if rows >= chunk_rows or nbytes >= DEFAULT_CHUNK_BYTES:
                yield _assemble(pending)
                pending, rows, nbytes, yielded = [], 0, 0, True
    except CorruptRecordError as exc:
        raise _with_path(exc, path) from None
    if batches.torn:
        raise CorruptRecordError(
            "partial batch at the end of the segment", position=batches.valid_end,
            path=redact(fspath(path)))
    if pending or not yielded:
        yield _assemble(pending)


def _message(exc: CorruptRecordError) -> str:
    """The error's message without the "(position N)" its constructor appended."""
    text = str(exc)
    return text if exc.position is None else text.removesuffix(f" (position {exc.position})")


def _with_path(exc: CorruptRecordError, path: str | PathLike[str]) -> CorruptRecordError:
    return CorruptRecordError(_message(exc), position=exc.position, path=redact(fspath(path)))


def _decode(batch: RecordBatch, position: int):
    """Validate (CRC) and decode one batch; errors name its position in the file."""
    try:
        batch.validate()
        return batch.columns()
    except CorruptRecordError as exc:
        inside = 0 if exc.position is None else exc.position - batch.position
        raise CorruptRecordError(_message(exc), position=position + inside) from None


def _assemble(pending: list) -> SegmentScan:
    """Stack the per-batch decodes into flat columns (keys hashed once)."""
    headers = np.array([b.header for _, b, _ in pending], dtype=np.int64).reshape(-1, len(_H))
    cols = [c for _, _, c in pending]
    counts = np.array([len(c.offset) for c in cols], dtype=np.int64)
    nb = len(cols)
    batch_index = np.repeat(np.arange(nb, dtype=np.int64), counts)
    offset = _concat([c.offset for c in cols], np.int64)
    timestamp = _concat([c.timestamp for c in cols], np.int64)
    key_size = _concat([_sizes(c.key_offsets, c.key_null) for c in cols], np.int64)
    value_size = _concat([_sizes(c.value_offsets, c.value_null) for c in cols], np.int64)
    header_count = _concat([np.diff(c.headers_offsets) for c in cols], np.int64)
    key_offsets = np.zeros(len(offset) + 1, dtype=np.int64)
    np.cumsum(np.maximum(key_size, 0), out=key_offsets[1:])
    key_data = _concat([c.key_data[: c.key_offsets[-1]] for c in cols], np.uint8)
    has_key = key_size >= 0
    key_hash1, key_hash2 = _kernels.murmur3_x64_128(key_data, key_offsets, has_key)
    base_offset = headers[:, _H["base_offset"]]
    return SegmentScan(
        position=np.array([p for p, _, _ in pending], dtype=np.int64),
        size=headers[:, _H["batch_length"]] + LOG_OVERHEAD,
        base_offset=base_offset,
        last_offset=base_offset + headers[:, _H["last_offset_delta"]],
        partition_leader_epoch=headers[:, _H["partition_leader_epoch"]],
        magic=headers[:, _H["magic"]],
        attributes=headers[:, _H["attributes"]],
        base_timestamp=headers[:, _H["base_timestamp"]],
        max_timestamp=headers[:, _H["max_timestamp"]],
        producer_id=headers[:, _H["producer_id"]],
        producer_epoch=headers[:, _H["producer_epoch"]],
        record_count=counts,
        batch_index=batch_index,
        offset=offset,
        timestamp=timestamp,
        key_data=key_data,
        key_offsets=key_offsets.astype(np.int32) if key_offsets[-1] <= INT32_MAX else key_offsets,
        key_size=key_size,
        value_size=value_size,
        header_count=header_count,
        key_hash1=key_hash1,
        key_hash2=key_hash2,
    )


def _sizes(offsets: np.ndarray, null: np.ndarray) -> np.ndarray:
    """Lengths from Arrow offsets, -1 where null."""
    return np.where(null, -1, np.diff(offsets))


def _concat(arrays: list[np.ndarray], dtype) -> np.ndarray:
    return np.concatenate(arrays).astype(dtype, copy=False) if arrays else np.empty(0, dtype)


def scan_to_arrow(scan: SegmentScan, topic: str, partition: int, segment_base: int) -> pa.RecordBatch:
    """One Arrow record batch (RECORD_SCHEMA) for a SegmentScan."""
    n = scan.num_records
    counts = scan.record_count
    attributes = scan.attributes

    def per_record(per_batch: np.ndarray, dtype) -> pa.Array:
        # Cast the short per-batch column first, then repeat it over each batch's records.
        return pa.array(np.repeat(per_batch.astype(dtype, copy=False), counts))

    has_key = scan.key_size >= 0
    validity = None if has_key.all() else pa.py_buffer(np.packbits(has_key, bitorder="little"))
    keys = pa.Array.from_buffers(
        pa.binary() if scan.key_offsets.dtype == np.int32 else pa.large_binary(),
        n,
        [validity, pa.py_buffer(scan.key_offsets), pa.py_buffer(scan.key_data)],
    )
    if keys.type != pa.binary():
        keys = keys.cast(pa.binary())
    key_hash = pa.array(scan.key_hash1.view(np.int64), mask=~has_key)
    columns = [
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.repeat(pa.scalar(segment_base, pa.int64()), n),
        per_record(scan.base_offset, np.int64),
        pa.array(scan.offset),
        pa.array(scan.timestamp),
        _TIMESTAMP_TYPE_NAMES.take(per_record((attributes & TIMESTAMP_TYPE_BIT) != 0, np.int8)),
        keys,
        key_hash,
        pa.array(scan.key_size.astype(np.int32)),
        pa.array(scan.value_size.astype(np.int32)),
        pa.array(scan.header_count.astype(np.int32)),
        pa.array(scan.value_size < 0),
        per_record(scan.position, np.int64),
        per_record(scan.size, np.int32),
        _COMPRESSION_NAMES.take(per_record(attributes & COMPRESSION_MASK, np.int8)),
        per_record(scan.producer_id, np.int64),
        per_record(scan.producer_epoch, np.int16),
        per_record((attributes & TRANSACTIONAL_BIT) != 0, np.bool_),
        per_record((attributes & CONTROL_BIT) != 0, np.bool_),
        per_record(scan.magic, np.int8),
        per_record(scan.partition_leader_epoch, np.int32),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=RECORD_SCHEMA)


def read_segments(
    path: str | PathLike[str],
    topic: str | None = None,
    partition: int | None = None,
    *,
    filesystem: pafs.FileSystem | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
) -> Iterator[pa.RecordBatch]:
    """Read one ``.log`` segment file as Arrow record batches (RECORD_SCHEMA), one row per record.

    ``topic``/``partition`` default to the parent ``<topic>-<partition>`` directory name; the
    path may be local, a URI, or a path inside ``filesystem``. Raises CorruptRecordError.
    """
    if topic is None or partition is None:
        found_topic, found_partition = topic_partition_of(path)
        topic = found_topic if topic is None else topic
        partition = found_partition if partition is None else partition
    base = segment_base_offset(path)
    for scan in scan_segment(path, filesystem=filesystem, chunk_rows=chunk_rows):
        yield scan_to_arrow(scan, topic, partition, base)


METADATA_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("path", pa.string()),
        ("base_offset", pa.int64()),
        ("next_offset", pa.int64()),
        ("size", pa.int64()),
        ("largest_timestamp", pa.int64()),
        ("first_batch_timestamp", pa.int64()),
        ("record_count", pa.int64()),
        ("batch_count", pa.int64()),
        ("last_modified_ms", pa.int64()),
    ]
)
"""Columns of ``read_segment_metadata``: one row per segment. ``largest_timestamp`` is the
largest batch max timestamp, or the file's modification time when no batch has one (Kafka's
``LogSegment.largestTimestamp``); ``first_batch_timestamp`` is -1 for an empty segment."""


def read_segment_metadata(
    path: str | PathLike[str],
    topic: str | None = None,
    partition: int | None = None,
    *,
    filesystem: pafs.FileSystem | None = None,
    last_modified_ms: int | None = None,
) -> dict:
    """One METADATA_SCHEMA row (a dict) for a segment file, from a walk of its batch headers.

    Raises CorruptRecordError for an unparseable header or a partial batch at the end.
    """
    if topic is None or partition is None:
        found_topic, found_partition = topic_partition_of(path)
        topic = found_topic if topic is None else topic
        partition = found_partition if partition is None else partition
    base = segment_base_offset(path)
    if last_modified_ms is None:
        fs, inner = resolve_filesystem(path, filesystem)
        mtime_ns = fs.get_file_info(inner).mtime_ns
        last_modified_ms = 0 if mtime_ns is None else mtime_ns // 1_000_000
    batches = SegmentBatches(path, filesystem)
    next_offset, max_ts, first_ts, records, count = base, -1, -1, 0, 0
    try:
        for _, header in batches.headers():
            if count == 0:
                first_ts = header.max_timestamp
            max_ts = max(max_ts, header.max_timestamp)
            records += header.record_count
            next_offset = header.base_offset + header.last_offset_delta + 1
            count += 1
    except CorruptRecordError as exc:
        raise _with_path(exc, path) from None
    if batches.torn:
        raise CorruptRecordError("partial batch at the end of the segment",
                                 position=batches.valid_end, path=redact(fspath(path)))
    return {
        "topic": topic,
        "partition": partition,
        "path": fspath(path),
        "base_offset": base,
        "next_offset": next_offset,
        "size": batches.size,
        "largest_timestamp": max_ts if max_ts >= 0 else last_modified_ms,
        "first_batch_timestamp": first_ts,
        "record_count": records,
        "batch_count": count,
        "last_modified_ms": last_modified_ms,
    }

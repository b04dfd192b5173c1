"""Segment bytes -> the plan's columns, and the filtered batches the cleaner writes back.

Per batch in Python, per record in numba (compaction/_kernels.py). Magic 2 batches are
scanned in place (compressed ones after one decompression); magic 0/1 entries, rare in
compacted logs, go through logstore.records' legacy reader.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from os import PathLike
from typing import BinaryIO

import numpy as np

from compaction import _kernels
from compaction.plan import CONTROL_NONE, BatchColumns, CleanerRecordColumns
from logstore.errors import CorruptRecordError
from logstore.records import LegacyRecordBatch, Record, build_legacy_entry, crc32c, native_crc
from logstore.records.compression import (
    COMPRESSION_NAMES,
    DEFAULT_MAX_INFLATED_BYTES,
    compress,
    decompress,
)
from logstore.records.control import CONTROL_KEY
from logstore.records.header import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_BIT,
    CRC_OFFSET,
    DELETE_HORIZON_BIT,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    V2_HEADER,
    V2_HEADER_DTYPE,
    V2_HEADER_SIZE,
)

_HEADER_RANGE = np.arange(V2_HEADER_SIZE, dtype=np.int64)


@dataclass
class DecodedBatches:
    """Consecutive batches of one segment, decoded to columns.

    `arena` holds the source bytes (positions `position`) followed by decompressed bodies;
    `rec_start`/`rec_end` locate each v2 record there. Legacy records have rec_start = -1 and
    their Record objects in `legacy_records`.
    """

    arena: np.ndarray
    position: np.ndarray  # int64 per batch: byte position in the source
    size: np.ndarray  # int64 per batch: bytes
    header: np.ndarray  # V2_HEADER_DTYPE per batch (legacy: v2-shaped stand-in values)
    batches: BatchColumns
    records: CleanerRecordColumns
    timestamp: np.ndarray  # int64 per record
    rec_start: np.ndarray
    rec_end: np.ndarray
    legacy_records: dict[int, list[Record]]  # batch index -> records (magic 0/1 only)
    valid_end: int  # byte position where complete batches end
    file_position: int = 0  # position in the segment file of the source's first byte
    map_slot: np.ndarray | None = None  # int64 per record: its offset-map slot this round (-1: none)

    @property
    def nbytes(self) -> int:
        """Bytes held by the decoded arrays (the arena included; legacy Record objects not)."""
        arrays = [self.arena, self.position, self.size, self.header, self.timestamp, self.rec_start,
                  self.rec_end]
        arrays += [getattr(self.batches, f) for f in self.batches.__dataclass_fields__]
        arrays += [getattr(self.records, f) for f in self.records.__dataclass_fields__]
        return sum(a.nbytes for a in arrays)


def walk(buf: np.ndarray, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions and sizes of the complete log entries in buf[start:end]."""
    count, _ = _kernels.walk_entries(buf, start, end, np.empty(0, np.int64), np.empty(0, np.int64), False)
    pos = np.empty(count, np.int64)
    size = np.empty(count, np.int64)
    _kernels.walk_entries(buf, start, end, pos, size, True)
    return pos, size


def decode(buf: np.ndarray, *, segment_base: int, start: int = 0, end: int | None = None,
           path: str | None = None, max_inflated_bytes: int = DEFAULT_MAX_INFLATED_BYTES,
           file_position: int = 0) -> DecodedBatches:
    """Decode the complete batches in buf[start:end] (uint8 array) of the segment at segment_base.

    `file_position` is where buf[0] lies in the segment file (errors name file positions).
    """
    end = len(buf) if end is None else end
    at = int(file_position)
    pos, size = walk(buf, start, end)
    valid_end = int(pos[-1] + size[-1]) if len(pos) else start
    nb = len(pos)
    magic = buf[pos + MAGIC_OFFSET].astype(np.int8) if nb else np.empty(0, np.int8)
    v2 = magic >= 2
    header = np.zeros(nb, V2_HEADER_DTYPE)
    if v2.any():
        raw = buf[pos[v2, None] + _HEADER_RANGE]
        header[v2] = np.ascontiguousarray(raw).view(V2_HEADER_DTYPE).reshape(-1)
    legacy_records: dict[int, list[Record]] = {}
    for b in np.flatnonzero(~v2):
        try:
            entry = LegacyRecordBatch(memoryview(buf[pos[b]:pos[b] + size[b]]), 0)
            recs = entry.records(max_inflated_bytes=max_inflated_bytes)
        except CorruptRecordError as exc:  # placed within the entry: place it in the file
            raise CorruptRecordError(exc.detail, position=at + int(pos[b]) + (exc.position or 0),
                                     path=path) from exc
        legacy_records[int(b)] = recs
        stand_in = {"base_offset": recs[0].offset, "magic": magic[b], "attributes": entry.attributes,
                    "last_offset_delta": recs[-1].offset - recs[0].offset,
                    "base_timestamp": max(r.timestamp for r in recs),
                    "max_timestamp": max(r.timestamp for r in recs), "producer_id": -1,
                    "producer_epoch": -1, "base_sequence": -1, "record_count": len(recs),
                    "partition_leader_epoch": -1}
        for name, value in stand_in.items():
            header[name][b] = value
    counts = header["record_count"].astype(np.int64)
    codes = header["attributes"].astype(np.int64) & COMPRESSION_MASK
    body_start = pos + V2_HEADER_SIZE
    body_end = pos + size
    extra = []
    arena_len = len(buf)
    for b in np.flatnonzero(v2 & (codes != 0)):
        try:
            data = decompress(int(codes[b]), memoryview(buf[body_start[b]:body_end[b]]),
                              limit=max_inflated_bytes, position=at + int(pos[b]))
        except CorruptRecordError as exc:
            raise CorruptRecordError(exc.detail, position=exc.position, path=path) from exc
        extra.append(np.frombuffer(data, np.uint8))
        body_start[b] = arena_len
        body_end[b] = arena_len + len(data)
        arena_len += len(data)
    arena = np.concatenate([buf, *extra]) if extra else buf
    v2_counts = np.where(v2, counts, 0)
    n = int(counts.sum())
    row_of_batch = np.concatenate([[0], np.cumsum(counts)])
    log_append = np.where((header["attributes"] & TIMESTAMP_TYPE_BIT) != 0, header["max_timestamp"], -1)
    v2_idx = np.flatnonzero(v2)
    v2_n = int(v2_counts.sum())
    # rec_start, rec_end, offset, timestamp, key_start, key_len, value_len, batch, of v2 records
    cols = [np.empty(v2_n, np.int64) for _ in range(8)]
    hashes = [np.empty(v2_n, np.uint64) for _ in range(2)]
    if v2_idx.size:
        bad = _kernels.scan_records(
            arena, body_start[v2_idx], body_end[v2_idx], v2_counts[v2_idx],
            header["base_offset"][v2_idx].astype(np.int64),
            header["base_timestamp"][v2_idx].astype(np.int64), log_append[v2_idx].astype(np.int64),
            *cols, *hashes)
        if bad >= 0:
            b = int(v2_idx[bad])
            # As Kafka validates a batch: its CRC first, so damaged bytes are named as such.
            if crc32c(memoryview(buf[pos[b] + ATTRIBUTES_OFFSET:pos[b] + size[b]])) != int(header["crc"][b]):
                raise CorruptRecordError("batch CRC-32C mismatch", position=at + int(pos[b]), path=path)
            raise CorruptRecordError("malformed records in batch", position=at + int(pos[b]), path=path)
    if v2_n == n:  # no legacy records: the scan's columns are the record columns
        rec_start, rec_end, offsets, timestamps, key_start, key_len, value_len, batch_index = cols
        if v2_idx.size != nb:
            batch_index = v2_idx[batch_index]
        h1, h2 = hashes
    else:
        rec_start = np.full(n, -1, np.int64)
        rec_end = np.full(n, -1, np.int64)
        offsets = np.empty(n, np.int64)
        timestamps = np.empty(n, np.int64)
        key_start = np.zeros(n, np.int64)
        key_len = np.full(n, -1, np.int64)
        value_len = np.full(n, -1, np.int64)
        batch_index = np.empty(n, np.int64)
        h1 = np.zeros(n, np.uint64)
        h2 = np.zeros(n, np.uint64)
        v2_rows = np.flatnonzero(np.repeat(v2, counts))
        rec_start[v2_rows], rec_end[v2_rows], offsets[v2_rows], timestamps[v2_rows] = cols[:4]
        key_start[v2_rows], key_len[v2_rows], value_len[v2_rows] = cols[4:7]
        batch_index[v2_rows] = v2_idx[cols[7]]
        h1[v2_rows], h2[v2_rows] = hashes
    key_bytes: dict[int, bytes | None] = {}
    for b, recs in legacy_records.items():
        for j, r in enumerate(recs):
            row = int(row_of_batch[b]) + j
            offsets[row], timestamps[row], batch_index[row] = r.offset, r.timestamp, b
            value_len[row] = -1 if r.value is None else len(r.value)
            key_bytes[row] = r.key
    has_key = key_len >= 0
    for row, key in key_bytes.items():
        has_key[row] = key is not None
        if key is not None:
            kb = np.frombuffer(key, np.uint8) if key else np.zeros(0, np.uint8)
            h1[row], h2[row] = _kernels.murmur3_128(kb, 0, len(key))
    attrs = header["attributes"].astype(np.int32)
    control_type = np.full(nb, CONTROL_NONE, np.int8)
    for b in np.flatnonzero(v2 & ((attrs & CONTROL_BIT) != 0) & (counts > 0)):
        row = int(row_of_batch[b])
        if key_len[row] >= CONTROL_KEY.size:
            ks = int(key_start[row])
            control_type[b] = CONTROL_KEY.unpack_from(arena[ks:ks + CONTROL_KEY.size].tobytes())[1]
    batches = BatchColumns(
        base_offset=header["base_offset"].astype(np.int64),
        last_offset=header["base_offset"].astype(np.int64) + header["last_offset_delta"],
        attributes=attrs,
        base_timestamp=header["base_timestamp"].astype(np.int64),
        producer_id=header["producer_id"].astype(np.int64),
        producer_epoch=header["producer_epoch"].astype(np.int32),
        record_count=counts,
        magic=magic,
        control_type=control_type,
        segment_base=np.full(nb, segment_base, np.int64),
        legacy_retain_deletes=np.ones(nb, np.bool_),
    )
    records = CleanerRecordColumns(batch_index=batch_index, offset=offsets, key_hash1=h1, key_hash2=h2,
                                   has_key=has_key, is_tombstone=value_len < 0)
    return DecodedBatches(arena=arena, position=pos, size=size, header=header, batches=batches,
                          records=records, timestamp=timestamps, rec_start=rec_start, rec_end=rec_end,
                          legacy_records=legacy_records, valid_end=valid_end, file_position=at)


CHUNK_BYTES = 8 << 20  # source bytes decoded at a time by decode_chunks


def decode_chunks(path: str | PathLike[str], *, segment_base: int, size: int,
                  chunk_bytes: int | None = None, torn_tail_ok: bool = False,
                  max_inflated_bytes: int = DEFAULT_MAX_INFLATED_BYTES) -> Iterator[DecodedBatches]:
    """The complete batches of a segment file's first `size` bytes, decoded about `chunk_bytes`
    (default CHUNK_BYTES) of source at a time (a larger batch alone), so memory stays bounded
    whatever the segment size.

    Each chunk's positions are relative to its own bytes (`file_position` places them). Bytes
    after the last complete batch raise CorruptRecordError, as `decode` of the whole file would
    find them, unless `torn_tail_ok` (an active segment's torn write). Chunks are read into
    copies, never mapped: a truncation meanwhile (a follower's, or an embedding caller's) then
    shortens a read instead of killing the process on a mapped page past the new end.
    """
    path = str(path)
    chunk_bytes = max(CHUNK_BYTES if chunk_bytes is None else int(chunk_bytes), LOG_OVERHEAD)
    pos = 0
    want = chunk_bytes
    with open(path, "rb") as f:
        while pos < size:
            asked = min(want, size - pos)
            buf = _read(f, pos, asked)
            got = len(buf)  # a file shorter than `size`: what is there decodes
            d = decode(buf, segment_base=segment_base, path=path, file_position=pos,
                       max_inflated_bytes=max_inflated_bytes)
            if d.valid_end:
                yield d
                pos += d.valid_end
                want = chunk_bytes
                continue
            entry = _entry_size(buf)
            if got < asked or entry is None or pos + entry > size or entry <= len(buf):
                break
            want = entry  # one batch larger than a chunk: read it whole
    if pos < size and not torn_tail_ok:
        raise CorruptRecordError(f"{size - pos} bytes after the last complete batch", position=pos,
                                 path=path)


def _read(f: BinaryIO, pos: int, n: int) -> np.ndarray:
    """Up to `n` bytes of `f` from `pos`, copied into a new array."""
    buf = np.empty(n, np.uint8)
    f.seek(pos)
    return buf[:f.readinto(memoryview(buf))]


def _entry_size(buf: np.ndarray) -> int | None:
    """The byte size of the log entry starting buf (offset, length, ...), None when its length
    is not one a walk accepts or buf is too short to say."""
    if len(buf) < LOG_OVERHEAD:
        return None
    size = LOG_OVERHEAD + int.from_bytes(buf[8:12].tobytes(), "big", signed=True)
    return size if size >= 26 else None


def empty_batch(h: np.void) -> bytes:
    """Kafka's writeEmptyHeader: a 61-byte batch with no records keeping offsets and producer fields."""
    attrs = int(h["attributes"]) & (TIMESTAMP_TYPE_BIT | TRANSACTIONAL_BIT | CONTROL_BIT)
    return _finish_header(int(h["base_offset"]), int(h["partition_leader_epoch"]), attrs,
                          int(h["last_offset_delta"]), NO_TIMESTAMP, int(h["max_timestamp"]),
                          int(h["producer_id"]), int(h["producer_epoch"]), int(h["base_sequence"]), 0, b"")


def _finish_header(base_offset: int, leader_epoch: int, attributes: int, last_delta: int,
                   base_ts: int, max_ts: int, pid: int, epoch: int, base_seq: int, count: int,
                   body: bytes) -> bytes:
    header = bytearray(V2_HEADER.pack(base_offset, V2_HEADER_SIZE - LOG_OVERHEAD + len(body),
                                      leader_epoch, 2, 0, attributes, last_delta, base_ts, max_ts,
                                      pid, epoch, base_seq, count))
    crc = crc32c(memoryview(header)[ATTRIBUTES_OFFSET:], 0)
    crc = crc32c(body, crc)
    struct.pack_into(">I", header, CRC_OFFSET, crc)
    return bytes(header) + body


@dataclass
class _RewrittenV2:
    """The kept records of some v2 batches laid out batch after batch in `buf` (a header's
    room before each), record timestamps rewritten; headers, CRCs and compression still to do."""

    pos: np.ndarray  # index into the caller's batch_ids of each v2 batch
    ids: np.ndarray  # the v2 batches (indexes into d)
    buf: np.ndarray
    batch_start: np.ndarray
    batch_end: np.ndarray
    attrs: np.ndarray
    base_ts: np.ndarray
    max_ts: np.ndarray
    counts: np.ndarray


def _rewrite_v2(d: DecodedBatches, batch_ids: np.ndarray, keep: np.ndarray,
                delete_horizons: np.ndarray, *, write: bool = True) -> _RewrittenV2 | None:
    v2_pos = np.flatnonzero(d.header["magic"][batch_ids] >= 2)
    if not v2_pos.size:
        return None
    ids = batch_ids[v2_pos]
    member = np.zeros(len(d.position), np.bool_)
    member[ids] = True
    bi = d.records.batch_index
    rows = np.flatnonzero(keep & member[bi])
    counts = np.bincount(bi[rows], minlength=len(d.position))[ids]
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    horizons = np.asarray(delete_horizons, np.int64)[v2_pos]
    ts = d.timestamp[rows]
    base_ts = np.where(horizons != NO_TIMESTAMP, horizons, ts[first])
    attrs = d.header["attributes"][ids].astype(np.int32)
    attrs = np.where(horizons != NO_TIMESTAMP, attrs | DELETE_HORIZON_BIT, attrs & ~DELETE_HORIZON_BIT)
    max_ts = np.where((attrs & TIMESTAMP_TYPE_BIT) != 0, d.header["max_timestamp"][ids],
                      np.maximum.reduceat(ts, first))
    gaps = np.zeros(len(rows), np.int64)
    gaps[first] = V2_HEADER_SIZE
    starts, ends = d.rec_start[rows], d.rec_end[rows]
    room = int((ends - starts).sum()) + 20 * len(rows) + V2_HEADER_SIZE * len(ids) if write else 0
    buf = np.empty(room, np.uint8)
    rec_end = np.empty(len(rows), np.int64)
    _kernels.rewrite_records(d.arena, starts, ends, ts - np.repeat(base_ts, counts), gaps, buf,
                             rec_end, write)
    batch_end = rec_end[first + counts - 1]
    batch_start = np.concatenate([[0], batch_end[:-1]])
    return _RewrittenV2(v2_pos, ids, buf, batch_start, batch_end, attrs, base_ts, max_ts, counts)


def _stamp_crcs(buf: np.ndarray, batch_start: np.ndarray, batch_end: np.ndarray) -> None:
    """Write the CRC-32C of each v2 batch buf[batch_start[k]:batch_end[k]] into its header: in
    one compiled call where the crc32c package's C function can be called from numba."""
    if native_crc.ADDRESS:
        _kernels.stamp_crcs(native_crc.ADDRESS, buf, batch_start, batch_end)
        return
    view = memoryview(buf)
    crcs = np.array([crc32c(view[s + ATTRIBUTES_OFFSET:e]) for s, e in zip(
        batch_start.tolist(), batch_end.tolist(), strict=True)], np.uint32)
    buf[(batch_start + CRC_OFFSET)[:, None] + np.arange(4)] = crcs.astype(">u4").view(np.uint8).reshape(-1, 4)


@dataclass
class RebuiltBatches:
    """Rebuilt batches where they lie: batch k is buffers[buffer[k]][start[k]:end[k]], so batches
    built side by side in one buffer can be written as one part."""

    buffers: list[np.ndarray | bytes]
    buffer: np.ndarray  # int64 per batch: index into buffers
    start: np.ndarray  # int64 per batch
    end: np.ndarray  # int64 per batch
    max_timestamp: np.ndarray  # int64 per batch: the max timestamp its header holds

    def views(self) -> list[memoryview]:
        """Each batch's bytes, a view of its buffer."""
        views = [memoryview(b) for b in self.buffers]
        return [views[b][s:e] for b, s, e in zip(self.buffer.tolist(), self.start.tolist(),
                                                   self.end.tolist(), strict=True)]


def rebuild_batches(d: DecodedBatches, batch_ids: np.ndarray, keep: np.ndarray,
                    delete_horizons: np.ndarray) -> list[memoryview]:
    """Batches `batch_ids` rebuilt from their kept records, as Kafka's buildRetainedRecordsInto does.

    `keep` is the plan's per-record mask (each batch keeps at least one record);
    `delete_horizons[k]` the horizon for batch_ids[k] (NO_TIMESTAMP: none). Same base offset,
    last offset delta, producer fields, leader epoch and codec; the base timestamp is the delete
    horizon (attribute bit 6) when one is set, else the first kept record's timestamp; record
    timestamp deltas are rewritten against it.
    """
    return rebuild_layout(d, batch_ids, keep, delete_horizons).views()


def rebuild_layout(d: DecodedBatches, batch_ids: np.ndarray, keep: np.ndarray,
                   delete_horizons: np.ndarray) -> RebuiltBatches:
    """`rebuild_batches`, with the batches left where they were built: uncompressed v2 batches
    side by side in one buffer (one numba pass, CRCs over the buffer), the others one each."""
    batch_ids = np.asarray(batch_ids, np.int64)
    n = len(batch_ids)
    buffers: list[np.ndarray | bytes] = []
    where = np.zeros(n, np.int64)
    start = np.zeros(n, np.int64)
    end = np.full(n, -1, np.int64)
    max_ts = np.zeros(n, np.int64)
    r = _rewrite_v2(d, batch_ids, keep, delete_horizons)
    if r is not None:
        buf = r.buf
        buffers.append(buf)
        hdr = d.header[r.ids].copy()
        hdr["batch_length"] = r.batch_end - r.batch_start - LOG_OVERHEAD
        hdr["attributes"] = r.attrs
        hdr["base_timestamp"] = r.base_ts
        hdr["max_timestamp"] = r.max_ts
        hdr["record_count"] = r.counts
        hdr["crc"] = 0
        buf[r.batch_start[:, None] + _HEADER_RANGE] = hdr.view(np.uint8).reshape(-1, V2_HEADER_SIZE)
        codes = r.attrs & COMPRESSION_MASK
        plain = np.flatnonzero(codes == 0)
        view = memoryview(buf)
        _stamp_crcs(buf, r.batch_start[plain], r.batch_end[plain])
        at = r.pos[plain]
        start[at], end[at] = r.batch_start[plain], r.batch_end[plain]
        max_ts[r.pos] = r.max_ts
        for j in np.flatnonzero(codes != 0).tolist():
            h = hdr[j]
            s, e = int(r.batch_start[j]), int(r.batch_end[j])
            body = compress(int(codes[j]), view[s + V2_HEADER_SIZE:e])
            raw = _finish_header(
                int(h["base_offset"]), int(h["partition_leader_epoch"]), int(r.attrs[j]),
                int(h["last_offset_delta"]), int(r.base_ts[j]), int(r.max_ts[j]),
                int(h["producer_id"]), int(h["producer_epoch"]), int(h["base_sequence"]),
                int(r.counts[j]), body)
            where[r.pos[j]], end[r.pos[j]] = len(buffers), len(raw)
            buffers.append(raw)
    for k in np.flatnonzero(end < 0).tolist():
        b = int(batch_ids[k])
        rows = np.flatnonzero(keep & (d.records.batch_index == b))
        raw = _rebuild_legacy(d, b, rows)
        where[k], end[k] = len(buffers), len(raw)
        max_ts[k] = int(d.timestamp[rows].max())  # a legacy entry has no batch header to hold one
        buffers.append(raw)
    return RebuiltBatches(buffers, where, start, end, max_ts)


def rebuilt_sizes(d: DecodedBatches, batch_ids: np.ndarray, keep: np.ndarray,
                  delete_horizons: np.ndarray) -> np.ndarray:
    """The byte size of each batch `rebuild_batches` would return (same arguments): what a
    dry-run cleaning round counts as written. Uncompressed v2 batches are only measured (no
    bytes copied, no headers or CRCs); compressed and legacy ones are built, since their size
    depends on the compressed bytes."""
    batch_ids = np.asarray(batch_ids, np.int64)
    delete_horizons = np.asarray(delete_horizons, np.int64)
    sizes = np.full(len(batch_ids), -1, np.int64)
    v2 = d.header["magic"][batch_ids] >= 2
    compressed = v2 & ((d.header["attributes"][batch_ids] & COMPRESSION_MASK) != 0)
    r = _rewrite_v2(d, batch_ids[v2 & ~compressed], keep, delete_horizons[v2 & ~compressed],
                    write=False)
    if r is not None:
        sizes[np.flatnonzero(v2 & ~compressed)] = r.batch_end - r.batch_start
    if compressed.any():  # the size is known once the kept records are compressed
        for k, raw in zip(np.flatnonzero(compressed).tolist(),
                          rebuild_batches(d, batch_ids[compressed], keep, delete_horizons[compressed]),
                          strict=True):
            sizes[k] = len(raw)
    for k in np.flatnonzero(sizes < 0).tolist():
        b = int(batch_ids[k])
        sizes[k] = len(_rebuild_legacy(d, b, np.flatnonzero(keep & (d.records.batch_index == b))))
    return sizes


def _rebuild_legacy(d: DecodedBatches, b: int, rows: np.ndarray) -> bytes:
    """A magic 0/1 entry rebuilt with its kept messages (same magic, codec and timestamp type)."""
    h = d.header[b]
    kept = set(d.records.offset[rows].tolist())
    keep = [r for r in d.legacy_records[b] if r.offset in kept]
    attrs = int(h["attributes"])
    return build_legacy_entry(keep, magic=int(h["magic"]), compression=COMPRESSION_NAMES[attrs & COMPRESSION_MASK],
                              log_append_time=int(h["max_timestamp"]) if attrs & TIMESTAMP_TYPE_BIT else None)

"""RecordBatch: a zero-copy view over one magic 2 batch, and in-place header edits."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import numpy as np

from logstore.errors import CorruptRecordError, InvalidRecordError
from logstore.records import _kernels
from logstore.records.arrow import columns_to_table
from logstore.records.columns import RecordColumns
from logstore.records.compression import (
    COMPRESSION_NAMES,
    DEFAULT_MAX_INFLATED_BYTES,
    NONE,
    decompress,
)
from logstore.records.crc import crc32c
from logstore.records.header import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_BIT,
    CRC_OFFSET,
    DELETE_HORIZON_BIT,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    MIN_V2_BATCH_LENGTH,
    NO_SEQUENCE,
    PARTITION_LEADER_EPOCH_OFFSET,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    V2_HEADER_SIZE,
    BatchHeader,
    read_batch_header,
)
from logstore.records.header import INT32_MAX as _INT32_MAX
from logstore.records.record import Record

TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")
_ZERO_OFFSET = np.zeros(1, np.int32)
_NO_BYTES = np.empty(0, np.uint8)
_NO_NULLS = np.empty(0, np.bool_)


def _slices(data: np.ndarray, offsets: np.ndarray, null: np.ndarray) -> list:
    """Python bytes per element of an Arrow-style (data, offsets, null flags) column."""
    raw = data.tobytes()
    bounds = offsets.tolist()
    items = [raw[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    if null.any():
        for i in np.flatnonzero(null).tolist():
            items[i] = None
    return items


def byte_view(buffer) -> memoryview:
    """A flat unsigned-byte memoryview over any buffer (bytes, bytearray, mmap, numpy)."""
    view = memoryview(buffer)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


class RecordBatch:
    """Zero-copy view over the batch at ``buffer[position:]``: header fields as attributes.

    Magic 0/1 entries are LegacyRecordBatch (a subclass); memory_records.read_batch picks by magic.
    Raises CorruptRecordError when the header cannot be parsed or the entry runs past the buffer.
    """

    __slots__ = ("buffer", "position", "view", "header", "_columns")

    def __init__(self, buffer, position: int = 0):
        view = byte_view(buffer)
        header = read_batch_header(view, position)
        if header.magic < 2 and type(self) is RecordBatch:
            raise InvalidRecordError(f"the magic {header.magic} entry at position {position} is read "
                                     "by read_batch, not RecordBatch")
        end = position + header.batch_length + LOG_OVERHEAD
        if end > len(view):
            raise CorruptRecordError(
                f"batch of {end - position} bytes runs past the end of a {len(view)}-byte buffer",
                position=position)
        self.buffer = buffer
        self.position = position
        self.view = view[position:end]
        self.header = header
        self._columns = None

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(base_offset={self.base_offset}, last_offset={self.last_offset}, "
                f"magic={self.magic}, records={self.record_count}, compression={self.compression!r}, "
                f"size={self.size_in_bytes})")

    def __bytes__(self) -> bytes:
        return bytes(self.view)

    # -- header fields -------------------------------------------------------------------
    @property
    def base_offset(self) -> int:
        """Offset of the first record (the batch's baseOffset field)."""
        return self.header.base_offset

    @property
    def last_offset(self) -> int:
        """Offset of the last record (also for empty batches, from lastOffsetDelta)."""
        return self.header.base_offset + self.header.last_offset_delta

    @property
    def next_offset(self) -> int:
        """Offset after the last record."""
        return self.last_offset + 1

    @property
    def size_in_bytes(self) -> int:
        """Total bytes of the batch including the offset and length fields."""
        return self.header.batch_length + LOG_OVERHEAD

    @property
    def batch_length(self) -> int:
        """The batchLength field: size_in_bytes - 12."""
        return self.header.batch_length

    @property
    def partition_leader_epoch(self) -> int:
        """Leader epoch stamped by the leader on append (-1 when unset)."""
        return self.header.partition_leader_epoch

    @property
    def magic(self) -> int:
        """Format version: 2, or 0/1 for legacy messages."""
        return self.header.magic

    @property
    def crc(self) -> int:
        """The stored checksum (CRC-32C for magic 2, CRC-32 for magic 0/1)."""
        return self.header.crc

    @property
    def attributes(self) -> int:
        """The raw attributes field."""
        return self.header.attributes

    @property
    def last_offset_delta(self) -> int:
        """last_offset - base_offset."""
        return self.header.last_offset_delta

    @property
    def compression(self) -> str:
        """'none', 'gzip', 'snappy', 'lz4' or 'zstd'; CorruptRecordError for codes 5-7."""
        code = self.header.attributes & COMPRESSION_MASK
        if code >= len(COMPRESSION_NAMES):
            raise CorruptRecordError(f"unknown compression codec {code}", position=self.position)
        return COMPRESSION_NAMES[code]

    @property
    def timestamp_type(self) -> str:
        """'CreateTime' or 'LogAppendTime'."""
        return TIMESTAMP_TYPES[bool(self.header.attributes & TIMESTAMP_TYPE_BIT)]

    @property
    def base_timestamp(self) -> int:
        """The baseTimestamp field (the delete horizon when delete_horizon_ms is set)."""
        return self.header.base_timestamp

    @property
    def max_timestamp(self) -> int:
        """Largest record timestamp; with LogAppendTime, the append time."""
        return self.header.max_timestamp

    @property
    def producer_id(self) -> int:
        """Producer id (-1 when not idempotent)."""
        return self.header.producer_id

    @property
    def producer_epoch(self) -> int:
        """Producer epoch (-1 when not idempotent)."""
        return self.header.producer_epoch

    @property
    def base_sequence(self) -> int:
        """Sequence of the first record (-1 when not idempotent)."""
        return self.header.base_sequence

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record, wrapping past int32 max like Kafka (-1 when unset)."""
        base = self.header.base_sequence
        if base == NO_SEQUENCE:
            return NO_SEQUENCE
        delta = self.header.last_offset_delta
        if base > _INT32_MAX - delta:
            return delta - (_INT32_MAX - base) - 1
        return base + delta

    @property
    def record_count(self) -> int:
        """The recordsCount field."""
        return self.header.record_count

    @property
    def is_transactional(self) -> bool:
        """True when the batch belongs to a transaction."""
        return bool(self.header.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        """True for a control batch (transaction COMMIT/ABORT markers)."""
        return bool(self.header.attributes & CONTROL_BIT)

    @property
    def delete_horizon_ms(self) -> int | None:
        """The delete horizon set by the log cleaner, or None when unset."""
        if self.header.attributes & DELETE_HORIZON_BIT:
            return self.header.base_timestamp
        return None

    # -- validation ----------------------------------------------------------------------
    def compute_crc(self) -> int:
        """CRC-32C of the bytes the stored crc covers."""
        return crc32c(self.view[ATTRIBUTES_OFFSET:])

    def validate(self, *, deep: bool = False, max_inflated_bytes: int = DEFAULT_MAX_INFLATED_BYTES) -> None:
        """Raise CorruptRecordError unless the CRC and header structure are sound.

        With ``deep``, also decompress and walk every record.
        """
        check_batch(self.view, self.header, self.position)
        if deep:
            self.columns(max_inflated_bytes=max_inflated_bytes)

    def is_valid(self) -> bool:
        """True when validate() passes (CRC and header structure; records are not walked)."""
        try:
            self.validate()
        except CorruptRecordError:
            return False
        return True

    # -- records -------------------------------------------------------------------------
    def records_bytes(self, *, max_inflated_bytes: int = DEFAULT_MAX_INFLATED_BYTES):
        """The uncompressed records section (a memoryview when uncompressed, else bytes)."""
        section = self.view[V2_HEADER_SIZE:]
        code = self.header.attributes & COMPRESSION_MASK
        if code == NONE:
            return section
        if code >= len(COMPRESSION_NAMES):
            raise CorruptRecordError(f"unknown compression codec {code}", position=self.position)
        return decompress(code, section, limit=max_inflated_bytes, position=self.position + V2_HEADER_SIZE)

    def columns(self, *, max_inflated_bytes: int = DEFAULT_MAX_INFLATED_BYTES) -> RecordColumns:
        """Decode every record into numpy columns (cached); CorruptRecordError on bad bytes."""
        if self._columns is not None:
            return self._columns
        header = self.header
        count = header.record_count
        body = self.records_bytes(max_inflated_bytes=max_inflated_bytes)
        data = np.frombuffer(body, dtype=np.uint8)
        pos = self.position + V2_HEADER_SIZE
        if count < 0 or count > data.size // _kernels.MIN_RECORD_SIZE:
            raise CorruptRecordError(
                f"record count {count} cannot fit in {data.size} record bytes", position=self.position)
        status, err, total_headers, arrays = _kernels.decode_records(data, 0, data.size, count)
        if status != _kernels.OK:
            where = pos + err if header.attributes & COMPRESSION_MASK == NONE else pos
            raise CorruptRecordError(
                f"{_kernels.STATUS_MESSAGES[status]} (record byte {err})", position=where)
        (offset_delta, timestamp_delta, key_offsets, key_data, key_null, value_offsets,
         value_data, value_null, headers_pos, headers_count) = arrays
        if header.attributes & TIMESTAMP_TYPE_BIT:
            timestamp = np.full(count, header.max_timestamp, dtype=np.int64)
        else:
            # int64 wrap-around matches Kafka's long arithmetic for extreme deltas.
            timestamp = timestamp_delta + np.int64(header.base_timestamp)
        offset = offset_delta + np.int64(header.base_offset)
        if total_headers:
            headers = _kernels.decode_headers(data, headers_pos, headers_count, total_headers)
        else:
            headers = (np.zeros(count + 1, np.int32), _ZERO_OFFSET, _NO_BYTES, _ZERO_OFFSET,
                       _NO_BYTES, _NO_NULLS)
        self._columns = RecordColumns(
            offset, timestamp, (key_data[:key_offsets[-1]], key_offsets, key_null),
            (value_data[:value_offsets[-1]], value_offsets, value_null), headers)
        return self._columns

    def records(self, *, max_inflated_bytes: int = DEFAULT_MAX_INFLATED_BYTES) -> list[Record]:
        """Decode (and decompress) every record; CorruptRecordError on bad bytes."""
        cols = self.columns(max_inflated_bytes=max_inflated_bytes)
        keys = _slices(cols.key_data, cols.key_offsets, cols.key_null)
        values = _slices(cols.value_data, cols.value_offsets, cols.value_null)
        if cols.header_key_offsets.size > 1:
            headers = _headers_per_record(cols, self.position)
        else:
            headers = ((),) * cols.offset.size
        return list(map(Record, cols.offset.tolist(), cols.timestamp.tolist(), keys, values, headers))

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def to_arrow(self, *, max_inflated_bytes: int = DEFAULT_MAX_INFLATED_BYTES):
        """Decode the records into a pyarrow.Table (offset, timestamp, key, value, headers)."""
        return columns_to_table(self.columns(max_inflated_bytes=max_inflated_bytes), self.position)


def _headers_per_record(cols: RecordColumns, position: int) -> list:
    raw_keys = _slices(cols.header_key_data, cols.header_key_offsets, np.zeros(0, np.bool_))
    try:
        keys = [k.decode() for k in raw_keys]
    except UnicodeDecodeError:
        raise CorruptRecordError("header key is not UTF-8", position=position) from None
    values = _slices(cols.header_value_data, cols.header_value_offsets, cols.header_value_null)
    pairs = list(zip(keys, values, strict=True))
    bounds = cols.headers_offsets.tolist()
    return [tuple(pairs[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]


def check_batch(view: memoryview, header: BatchHeader, position: int) -> None:
    """Raise CorruptRecordError unless the magic 2 batch in `view` (exactly its bytes; `header`
    parsed from them; `position` names it in errors) has a matching CRC and a sound header.
    RecordBatch.validate without the object. The leader's append path makes the same checks in
    logstore._kernels.validate_batches (tests/log/test_log_validator_model.py holds them equal)."""
    if header.magic != 2 or header.batch_length < MIN_V2_BATCH_LENGTH:
        raise CorruptRecordError("not a magic 2 batch", position=position)
    stored = header.crc
    computed = crc32c(view[ATTRIBUTES_OFFSET:])
    if stored != computed:
        raise CorruptRecordError(
            f"batch CRC-32C mismatch: stored {stored:#010x}, computed {computed:#010x}", position=position)
    code = header.attributes & COMPRESSION_MASK
    if code >= len(COMPRESSION_NAMES):
        raise CorruptRecordError(f"unknown compression codec {code}", position=position)
    if header.record_count < 0 or header.last_offset_delta < 0:
        raise CorruptRecordError("negative record count or last offset delta", position=position)
    body = header.batch_length + LOG_OVERHEAD - V2_HEADER_SIZE
    if code == NONE and header.record_count > body // _kernels.MIN_RECORD_SIZE:
        raise CorruptRecordError(
            f"record count {header.record_count} cannot fit in {body} bytes", position=position)


def set_base_offset_and_epoch(buffer, position: int, base_offset: int, leader_epoch: int) -> None:
    """Overwrite a magic 2 batch's baseOffset and partitionLeaderEpoch in place (both outside
    the CRC). Raises InvalidRecordError for other magics or a read-only buffer."""
    if not 0 <= position <= len(buffer) - V2_HEADER_SIZE or buffer[position + MAGIC_OFFSET] != 2:
        raise InvalidRecordError("only magic 2 batches carry a base offset and leader epoch")
    try:
        _INT64.pack_into(buffer, position, base_offset)
        _INT32.pack_into(buffer, position + PARTITION_LEADER_EPOCH_OFFSET, leader_epoch)
    except (TypeError, struct.error) as exc:
        raise InvalidRecordError(f"cannot rewrite batch header: {exc}") from None


def set_log_append_time(buffer, position: int, timestamp: int) -> None:
    """Mark a magic 2 batch LogAppendTime with ``timestamp`` as maxTimestamp and recompute its
    CRC, in place (what a leader does with message.timestamp.type=LogAppendTime)."""
    header = read_batch_header(buffer, position)
    if header.magic != 2:
        raise InvalidRecordError("only magic 2 batches can be stamped with a log append time")
    end = position + header.batch_length + LOG_OVERHEAD
    try:
        _INT16.pack_into(buffer, position + ATTRIBUTES_OFFSET, header.attributes | TIMESTAMP_TYPE_BIT)
        _INT64.pack_into(buffer, position + MAX_TIMESTAMP_OFFSET, timestamp)
        crc = crc32c(memoryview(buffer).cast("B")[position + ATTRIBUTES_OFFSET:end])
        _UINT32.pack_into(buffer, position + CRC_OFFSET, crc)
    except (TypeError, struct.error) as exc:
        raise InvalidRecordError(f"cannot rewrite batch header: {exc}") from None

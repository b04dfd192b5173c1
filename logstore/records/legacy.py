"""Legacy magic 0/1 messages (docs/FORMAT.md "Legacy messages"): read through RecordBatch's
interface, plus a small writer used to build test inputs."""

from __future__ import annotations

from logstore.errors import CorruptRecordError, InvalidRecordError
from logstore.records.batch import RecordBatch
from logstore.records.columns import RecordColumns
from logstore.records.compression import (
    DEFAULT_MAX_INFLATED_BYTES,
    LZ4,
    LZ4_MAGIC,
    NONE,
    ZSTD,
    compress,
    compression_code,
    decompress,
    lz4_descriptor_checksum,
)
from logstore.records.crc import crc32
from logstore.records.header import (
    COMPRESSION_MASK,
    LEGACY_LENGTH,
    LEGACY_MAGIC_OFFSET,
    LEGACY_V0_HEADER,
    LEGACY_V1_HEADER,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_BIT,
    read_batch_header,
)
from logstore.records.record import Record

_LZ4_CONTENT_SIZE_FLAG = 0x08
_LZ4_DICT_ID_FLAG = 0x01


def _fix_old_kafka_lz4(data: bytes) -> bytes:
    """Kafka before 0.10 (magic 0) wrote the LZ4 descriptor checksum over the wrong bytes;
    recompute it so a standard frame reader accepts the frame."""
    if len(data) < 7 or data[:4] != LZ4_MAGIC:
        return data
    flg = data[4]
    size = 2 + (8 if flg & _LZ4_CONTENT_SIZE_FLAG else 0) + (4 if flg & _LZ4_DICT_ID_FLAG else 0)
    if len(data) < 4 + size + 1:
        return data
    fixed = bytearray(data)
    fixed[4 + size] = lz4_descriptor_checksum(bytes(data[4:4 + size]))
    return bytes(fixed)


def _parse_message(view: memoryview, pos: int, base: int) -> tuple:
    """(offset, magic, attributes, timestamp, key, value, next pos, crc) of the entry at ``pos``;
    checks its CRC-32 and that key and value fill it exactly."""
    header = read_batch_header(view, pos)
    end = pos + header.batch_length + LOG_OVERHEAD
    if end > len(view):
        raise CorruptRecordError("message runs past the end of its message set", position=base + pos)
    computed = crc32(view[pos + LEGACY_MAGIC_OFFSET:end])
    if computed != header.crc:
        raise CorruptRecordError(
            f"message CRC-32 mismatch: stored {header.crc:#010x}, computed {computed:#010x}",
            position=base + pos)
    p = pos + (LEGACY_V1_HEADER.size if header.magic == 1 else LEGACY_V0_HEADER.size)
    fields = []
    for _ in range(2):
        if p + LEGACY_LENGTH.size > end:
            raise CorruptRecordError("truncated message", position=base + pos)
        (length,) = LEGACY_LENGTH.unpack_from(view, p)
        p += LEGACY_LENGTH.size
        if length < -1 or length > end - p:
            raise CorruptRecordError(f"message field length {length} out of range", position=base + pos)
        fields.append(None if length < 0 else bytes(view[p:p + length]))
        p += max(length, 0)
    if p != end:
        raise CorruptRecordError("message key and value do not fill the message", position=base + pos)
    return (header.base_offset, header.magic, header.attributes, header.base_timestamp,
            fields[0], fields[1], end, header.crc)


class LegacyRecordBatch(RecordBatch):
    """A magic 0/1 log entry (a single message or a compressed wrapper) seen as a batch."""

    __slots__ = ("_inner", "_crcs")

    def __init__(self, buffer, position: int = 0):
        super().__init__(buffer, position)
        self._inner = None
        self._crcs: list[int] = []

    def _records(self, limit: int = DEFAULT_MAX_INFLATED_BYTES) -> list[Record]:
        """Inner records with absolute offsets (decompressing a wrapper); cached."""
        if self._inner is not None:
            return self._inner
        offset, magic, attributes, timestamp, key, value, _, crc = _parse_message(self.view, 0, self.position)
        log_append = magic == 1 and attributes & TIMESTAMP_TYPE_BIT
        code = attributes & COMPRESSION_MASK
        if code == NONE:
            self._inner = [Record(offset, timestamp, key, value)]
            self._crcs = [crc]
            return self._inner
        if code >= ZSTD:
            raise CorruptRecordError(f"compression codec {code} is not allowed with magic {magic}",
                                     position=self.position)
        if value is None:
            raise CorruptRecordError("compressed wrapper message without a value", position=self.position)
        if code == LZ4 and magic == 0:
            value = _fix_old_kafka_lz4(value)
        inner_bytes = memoryview(decompress(code, value, limit=limit, position=self.position))
        inner = []
        pos = 0
        while pos < len(inner_bytes):
            entry = _parse_message(inner_bytes, pos, self.position)
            if entry[2] & COMPRESSION_MASK != NONE:
                raise CorruptRecordError("nested compressed message", position=self.position)
            if entry[1] != magic:
                raise CorruptRecordError("inner message magic differs from its wrapper",
                                         position=self.position)
            inner.append(entry)
            pos = entry[6]
        if not inner:
            raise CorruptRecordError("compressed wrapper message holds no messages", position=self.position)
        # magic 1 inner offsets are relative; the wrapper carries the last absolute offset.
        shift = offset - inner[-1][0] if magic == 1 else 0
        self._inner = [Record(e[0] + shift, timestamp if log_append else e[3], e[4], e[5])
                       for e in inner]
        self._crcs = [e[7] for e in inner]
        return self._inner

    @property
    def base_offset(self) -> int:
        """Offset of the first message (decompresses a wrapper)."""
        if self.header.attributes & COMPRESSION_MASK == NONE:
            return self.header.base_offset
        return self._records()[0].offset

    @property
    def last_offset(self) -> int:
        """Offset of the last message: the entry's offset field."""
        return self.header.base_offset

    @property
    def last_offset_delta(self) -> int:
        """last_offset - base_offset."""
        return self.last_offset - self.base_offset

    @property
    def record_count(self) -> int:
        """Number of messages (decompresses a wrapper)."""
        if self.header.attributes & COMPRESSION_MASK == NONE:
            return 1
        return len(self._records())

    @property
    def timestamp_type(self) -> str:
        """'LogAppendTime' for magic 1 with the attribute bit set, else 'CreateTime'."""
        if self.header.magic == 1 and self.header.attributes & TIMESTAMP_TYPE_BIT:
            return "LogAppendTime"
        return "CreateTime"

    @property
    def delete_horizon_ms(self) -> None:
        """Always None: legacy messages have no delete horizon."""
        return None

    @property
    def is_transactional(self) -> bool:
        """Always False for legacy messages."""
        return False

    @property
    def is_control(self) -> bool:
        """Always False for legacy messages."""
        return False

    def compute_crc(self) -> int:
        """CRC-32 of the bytes the stored crc covers (magic to end)."""
        return crc32(self.view[LEGACY_MAGIC_OFFSET:])

    def validate(self, *, deep: bool = False, max_inflated_bytes: int = DEFAULT_MAX_INFLATED_BYTES) -> None:
        """Raise CorruptRecordError unless the CRC-32 and layout are sound; with ``deep``, also
        decompress and check every inner message."""
        code = self.header.attributes & COMPRESSION_MASK
        if code >= ZSTD:
            raise CorruptRecordError(f"compression codec {code} is not allowed with magic {self.magic}",
                                     position=self.position)
        _parse_message(self.view, 0, self.position)
        if deep:
            self._records(max_inflated_bytes)

    def records(self, *, max_inflated_bytes: int = DEFAULT_MAX_INFLATED_BYTES) -> list[Record]:
        """Decode (and decompress) every message; CorruptRecordError on bad bytes."""
        return list(self._records(max_inflated_bytes))

    def message_crcs(self, *, max_inflated_bytes: int = DEFAULT_MAX_INFLATED_BYTES) -> list[int]:
        """The stored CRC-32 of each message, in record order (a wrapper's inner messages, each
        checked while decoding): what Kafka's dump prints as a legacy record's crc."""
        self._records(max_inflated_bytes)
        return list(self._crcs)

    def columns(self, *, max_inflated_bytes: int = DEFAULT_MAX_INFLATED_BYTES) -> RecordColumns:
        """The messages as numpy columns (legacy entries are rare, so built from records())."""
        return RecordColumns.from_records(self._records(max_inflated_bytes))


def _encode_message(offset: int, magic: int, attributes: int, timestamp: int,
                    key: bytes | None, value: bytes | None) -> bytes:
    parts = [bytes([magic, attributes & 0xFF])]
    if magic == 1:
        parts.append(timestamp.to_bytes(8, "big", signed=True))
    for field in (key, value):
        parts.append(LEGACY_LENGTH.pack(-1 if field is None else len(field)))
        if field:
            parts.append(bytes(field))
    body = b"".join(parts)
    message = crc32(body).to_bytes(4, "big") + body
    return offset.to_bytes(8, "big", signed=True) + LEGACY_LENGTH.pack(len(message)) + message


def build_legacy_entry(records: list[Record], *, magic: int, compression: str = "none",
                       log_append_time: int | None = None) -> bytes:
    """Build one magic 0/1 log entry: a single message, or a compressed wrapper holding every
    record (magic 1 inner offsets relative). For tests and compatibility fixtures."""
    if magic not in (0, 1):
        raise InvalidRecordError("legacy magic is 0 or 1")
    code = compression_code(compression)
    if code >= ZSTD or any(r.headers for r in records) or not records:
        raise InvalidRecordError("legacy messages: at least one record, no headers, no zstd")
    ts_attr = TIMESTAMP_TYPE_BIT if magic == 1 and log_append_time is not None else 0

    def stamp(record: Record) -> int:
        if magic == 0:
            return NO_TIMESTAMP
        return log_append_time if log_append_time is not None else record.timestamp

    if code == NONE:
        if len(records) != 1:
            raise InvalidRecordError("an uncompressed legacy entry holds exactly one record")
        r = records[0]
        return _encode_message(r.offset, magic, ts_attr, stamp(r), r.key, r.value)
    first = records[0].offset
    inner = b"".join(_encode_message(r.offset - first if magic == 1 else r.offset, magic, 0,
                                     stamp(r), r.key, r.value) for r in records)
    wrapper_ts = log_append_time if log_append_time is not None else max(stamp(r) for r in records)
    return _encode_message(records[-1].offset, magic, code | ts_attr, wrapper_ts, None,
                           compress(code, inner))

"""Batch header layout (docs/FORMAT.md "Record batch, magic 2" and "Legacy messages") and its cheap parse."""

from __future__ import annotations

import struct
from typing import NamedTuple

import numpy as np

# Kafka's RecordBatch.NO_TIMESTAMP, declared by the time index (the lower layer) that shares it.
from index.time_index import NO_TIMESTAMP
from logstore.errors import CorruptRecordError

# Every log entry of any magic starts with int64 offset, int32 size; magic is at byte 16.
LOG_OVERHEAD = 12
SIZE_OFFSET = 8
SIZE_FIELD = struct.Struct(">i")
MAGIC_OFFSET = 16
# Kafka's FileLogInputStream reads no entry shorter than its offset, size and magic.
HEADER_SIZE_UP_TO_MAGIC = MAGIC_OFFSET + 1

# docs/FORMAT.md "Record batch, magic 2": the 61-byte header, declared once as (field, struct
# code) and offered both as a struct (one header) and as a packed numpy dtype (many headers).
V2_HEADER_FIELDS = (
    ("base_offset", "q"), ("batch_length", "i"), ("partition_leader_epoch", "i"), ("magic", "b"),
    ("crc", "I"), ("attributes", "h"), ("last_offset_delta", "i"), ("base_timestamp", "q"),
    ("max_timestamp", "q"), ("producer_id", "q"), ("producer_epoch", "h"), ("base_sequence", "i"),
    ("record_count", "i"),
)
V2_HEADER = struct.Struct(">" + "".join(code for _, code in V2_HEADER_FIELDS))
V2_HEADER_DTYPE = np.dtype([(name, ">" + code) for name, code in V2_HEADER_FIELDS])
V2_HEADER_SIZE = V2_HEADER.size  # 61
_FIELD_OFFSETS = {name: V2_HEADER_DTYPE.fields[name][1] for name, _ in V2_HEADER_FIELDS}
PARTITION_LEADER_EPOCH_OFFSET = _FIELD_OFFSETS["partition_leader_epoch"]  # 12
CRC_OFFSET = _FIELD_OFFSETS["crc"]  # 17
ATTRIBUTES_OFFSET = _FIELD_OFFSETS["attributes"]  # 21: the CRC covers [ATTRIBUTES_OFFSET, end)
LAST_OFFSET_DELTA_OFFSET = _FIELD_OFFSETS["last_offset_delta"]  # 23
BASE_TIMESTAMP_OFFSET = _FIELD_OFFSETS["base_timestamp"]  # 27
MAX_TIMESTAMP_OFFSET = _FIELD_OFFSETS["max_timestamp"]  # 35
PRODUCER_ID_OFFSET = _FIELD_OFFSETS["producer_id"]  # 43
PRODUCER_EPOCH_OFFSET = _FIELD_OFFSETS["producer_epoch"]  # 51
BASE_SEQUENCE_OFFSET = _FIELD_OFFSETS["base_sequence"]  # 53
RECORDS_COUNT_OFFSET = _FIELD_OFFSETS["record_count"]  # 57
MIN_V2_BATCH_LENGTH = V2_HEADER_SIZE - LOG_OVERHEAD

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40

# magic 0/1 entry: offset, size, crc (CRC-32 over [magic, end)), magic, attributes,
# [magic 1: timestamp], key length + key, value length + value.
LEGACY_V0_HEADER = struct.Struct(">qiIbb")
LEGACY_V1_HEADER = struct.Struct(">qiIbbq")
LEGACY_CRC_OFFSET = 12
LEGACY_MAGIC_OFFSET = 16
LEGACY_ATTRIBUTES_OFFSET = 17
LEGACY_TIMESTAMP_OFFSET = 18
LEGACY_LENGTH = struct.Struct(">i")
# Smallest message (after offset and size): crc, magic, attributes, [timestamp], key and
# value lengths.
LEGACY_MIN_MESSAGE = {0: 4 + 1 + 1 + 4 + 4, 1: 4 + 1 + 1 + 8 + 4 + 4}
# Kafka's LegacyRecord.RECORD_OVERHEAD_V0: no entry's size field, of any magic, is smaller.
RECORD_OVERHEAD_V0 = LEGACY_MIN_MESSAGE[0]

INT32_MAX = 2**31 - 1  # Kafka's Integer.MAX_VALUE: int32 sizes, sequences, offset deltas
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1


class BatchHeader(NamedTuple):
    """Header fields of one log entry (V2_HEADER_FIELDS, in order); for magic 0/1 the missing v2 fields hold Kafka's "none"
    values, record_count is 1 and base_offset is the entry's offset field (for a compressed
    wrapper, the offset of its last inner message)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size_in_bytes(self) -> int:
        """Total bytes of the entry, including the offset and length fields."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        """Offset of the last record."""
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """Offset after the last record."""
        return self.base_offset + self.last_offset_delta + 1


def read_batch_header(buffer, position: int = 0) -> BatchHeader:
    """Parse the header of the batch (any magic) at ``position`` without checking its CRC.

    Raises CorruptRecordError for a short buffer, an unknown magic or a length field below
    the format's minimum; a length past the end of the buffer is not checked here.
    """
    remaining = len(buffer) - position
    if position < 0 or remaining < MAGIC_OFFSET + 1:
        raise CorruptRecordError("truncated batch header", position=position)
    magic = buffer[position + MAGIC_OFFSET]
    if magic == 2:
        if remaining < V2_HEADER_SIZE:
            raise CorruptRecordError("truncated batch header", position=position)
        header = BatchHeader._make(V2_HEADER.unpack_from(buffer, position))
        if header.batch_length < MIN_V2_BATCH_LENGTH:
            raise CorruptRecordError(
                f"batch length {header.batch_length} below the minimum {MIN_V2_BATCH_LENGTH}",
                position=position)
        return header
    if magic in (0, 1):
        layout = LEGACY_V1_HEADER if magic == 1 else LEGACY_V0_HEADER
        if remaining < layout.size:
            raise CorruptRecordError("truncated message header", position=position)
        fields = layout.unpack_from(buffer, position)
        offset, size, crc, _, attributes = fields[:5]
        if size < LEGACY_MIN_MESSAGE[magic]:
            raise CorruptRecordError(f"message size {size} below the minimum", position=position)
        timestamp = fields[5] if magic == 1 else NO_TIMESTAMP
        return BatchHeader(offset, size, NO_PARTITION_LEADER_EPOCH, magic, crc, attributes, 0,
                           timestamp, timestamp, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE, 1)
    raise CorruptRecordError(f"unknown magic {magic}", position=position)

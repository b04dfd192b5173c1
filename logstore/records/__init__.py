"""Kafka record batches, byte for byte: Record, RecordBatch (magic 2, legacy 0/1 read),
read_batch and iter_batches (any magic), builders (per record and columnar), Arrow decoding, control records,
compression and checksums. Pure: no files, no clocks."""

from logstore.records.arrow import RECORD_SCHEMA
from logstore.records.batch import RecordBatch, set_base_offset_and_epoch, set_log_append_time
from logstore.records.builder import HEADERS_TYPE, build_batch, build_batch_columnar
from logstore.records.columns import RecordColumns
from logstore.records.compression import (
    CODECS,
    COMPRESSION_NAMES,
    DEFAULT_MAX_INFLATED_BYTES,
    Codec,
    UnknownCompressionError,
    codec_by_code,
    codec_by_name,
)
from logstore.records.control import (
    ControlRecord,
    build_control_batch,
    parse_control_record,
)
from logstore.records.crc import crc32, crc32c
from logstore.records.header import BatchHeader, read_batch_header
from logstore.records.legacy import LegacyRecordBatch, build_legacy_entry
from logstore.records.memory_records import (
    BatchIterator,
    batches_to_arrow,
    iter_batches,
    read_batch,
)
from logstore.records.record import Record
from logstore.records.varint import decode_varint, encode_varint, size_of_varint

__all__ = [
    "CODECS",
    "Codec",
    "UnknownCompressionError",
    "codec_by_code",
    "codec_by_name",
    "COMPRESSION_NAMES",
    "DEFAULT_MAX_INFLATED_BYTES",
    "HEADERS_TYPE",
    "RECORD_SCHEMA",
    "ControlRecord",
    "LegacyRecordBatch",
    "BatchHeader",
    "BatchIterator",
    "Record",
    "RecordBatch",
    "RecordColumns",
    "batches_to_arrow",
    "build_batch",
    "build_batch_columnar",
    "build_control_batch",
    "build_legacy_entry",
    "crc32",
    "crc32c",
    "decode_varint",
    "encode_varint",
    "iter_batches",
    "parse_control_record",
    "read_batch",
    "read_batch_header",
    "set_base_offset_and_epoch",
    "set_log_append_time",
    "size_of_varint",
]

"""Kafka record batches, byte for byte: Record, RecordBatch (magic 2, legacy 0/1 read),
iter_batches, builders (per record and columnar), Arrow decoding, control records,
compression and checksums. Pure: no files, no clocks."""

from logstore.records.batch import (
    BatchIterator,
    RecordBatch,
    RecordColumns,
    iter_batches,
    set_base_offset_and_epoch,
    set_log_append_time,
)
from logstore.records.builder import HEADERS_TYPE, build_batch, build_batch_columnar
from logstore.records.compression import COMPRESSION_NAMES, DEFAULT_MAX_INFLATED_BYTES
from logstore.records.crc import crc32, crc32c
from logstore.records.header import BatchHeader, read_batch_header
from logstore.records.record import Record

__all__ = [
    "COMPRESSION_NAMES",
    "DEFAULT_MAX_INFLATED_BYTES",
    "HEADERS_TYPE",
    "BatchHeader",
    "BatchIterator",
    "Record",
    "RecordBatch",
    "RecordColumns",
    "build_batch",
    "build_batch_columnar",
    "crc32",
    "crc32c",
    "iter_batches",
    "read_batch_header",
    "set_base_offset_and_epoch",
    "set_log_append_time",
]

"""logstore: an embeddable, on-disk log storage engine byte-compatible with Kafka's log layer."""

from logstore.config import LogConfig
from logstore.errors import (
    CorruptIndexError,
    CorruptRecordError,
    InvalidConfigError,
    InvalidRecordError,
    LogstoreError,
    OffsetOutOfRangeError,
)
from logstore.records import Record

__all__ = [
    "CorruptIndexError",
    "CorruptRecordError",
    "InvalidConfigError",
    "InvalidRecordError",
    "LogConfig",
    "LogstoreError",
    "OffsetOutOfRangeError",
    "Record",
]

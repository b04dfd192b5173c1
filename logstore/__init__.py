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
from logstore.log import Log
from logstore.log_results import AppendInfo, FetchResult
from logstore.manager import LogManager
from logstore.records import Record

__all__ = [
    "AppendInfo",
    "CorruptIndexError",
    "CorruptRecordError",
    "InvalidConfigError",
    "FetchResult",
    "InvalidRecordError",
    "Log",
    "LogConfig",
    "LogManager",
    "LogstoreError",
    "OffsetOutOfRangeError",
    "Record",
]

"""ListOffsets for one log (Kafka's ListOffsetsRequest special timestamps and
UnifiedLog.fetchOffsetByTimestamp): the offset, timestamp and leader epoch that answer a
timestamp query."""

from __future__ import annotations

from logstore.epoch import LeaderEpochFileCache
from logstore.file_records import TimestampAndOffset
from logstore.local_log import LocalLog
from logstore.records.header import NO_TIMESTAMP

# ListOffsets special timestamps (Kafka's ListOffsetsRequest).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4


def offset_for_timestamp(timestamp: int, log_start_offset: int, log_end_offset: int,
                         epochs: LeaderEpochFileCache, local: LocalLog) -> TimestampAndOffset | None:
    """The first record with timestamp >= `timestamp`, or for a special timestamp the log start
    (EARLIEST_*), the log end (LATEST) or the first record with the largest timestamp (MAX).
    None when no record qualifies; ValueError for any other negative timestamp."""
    if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        return TimestampAndOffset(NO_TIMESTAMP, log_start_offset, epochs.epoch_for_offset(log_start_offset))
    if timestamp == LATEST_TIMESTAMP:
        return TimestampAndOffset(NO_TIMESTAMP, log_end_offset, epochs.latest_epoch())
    if timestamp == MAX_TIMESTAMP:
        return local.max_timestamp_offset()
    if timestamp < 0:
        raise ValueError(f"unsupported special timestamp {timestamp}")
    return local.offset_for_timestamp(timestamp, log_start_offset)

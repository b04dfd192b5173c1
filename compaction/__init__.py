"""The log cleaner: keyed offset map (mmh3), cleanable-range selection and crash-safe segment rewrite."""

from compaction.cleaner import CLEANER_OFFSET_CHECKPOINT, Cleaner, CleanResult
from compaction.log_cleaner import LogCleaner
from compaction.offset_map import OffsetMap, hash_key
from compaction.plan import (
    BatchColumns,
    CleanerRecordColumns,
    CompactionPlan,
    ProducerLastRecord,
    RangePlan,
    TxnTracker,
    active_producers_from_batches,
    build_offset_map,
    decide,
    plan_compaction,
)
from compaction.selection import (
    CleanableRange,
    CleanerSegmentInfo,
    dirtiest,
    evaluate,
    group_segments_by_size,
)

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "BatchColumns",
    "CleanResult",
    "CleanableRange",
    "Cleaner",
    "CompactionPlan",
    "LogCleaner",
    "OffsetMap",
    "ProducerLastRecord",
    "RangePlan",
    "CleanerRecordColumns",
    "CleanerSegmentInfo",
    "TxnTracker",
    "active_producers_from_batches",
    "build_offset_map",
    "decide",
    "dirtiest",
    "evaluate",
    "group_segments_by_size",
    "hash_key",
    "plan_compaction",
]

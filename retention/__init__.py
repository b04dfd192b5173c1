"""Retention policies (time, size, log start offset) as a pure plan, and the code that applies it."""

from retention.apply import (
    SEGMENT_DELETION,
    apply_retention,
    plan_for_log,
)
from retention.plan import (
    REASON_LOG_START_OFFSET,
    REASON_RETENTION_BYTES,
    REASON_RETENTION_MS,
    REASONS,
    Deletion,
    RetentionPlan,
    SegmentInfo,
    SegmentLike,
    plan_retention,
)

__all__ = [
    "SEGMENT_DELETION",
    "apply_retention",
    "plan_for_log",
    "REASONS",
    "REASON_LOG_START_OFFSET",
    "REASON_RETENTION_BYTES",
    "REASON_RETENTION_MS",
    "Deletion",
    "RetentionPlan",
    "SegmentInfo",
    "SegmentLike",
    "plan_retention",
]

"""Run a retention pass on a live Log: plan it (pure), then act through Log's public methods.

The order is Kafka's (UnifiedLog.deleteOldSegments / deleteSegments): roll first when the
whole log goes, move (and checkpoint) the log start offset, then hand the segments to
``Log.delete_segments``, which renames their files to ``.deleted`` and removes them after
``file.delete.delay.ms``. The pass holds the log's lock (``Log.locked``) throughout.
"""

from __future__ import annotations

from logstore.errors import UnknownTopicConfigError
from logstore.log_like import SegmentedLogLike
from retention.plan import RetentionPlan, plan_retention

#: The reason recorded when retention moves the log start offset (Kafka: SegmentDeletion).
SEGMENT_DELETION = "segment_deletion"


def plan_for_log(log: SegmentedLogLike, *, now_ms: int | None = None) -> RetentionPlan:
    """The plan one retention pass would execute on ``log`` now (changes nothing)."""
    now = log.clock.time_ms() if now_ms is None else now_ms
    return plan_retention(
        log.segments,
        log.config,
        now_ms=now,
        log_start_offset=log.log_start_offset,
        high_watermark=log.high_watermark,
    )


def apply_retention(log: SegmentedLogLike, *, now_ms: int | None = None) -> RetentionPlan:
    """Kafka's deleteOldSegments: delete what retention would delete from ``log`` (rolling
    first when the active segment goes too), atomically under its lock; return what was done.

    ``now_ms`` defaults to the log's clock. Raises UnknownTopicConfigError when the log's
    topic configs are neither stored nor given (nothing is deleted on a default nobody chose),
    ReadOnlyLogError on a read-only log with something to delete.
    """
    if log.config_origin is None:
        raise UnknownTopicConfigError(log.topic, "retention", log.dir)
    with log.locked():
        plan = plan_for_log(log, now_ms=now_ms)
        if plan.roll_active_first:
            log.roll()
            rolled = plan_for_log(log, now_ms=now_ms)
            # Normally the same segments (the reasons may differ: Kafka rolls inside the rule
            # that takes the last segment, so keep the first plan); should they differ, the
            # re-made plan is the one that matches the rolled log.
            if rolled.segments != plan.segments:
                plan = RetentionPlan(rolled.deletions, rolled.new_log_start_offset, rolled.bytes_reclaimed, True)
        if not plan:
            return plan
        # Move the start first so no reader is handed an offset whose segment is going away.
        log.maybe_increment_log_start_offset(plan.new_log_start_offset, SEGMENT_DELETION)
        for reason, segments in plan.by_reason():
            log.delete_segments(segments, reason)
        return plan

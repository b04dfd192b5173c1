"""Run a retention pass on a live Log: plan it (pure), then act through Log's public methods.

The order is Kafka's (UnifiedLog.deleteSegments): roll first when the whole log goes, move
(and checkpoint) the log start offset, then hand the segments to ``Log.delete_segments``,
which renames their files to ``.deleted`` and removes them after ``file.delete.delay.ms``.
``Log.delete_old_segments()`` runs ``apply_retention`` under the log's lock; use it wherever
appends, truncation or the cleaner may run at the same time.
"""

from __future__ import annotations

from typing import Any

from retention.plan import RetentionPlan, plan_retention

#: The reason recorded when retention moves the log start offset (Kafka: SegmentDeletion).
SEGMENT_DELETION = "segment_deletion"
#: The reason recorded when a follower takes its leader's log start offset.
LEADER_OFFSET_INCREMENTED = "leader_offset_incremented"


def plan_for_log(log: Any, *, now_ms: int | None = None) -> RetentionPlan:
    """The plan one retention pass would execute on ``log`` now (changes nothing)."""
    now = log.clock.time_ms() if now_ms is None else now_ms
    return plan_retention(
        log.segments,
        log.config,
        now_ms=now,
        log_start_offset=log.log_start_offset,
        high_watermark=log.high_watermark,
    )


def apply_retention(log: Any, *, now_ms: int | None = None) -> RetentionPlan:
    """Delete the segments Kafka's retention would delete from ``log``; return what was done.

    ``now_ms`` defaults to the log's clock. When the active segment goes too, the log rolls
    first and the plan is re-made on the rolled log, so nothing appended meanwhile is lost.
    Raises ReadOnlyLogError on a read-only log with something to delete.
    """
    plan = plan_for_log(log, now_ms=now_ms)
    if plan.roll_active_first:
        log.roll()
        rolled = plan_for_log(log, now_ms=now_ms)
        # Normally the same segments (the reasons may differ: Kafka rolls inside the rule that
        # takes the last segment, so keep the first plan); if an append raced the roll, the
        # re-made plan is the safe one.
        if rolled.segments != plan.segments:
            plan = RetentionPlan(rolled.deletions, rolled.new_log_start_offset, rolled.bytes_reclaimed, True)
    if not plan:
        return plan
    # Move the start first so no reader is handed an offset whose segment is going away.
    log.maybe_increment_log_start_offset(plan.new_log_start_offset, SEGMENT_DELETION)
    for reason, segments in plan.by_reason():
        log.delete_segments(segments, reason)
    return plan


def follow_leader_log_start_offset(log: Any, leader_log_start_offset: int) -> RetentionPlan:
    """Follower step after a fetch: take the leader's log start offset and, if it moved,
    run this log's retention at once so no segment wholly below it survives the fetch.

    Set the follower's high watermark from the fetch first: the start may not pass it
    (OffsetOutOfRangeError, as in Kafka).
    """
    if log.maybe_increment_log_start_offset(leader_log_start_offset, LEADER_OFFSET_INCREMENTED):
        return log.delete_old_segments()
    return RetentionPlan((), log.log_start_offset, 0, False)

"""retention.plan_retention: Kafka's retention rules pinned case by case, then checked
against a small independent model (a transcription of UnifiedLog.deleteOldSegments over a
mutable list that materialises the rolled segment) on random segment tables and configs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logstore.errors import InvalidConfigError, InvalidSegmentTableError
from retention import (
    REASON_LOG_START_OFFSET,
    REASON_RETENTION_BYTES,
    REASON_RETENTION_MS,
    REASONS,
    RetentionPlan,
    SegmentInfo,
    plan_retention,
)

DAY_MS = 24 * 60 * 60 * 1000
NOW = 10 * DAY_MS


def uniform_log(n_segments: int, records_per_segment: int = 5, record_size: int = 70, timestamp: int = 10):
    """n segments of `records_per_segment` one-record batches, like Kafka's tests build them."""
    return [
        SegmentInfo(i * records_per_segment, (i + 1) * records_per_segment, records_per_segment * record_size, timestamp)
        for i in range(n_segments)
    ]


def bases(segments) -> list[int]:
    return [s.base_offset for s in segments]


# --- pinned Kafka rules (UnifiedLogTest cases and UnifiedLog source) -------------------------


def test_size_rule_deletes_while_the_rest_stays_at_or_above_retention_bytes():
    # UnifiedLogTest.shouldDeleteSizeBasedSegments: 3 segments of 5 records, retention 10 records.
    log = uniform_log(3)
    plan = plan_retention(
        log, {"retention.bytes": 10 * 70, "retention.ms": -1}, now_ms=NOW, log_start_offset=0, high_watermark=15
    )
    assert [(d.segment.base_offset, d.reason) for d in plan.deletions] == [(0, REASON_RETENTION_BYTES)]
    assert plan.new_log_start_offset == 5
    assert plan.bytes_reclaimed == 350
    assert not plan.roll_active_first


def test_size_rule_keeps_everything_when_log_equals_retention_bytes():
    # UnifiedLogTest.shouldNotDeleteSizeBasedSegmentsWhenUnderRetentionSize.
    plan = plan_retention(uniform_log(3), {"retention.bytes": 15 * 70, "retention.ms": -1}, now_ms=NOW, log_start_offset=0, high_watermark=15)
    assert plan.deletions == ()
    assert plan.new_log_start_offset == 0


def test_size_rule_counts_the_active_segment_in_the_log_size():
    log = uniform_log(3)
    plan = plan_retention(log, {"retention.bytes": 1, "retention.ms": -1}, now_ms=NOW, log_start_offset=0, high_watermark=15)
    # diff = 1049: segments 0 and 5 go (1049-350-350 = 349 >= 0); the active one would leave -1.
    assert bases(plan.segments) == [0, 5]


def test_size_rule_deletes_a_zero_size_segment_when_the_log_is_exactly_at_the_limit():
    # diff = 0 and a 0-byte inner segment passes `diff - size >= 0`, as in Kafka.
    log = [SegmentInfo(0, 0, 0, 10), SegmentInfo(3, 6, 100, 10), SegmentInfo(6, 9, 100, 10)]
    plan = plan_retention(log, {"retention.bytes": 200, "retention.ms": -1}, now_ms=NOW, log_start_offset=0, high_watermark=9)
    assert bases(plan.segments) == [0]
    assert plan.new_log_start_offset == 3


def test_time_rule_uses_largest_timestamp_and_strictly_greater():
    log = [SegmentInfo(0, 5, 10, 1000), SegmentInfo(5, 10, 10, 2000), SegmentInfo(10, 15, 10, 3000)]
    plan = plan_retention(log, {"retention.ms": 1000}, now_ms=3000, log_start_offset=0, high_watermark=15)
    # 3000 - 1000 > 1000 goes; 3000 - 2000 > 1000 is false and stops the prefix.
    assert [(d.segment.base_offset, d.reason) for d in plan.deletions] == [(0, REASON_RETENTION_MS)]


def test_time_rule_stops_at_first_young_segment_even_if_later_ones_are_old():
    log = [SegmentInfo(0, 5, 10, 0), SegmentInfo(5, 10, 10, NOW), SegmentInfo(10, 15, 10, 0)]
    plan = plan_retention(log, {"retention.ms": 1000}, now_ms=NOW, log_start_offset=0, high_watermark=15)
    assert bases(plan.segments) == [0]


def test_segment_with_future_timestamp_is_never_expired():
    log = [SegmentInfo(0, 5, 10, NOW + 1), SegmentInfo(5, 10, 10, 0)]
    plan = plan_retention(log, {"retention.ms": 0}, now_ms=NOW, log_start_offset=0, high_watermark=10)
    assert plan.deletions == ()


def test_expired_active_segment_is_deleted_after_rolling():
    # UnifiedLogTest.shouldDeleteTimeBasedSegmentsReadyToBeDeleted: one full segment, all expired.
    log = uniform_log(1, records_per_segment=15)
    plan = plan_retention(log, {"retention.ms": 10000}, now_ms=NOW, log_start_offset=0, high_watermark=15)
    assert bases(plan.segments) == [0]
    assert plan.roll_active_first
    assert plan.new_log_start_offset == 15


def test_active_segment_is_kept_unless_high_watermark_reaches_log_end():
    log = uniform_log(3)
    plan = plan_retention(log, {"retention.ms": 1}, now_ms=NOW, log_start_offset=0, high_watermark=14)
    assert bases(plan.segments) == [0, 5]
    assert not plan.roll_active_first
    assert plan.new_log_start_offset == 10


def test_empty_active_segment_is_never_deleted():
    log = uniform_log(2) + [SegmentInfo(10, 10, 0, -1)]
    plan = plan_retention(log, {"retention.ms": 1}, now_ms=NOW, log_start_offset=0, high_watermark=10)
    assert bases(plan.segments) == [0, 5]
    assert not plan.roll_active_first
    assert plan.new_log_start_offset == 10


def test_only_segments_wholly_below_the_high_watermark_go():
    # UnifiedLogTest.testDeleteOldSegments: for hw in 25..30 no segment holding offset >= hw goes.
    log = uniform_log(20)
    for hw in range(0, 31):
        plan = plan_retention(log, {"retention.ms": 999}, now_ms=NOW, log_start_offset=0, high_watermark=hw)
        assert all(log[log.index(s) + 1].base_offset <= hw for s in plan.segments)
        assert plan.new_log_start_offset == hw - hw % 5
        assert plan.new_log_start_offset <= hw


def test_log_start_offset_rule_needs_the_next_segment_at_or_below_it():
    # UnifiedLogTest.testLogDeletionAfterDeleteRecords.
    log = uniform_log(3)
    cfg = {"retention.ms": -1}
    assert plan_retention(log, cfg, now_ms=NOW, log_start_offset=1, high_watermark=15).deletions == ()
    plan = plan_retention(log, cfg, now_ms=NOW, log_start_offset=6, high_watermark=15)
    assert [(d.segment.base_offset, d.reason) for d in plan.deletions] == [(0, REASON_LOG_START_OFFSET)]
    assert plan.new_log_start_offset == 6
    plan = plan_retention(log, cfg, now_ms=NOW, log_start_offset=15, high_watermark=15)
    assert bases(plan.segments) == [0, 5]
    assert plan.new_log_start_offset == 15
    assert not plan.roll_active_first


def test_log_start_offset_rule_runs_even_without_delete_policy():
    # UnifiedLogTest.shouldDeleteStartOffsetBreachedSegmentsWhenPolicyDoesNotIncludeDelete.
    plan = plan_retention(uniform_log(3), {"cleanup.policy": "compact"}, now_ms=NOW, log_start_offset=5, high_watermark=15)
    assert [(d.segment.base_offset, d.reason) for d in plan.deletions] == [(0, REASON_LOG_START_OFFSET)]


@pytest.mark.parametrize("policy", ["compact", ""])
def test_time_and_size_rules_need_delete_in_cleanup_policy(policy):
    # UnifiedLogTest.shouldNotDeleteSegmentsWhenPolicyDoesNotIncludeDelete.
    cfg = {"cleanup.policy": policy, "retention.ms": 0, "retention.bytes": 0}
    assert plan_retention(uniform_log(3), cfg, now_ms=NOW, log_start_offset=0, high_watermark=15).deletions == ()


def test_compact_delete_runs_size_then_time_rule():
    # UnifiedLogTest.shouldDeleteSegmentsReadyToBeDeletedWhenCleanupPolicyIsCompactAndDelete:
    # size removes one segment, time (7-day default, timestamps at 10) then removes the rest.
    cfg = {"cleanup.policy": "compact, delete", "retention.bytes": 10 * 70}
    plan = plan_retention(uniform_log(3), cfg, now_ms=NOW, log_start_offset=0, high_watermark=15)
    assert [(d.segment.base_offset, d.reason) for d in plan.deletions] == [
        (0, REASON_RETENTION_BYTES),
        (5, REASON_RETENTION_MS),
        (10, REASON_RETENTION_MS),
    ]
    assert plan.roll_active_first
    assert plan.new_log_start_offset == 15
    assert plan.by_reason() == [
        (REASON_RETENTION_BYTES, [plan.segments[0]]),
        (REASON_RETENTION_MS, plan.segments[1:]),
    ]


def test_rules_apply_in_kafka_order_each_on_what_the_previous_left():
    log = uniform_log(6)
    cfg = {"retention.bytes": 3 * 350, "retention.ms": 1000}
    ages = [SegmentInfo(s.base_offset, s.next_offset, s.size, ts) for s, ts in zip(log, [0, 0, 0, 0, NOW, 0], strict=True)]
    plan = plan_retention(ages, cfg, now_ms=NOW, log_start_offset=6, high_watermark=30)
    assert [(d.segment.base_offset, d.reason) for d in plan.deletions] == [
        (0, REASON_LOG_START_OFFSET),
        (5, REASON_RETENTION_BYTES),
        (10, REASON_RETENTION_BYTES),
        (15, REASON_RETENTION_MS),
    ]
    assert plan.new_log_start_offset == 20


def test_minus_one_disables_both_rules():
    cfg = {"retention.ms": -1, "retention.bytes": -1}
    assert not plan_retention(uniform_log(5), cfg, now_ms=NOW, log_start_offset=0, high_watermark=25)


def test_default_config_is_seven_days_and_unlimited_bytes():
    log = [SegmentInfo(0, 5, 10, NOW - 7 * DAY_MS - 1), SegmentInfo(5, 10, 10, NOW - 7 * DAY_MS), SegmentInfo(10, 11, 1, NOW)]
    plan = plan_retention(log, None, now_ms=NOW, log_start_offset=0, high_watermark=11)
    assert bases(plan.segments) == [0]


def test_log_start_offset_never_moves_backwards():
    log = uniform_log(3)
    plan = plan_retention(log, {"retention.ms": 1}, now_ms=NOW, log_start_offset=7, high_watermark=7)
    assert bases(plan.segments) == [0]
    assert plan.new_log_start_offset == 7


def test_empty_table_gives_empty_plan():
    assert plan_retention([], None, now_ms=NOW, log_start_offset=3, high_watermark=3) == RetentionPlan((), 3, 0, False)


def test_unordered_table_is_rejected():
    with pytest.raises(InvalidSegmentTableError, match="base offset 0"):
        plan_retention([SegmentInfo(5, 10, 1, 0), SegmentInfo(0, 5, 1, 0)], None, now_ms=0, log_start_offset=0, high_watermark=0)


def test_unknown_config_key_is_rejected():
    with pytest.raises(InvalidConfigError, match="retention.hours"):
        plan_retention(uniform_log(1), {"retention.hours": 1}, now_ms=0, log_start_offset=0, high_watermark=0)


def test_plan_keeps_the_callers_segment_objects_and_reads_attributes_lazily():
    class Seg:
        def __init__(self, base, nxt, size, ts):
            self.base_offset, self._next, self.size, self._ts = base, nxt, size, ts
            self.reads: list[str] = []

        @property
        def next_offset(self):
            self.reads.append("next_offset")
            return self._next

        @property
        def largest_timestamp(self):
            self.reads.append("largest_timestamp")
            return self._ts

    segs = [Seg(0, 5, 10, 0), Seg(5, 10, 10, NOW), Seg(10, 15, 10, 0)]
    plan = plan_retention(segs, {"retention.ms": 1}, now_ms=NOW, log_start_offset=0, high_watermark=15)
    assert plan.segments == [segs[0]]
    assert segs[0].reads == ["largest_timestamp"]
    assert segs[1].reads == ["largest_timestamp"]
    assert segs[2].reads == ["next_offset"]
    assert SegmentInfo.of(segs[0]) == SegmentInfo(0, 5, 10, 0)


# --- the independent model and property tests ---------------------------------------------


def kafka_model(table, cfg, *, now_ms, log_start_offset, high_watermark):
    """UnifiedLog.deleteOldSegments transcribed over a Python list (materialising the roll)."""
    live = [dict(seg=s, base=s.base_offset, size=s.size, ts=s.largest_timestamp) for s in table]
    if not live:
        return [], log_start_offset, False
    leo = table[-1].next_offset
    state = {"lso": log_start_offset, "rolled": False}
    deleted = []

    def deletable(predicate):
        out = []
        for k, seg in enumerate(live):
            nxt = live[k + 1] if k + 1 < len(live) else None
            upper = nxt["base"] if nxt else leo
            if not (high_watermark >= upper and predicate(seg, nxt)):
                break
            if nxt is None and seg["size"] == 0:
                break
            out.append(seg)
        return out

    def delete(segs, reason):
        if not segs:
            return
        if len(segs) == len(live):
            live.append(dict(seg=None, base=leo, size=0, ts=-1))
            state["rolled"] = True
        state["lso"] = max(state["lso"], live[len(segs)]["base"])
        del live[: len(segs)]
        deleted.extend((s["seg"], reason) for s in segs)

    delete(deletable(lambda s, n: n is not None and n["base"] <= state["lso"]), REASON_LOG_START_OFFSET)
    policy = [p.strip() for p in cfg["cleanup.policy"].split(",")]
    if "delete" in policy:
        rb = cfg["retention.bytes"]
        total = sum(s["size"] for s in live)
        if rb >= 0 and total >= rb:
            diff = [total - rb]

            def by_size(s, n):
                if diff[0] - s["size"] >= 0:
                    diff[0] -= s["size"]
                    return True
                return False

            delete(deletable(by_size), REASON_RETENTION_BYTES)
        rms = cfg["retention.ms"]
        if rms >= 0:
            delete(deletable(lambda s, n: now_ms - s["ts"] > rms), REASON_RETENTION_MS)
    return deleted, state["lso"], state["rolled"]


@st.composite
def scenarios(draw):
    n = draw(st.integers(0, 12))
    table = []
    base = draw(st.integers(0, 50))
    for i in range(n):
        last = i == n - 1
        size = draw(st.sampled_from([0, 1, 10, 50, 100]) if not last else st.integers(0, 100))
        count = draw(st.integers(0 if last and size == 0 else 1, 20))
        if last and size == 0:
            count = 0
        timestamp = draw(st.one_of(st.just(-1), st.integers(0, 100))) + 100 * i  # mostly ascending
        table.append(SegmentInfo(base, base + count, size, timestamp))
        base += count + draw(st.sampled_from([0, 0, 0, 3]))  # compaction gaps
    leo = table[-1].next_offset if table else base
    hw = draw(st.one_of(st.just(leo), st.integers(0, leo)))
    lso = draw(st.integers(0, hw))
    cfg = {
        "cleanup.policy": draw(st.sampled_from(["delete", "compact", "compact,delete", ""])),
        "retention.ms": draw(st.sampled_from([-1, 0, 100, 500, 1000])),
        "retention.bytes": draw(st.sampled_from([-1, 0, 1, 50, 100, 200, 400])),
    }
    now = draw(st.integers(0, 2500))
    return table, cfg, now, lso, hw


@settings(max_examples=600, deadline=None)
@given(scenarios())
def test_plan_matches_the_model(scenario):
    table, cfg, now, lso, hw = scenario
    plan = plan_retention(table, cfg, now_ms=now, log_start_offset=lso, high_watermark=hw)
    deleted, model_lso, model_rolled = kafka_model(table, cfg, now_ms=now, log_start_offset=lso, high_watermark=hw)
    assert [(d.segment, d.reason) for d in plan.deletions] == deleted
    assert plan.new_log_start_offset == model_lso
    assert plan.roll_active_first == model_rolled
    assert plan.bytes_reclaimed == sum(s.size for s, _ in deleted)


@settings(max_examples=600, deadline=None)
@given(scenarios())
def test_plan_invariants(scenario):
    table, cfg, now, lso, hw = scenario
    plan = plan_retention(table, cfg, now_ms=now, log_start_offset=lso, high_watermark=hw)
    n = len(plan.deletions)
    # A prefix, oldest first, grouped in Kafka's rule order.
    assert plan.segments == table[:n]
    ranks = [REASONS.index(d.reason) for d in plan.deletions]
    assert ranks == sorted(ranks)
    if "delete" not in cfg["cleanup.policy"]:
        assert set(ranks) <= {0}
    # Nothing at or above the high watermark; the start offset stays within [lso, hw].
    for i in range(n):
        upper = table[i + 1].base_offset if i + 1 < len(table) else table[-1].next_offset
        assert upper <= hw
    assert lso <= plan.new_log_start_offset <= max(lso, hw)
    # The whole log goes only by rolling first, and never when the active segment is empty.
    assert plan.roll_active_first == (n == len(table) and n > 0)
    if plan.roll_active_first:
        assert table[-1].size > 0
        assert plan.new_log_start_offset == table[-1].next_offset
    elif n:
        assert plan.new_log_start_offset == max(lso, table[n].base_offset)
    else:
        assert plan.new_log_start_offset == lso
    for segment, reason in plan.deletions:
        if reason == REASON_RETENTION_MS:
            assert now - segment.largest_timestamp > cfg["retention.ms"] >= 0
        if reason == REASON_RETENTION_BYTES:
            assert cfg["retention.bytes"] >= 0
    by_bytes = [d.segment for d in plan.deletions if d.reason == REASON_RETENTION_BYTES]
    if by_bytes:
        after_first_rule = table[sum(r == 0 for r in ranks):]
        remaining = sum(s.size for s in after_first_rule) - sum(s.size for s in by_bytes)
        assert remaining >= cfg["retention.bytes"]

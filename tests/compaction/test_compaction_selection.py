"""compaction.selection: Kafka's cleanable range, dirty ratio, due reasons and segment grouping."""

from __future__ import annotations

from compaction.selection import (
    DUE_DIRTY_RATIO,
    DUE_MAX_LAG,
    CleanableRange,
    CleanerSegmentInfo,
    cleanable_offsets,
    dirtiest,
    evaluate,
    group_segments_by_size,
)

SEGS = [CleanerSegmentInfo(0, 100, 1000, 10), CleanerSegmentInfo(10, 100, 2000, 1100),
        CleanerSegmentInfo(20, 100, 3000, 2100), CleanerSegmentInfo(30, 50, 4000, 3100)]  # last = active


def _eval(checkpoint, *, lso=35, now=5000, min_lag=0, max_lag=2**63 - 1, ratio=0.5, start=0, end=35):
    return evaluate(SEGS, log_start_offset=start, log_end_offset=end, last_stable_offset=lso,
                    checkpoint=checkpoint, now_ms=now, min_compaction_lag_ms=min_lag,
                    max_compaction_lag_ms=max_lag, min_cleanable_dirty_ratio=ratio)


def test_active_segment_bounds_the_cleanable_range():
    assert cleanable_offsets(SEGS, log_start_offset=0, log_end_offset=35, last_stable_offset=35,
                             checkpoint=None, now_ms=0, min_compaction_lag_ms=0) == (0, 30, False)


def test_last_stable_offset_bounds_it_and_is_rounded_down_to_its_segment():
    r = _eval(0, lso=15)
    assert r.first_uncleanable_offset == 10
    assert r.cleanable_bytes == 100


def test_min_compaction_lag_stops_at_the_first_young_segment():
    r = _eval(0, now=3500, min_lag=1000)  # segment 10 has largest ts 2000 > 2500? no; 20: 3000 > 2500
    assert r.first_uncleanable_offset == 20


def test_checkpoint_outside_the_log_resets_to_log_start():
    assert _eval(99).force_update_checkpoint
    assert _eval(99).first_dirty_offset == 0
    assert _eval(-1, start=5).first_dirty_offset == 5


def test_dirty_ratio_counts_whole_segments():
    r = _eval(10)
    assert (r.clean_bytes, r.cleanable_bytes) == (100, 200)
    assert r.dirty_ratio == 200 / 300
    assert r.due_reason == DUE_DIRTY_RATIO
    assert _eval(10, ratio=0.7).due_reason is None  # strictly greater than the ratio


def test_max_compaction_lag_makes_a_log_due():
    r = _eval(20, ratio=0.99, now=5000, max_lag=2000)  # earliest dirty first batch 2100 < 3000
    assert r.compaction_delay_ms == 900
    assert r.due_reason == DUE_MAX_LAG


def test_dirtiest_due_log_goes_first():
    def rng(ratio, reason):
        return CleanableRange(0, 1, 1, 1, ratio, 0, False, reason)
    picked = dirtiest([("a", rng(0.6, DUE_DIRTY_RATIO)), ("b", rng(0.9, None)),
                       ("c", rng(0.8, DUE_DIRTY_RATIO)), ("d", rng(0.8, DUE_DIRTY_RATIO))])
    assert picked[0] == "c"
    assert dirtiest([("b", rng(0.9, None))]) is None


def test_group_segments_by_size_respects_log_and_index_limits():
    sizes = [(0, 40, 8, 12), (10, 40, 8, 12), (20, 40, 8, 12), (30, 0, 0, 0), (40, 90, 8, 12)]
    assert group_segments_by_size(sizes, 100, 1000, 50) == [[0, 1], [2, 3], [4]]
    assert group_segments_by_size(sizes, 1000, 24, 50) == [[0, 1], [2, 3, 4]]
    assert group_segments_by_size(sizes, 1000, 16, 50) == [[0], [1], [2, 3], [4]]
    wide = [(0, 1, 1, 1), (2**31, 1, 1, 1)]
    assert group_segments_by_size(wide, 1000, 1000, 2**31 + 5) == [[0], [1]]

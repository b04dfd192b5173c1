"""Retention planning over a 10,000-segment table, next to the bare cost of reading the table.

The baseline walks every segment once, reading the four attributes the plan may read; the
plan should cost a small multiple of that walk (it is one pass per rule over a prefix).
"""

from __future__ import annotations

from retention import SegmentInfo, plan_retention

N_SEGMENTS = 10_000
RECORDS_PER_SEGMENT = 1_000
SEGMENT_BYTES = 1 << 20
NOW_MS = 2_000_000_000_000


def segment_table() -> list[SegmentInfo]:
    """Segments one minute apart, the oldest half older than retention.ms."""
    return [
        SegmentInfo(
            i * RECORDS_PER_SEGMENT,
            (i + 1) * RECORDS_PER_SEGMENT,
            SEGMENT_BYTES,
            NOW_MS - (N_SEGMENTS - i) * 60_000,
        )
        for i in range(N_SEGMENTS)
    ]


CONFIG = {
    "retention.ms": N_SEGMENTS // 2 * 60_000,
    "retention.bytes": (N_SEGMENTS * 3 // 4) * SEGMENT_BYTES,
    "cleanup.policy": "delete",
}


def extra(benchmark, role: str) -> None:
    benchmark.group = "retention plan, 10k segments"
    benchmark.extra_info.update(items=N_SEGMENTS, unit="segments", role=role)


def test_plan_retention_10k_segments(benchmark):
    table = segment_table()
    extra(benchmark, "ours")
    plan = benchmark(
        plan_retention,
        table,
        CONFIG,
        now_ms=NOW_MS,
        log_start_offset=0,
        high_watermark=N_SEGMENTS * RECORDS_PER_SEGMENT,
    )
    assert len(plan.deletions) == N_SEGMENTS // 2


def read_every_segment(table: list[SegmentInfo]) -> int:
    """One pass touching each attribute of each segment: the floor for any policy."""
    total = 0
    for s in table:
        total += s.base_offset + s.next_offset + s.size + s.largest_timestamp
    return total


def test_read_segment_table_10k_segments(benchmark):
    table = segment_table()
    extra(benchmark, "baseline")
    assert benchmark(read_every_segment, table) > 0

"""Which segments retention deletes, and why: a pure function over segment metadata.

Kafka's rules (UnifiedLog.deleteOldSegments / deletableSegments / deleteSegments in the
storage module), applied in Kafka's order, each on what the previous one left:

1. ``log_start_offset``: a segment goes when the next segment's base offset <= the log
   start offset. Runs whatever ``cleanup.policy`` says.
2. ``retention.bytes`` (only when ``cleanup.policy`` contains ``delete``; -1 disables): with
   ``diff = log size - retention.bytes`` (skipped when the log is smaller than the limit),
   a segment goes while ``diff - segment.size >= 0``, and ``diff`` shrinks by its size.
3. ``retention.ms`` (same conditions): a segment goes when
   ``now_ms - segment.largest_timestamp > retention.ms``.

Each rule deletes a prefix of the log: it walks from the oldest segment and stops at the
first one that fails. A segment is a candidate only if it lies wholly below the high
watermark (``high_watermark >=`` the next segment's base offset, or the log end offset for
the active segment), and an empty active segment never goes. When a rule would delete
every segment, Kafka rolls a new (empty) active segment first so the log is never empty;
the plan says so with ``roll_active_first``. After a rule deletes segments the log start
offset becomes ``max(log start offset, base offset of the first remaining segment)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from logstore.config import LogConfig
from logstore.errors import InvalidSegmentTableError

REASON_LOG_START_OFFSET = "log_start_offset"
REASON_RETENTION_BYTES = "retention.bytes"
REASON_RETENTION_MS = "retention.ms"
#: The reasons in the order Kafka applies the rules.
REASONS = (REASON_LOG_START_OFFSET, REASON_RETENTION_BYTES, REASON_RETENTION_MS)


class SegmentLike(Protocol):
    """What the plan reads from a segment (LogSegment and SegmentInfo both qualify)."""

    @property
    def base_offset(self) -> int: ...

    @property
    def next_offset(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def largest_timestamp(self) -> int: ...


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """Metadata of one segment: offsets [base_offset, next_offset), bytes, largest timestamp."""

    base_offset: int
    next_offset: int
    size: int
    largest_timestamp: int

    @classmethod
    def of(cls, segment: SegmentLike) -> SegmentInfo:
        """Snapshot any object with the four attributes (e.g. a LogSegment)."""
        return cls(
            int(segment.base_offset),
            int(segment.next_offset),
            int(segment.size),
            int(segment.largest_timestamp),
        )


class Deletion(NamedTuple):
    """One segment the plan deletes, with the rule that deletes it."""

    segment: Any
    reason: str


@dataclass(frozen=True, slots=True)
class RetentionPlan:
    """The outcome of one retention pass, before anything on disk changes.

    ``deletions`` are oldest first, grouped by reason in Kafka's rule order; the segments are
    the objects passed to ``plan_retention``. ``roll_active_first`` is true when the active
    segment is among them, so the log must roll a new active segment before deleting.
    """

    deletions: tuple[Deletion, ...]
    new_log_start_offset: int
    bytes_reclaimed: int
    roll_active_first: bool

    @property
    def segments(self) -> list[Any]:
        """The segments to delete, oldest first."""
        return [d.segment for d in self.deletions]

    def by_reason(self) -> list[tuple[str, list[Any]]]:
        """The deletions as (reason, segments) groups, in the order Kafka executes them."""
        groups: list[tuple[str, list[Any]]] = []
        for segment, reason in self.deletions:
            if not groups or groups[-1][0] != reason:
                groups.append((reason, []))
            groups[-1][1].append(segment)
        return groups

    def __bool__(self) -> bool:
        return bool(self.deletions)


def plan_retention(
    segments: Iterable[SegmentLike],
    config: LogConfig | Mapping[str, Any] | None,
    *,
    now_ms: int,
    log_start_offset: int,
    high_watermark: int,
) -> RetentionPlan:
    """Plan one retention pass over ``segments`` (ordered by base offset, last = active).

    ``config`` is a LogConfig or a dict of Kafka keys (defaults for missing ones; unknown or
    invalid ones raise InvalidConfigError). Raises InvalidSegmentTableError if base offsets
    are not ascending. Reads ``largest_timestamp`` only where the time rule looks.
    """
    cfg = LogConfig.coerce(config)
    table = list(segments)
    _check_ascending(table)
    if not table:
        return RetentionPlan((), log_start_offset, 0, False)
    run = _Pass(table, log_start_offset=log_start_offset, high_watermark=high_watermark)
    run.apply(REASON_LOG_START_OFFSET, run.log_start_offset_breached)
    if cfg.delete:
        if cfg.retention_bytes >= 0:
            run.apply_size_rule(cfg.retention_bytes)
        if cfg.retention_ms >= 0:
            run.apply(REASON_RETENTION_MS, _expired(now_ms, cfg.retention_ms))
    return run.plan()


def _check_ascending(table: Sequence[SegmentLike]) -> None:
    previous = None
    for position, segment in enumerate(table):
        base = segment.base_offset
        if previous is not None and base <= previous:
            raise InvalidSegmentTableError(
                f"segment {position} has base offset {base}, not above the previous {previous}"
            )
        previous = base


def _expired(now_ms: int, retention_ms: int) -> Callable[[SegmentLike, int | None], bool]:
    def predicate(segment: SegmentLike, _next_base: int | None) -> bool:
        return now_ms - segment.largest_timestamp > retention_ms

    return predicate


class _Pass:
    """The live segment table during one pass: table[first:]. Once a rule rolls (it took
    every segment), only the new empty active segment is left, and no rule deletes that."""

    def __init__(self, table: list[SegmentLike], *, log_start_offset: int, high_watermark: int):
        self.table = table
        self.first = 0
        self.rolled = False
        self.log_end_offset = int(table[-1].next_offset)
        self.log_start_offset = log_start_offset
        self.high_watermark = high_watermark
        self.deletions: list[Deletion] = []

    def log_start_offset_breached(self, segment: SegmentLike, next_base: int | None) -> bool:
        return next_base is not None and next_base <= self.log_start_offset

    def apply(self, reason: str, predicate: Callable[[SegmentLike, int | None], bool]) -> None:
        """Delete the longest prefix of live segments that are below the HW and match.

        ``predicate(segment, next_base)`` gets the next segment's base offset, or None for
        the active segment (Kafka's DeletionCondition).
        """
        table, last, hw = self.table, len(self.table) - 1, self.high_watermark
        end = self.first
        while end <= last:
            segment = table[end]
            if end < last:
                next_base: int | None = table[end + 1].base_offset
                upper = next_base
            elif segment.size == 0:
                break  # an empty active segment never goes
            else:
                next_base, upper = None, self.log_end_offset
            if hw < upper or not predicate(segment, next_base):
                break
            end += 1
        self._delete(end, reason)

    def apply_size_rule(self, retention_bytes: int) -> None:
        """Kafka's size rule: delete oldest-first while what remains stays >= retention.bytes."""
        log_size = sum(s.size for s in self.table[self.first:])
        if log_size < retention_bytes:
            return
        diff = log_size - retention_bytes

        def predicate(segment: SegmentLike, _next_base: int | None) -> bool:
            nonlocal diff
            size = segment.size
            if diff - size >= 0:
                diff -= size
                return True
            return False

        self.apply(REASON_RETENTION_BYTES, predicate)

    def plan(self) -> RetentionPlan:
        """The deletions so far as a RetentionPlan."""
        reclaimed = sum(d.segment.size for d in self.deletions)
        return RetentionPlan(tuple(self.deletions), self.log_start_offset, reclaimed, self.rolled)

    def _delete(self, end: int, reason: str) -> None:
        if end == self.first:
            return
        if end == len(self.table):
            self.rolled = True  # Kafka rolls a new active segment before deleting the last one
        self.deletions.extend(Deletion(s, reason) for s in self.table[self.first:end])
        first_kept = self.table[end].base_offset if end < len(self.table) else self.log_end_offset
        self.log_start_offset = max(self.log_start_offset, first_kept)
        self.first = end

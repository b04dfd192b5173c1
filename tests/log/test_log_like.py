"""The Protocols the upper layers are written against fit what provides them: LogLike fits Log
and the simulation's MemoryLog, SegmentedLogLike fits Log, and the policy Protocols fit
retention.apply_retention and compaction.LogCleaner. Checked member by member, with call
signatures: every call a Protocol allows must be one the implementation accepts."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from compaction import LogCleaner
from logstore import Log
from logstore.clock import ManualClock
from logstore.log_like import LogLike, SegmentedLogLike
from logstore.policies import BackgroundCleaner, CleanerFactory, RetentionPass
from retention import apply_retention
from tests.simulation.memory_log import MemoryLog


def protocol_members(protocol: type) -> dict[str, Any]:
    """{name: declaration} of a Protocol's members, those of its Protocol bases included;
    an annotated attribute's declaration is None."""
    members: dict[str, Any] = {}
    for cls in reversed(protocol.__mro__):
        if not getattr(cls, "_is_protocol", False) or cls.__module__ == "typing":
            continue
        members.update(dict.fromkeys(vars(cls).get("__annotations__", {})))
        members.update({name: value for name, value in vars(cls).items()
                        if (not name.startswith("_") or name == "__call__")
                        and (callable(value) or isinstance(value, property))})
    return members


def signature_problems(declared: Callable, implemented: Callable, *, implemented_is_method: bool = True) -> list[str]:
    """Why a call that `declared` (a Protocol method) allows could fail on `implemented`."""
    want = list(inspect.signature(declared).parameters.values())[1:]  # without self
    have = list(inspect.signature(implemented).parameters.values())[1 if implemented_is_method else 0:]
    by_name = {p.name: p for p in have}
    positional = [p.name for p in have if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    problems = []
    for i, p in enumerate(want):
        got = by_name.get(p.name)
        if got is None:
            problems.append(f"no parameter {p.name!r}")
        elif p.kind is p.POSITIONAL_OR_KEYWORD and positional[i:i + 1] != [p.name]:
            problems.append(f"{p.name!r} is not positional parameter {i}")
        elif p.kind is p.KEYWORD_ONLY and got.kind not in (got.KEYWORD_ONLY, got.POSITIONAL_OR_KEYWORD):
            problems.append(f"{p.name!r} cannot be passed by keyword")
        elif p.default is not p.empty and got.default is got.empty:
            problems.append(f"{p.name!r} has no default")
    declared_names = {p.name for p in want}
    problems += [f"extra parameter {p.name!r} without a default" for p in have
                 if p.name not in declared_names and p.default is p.empty
                 and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    return problems


def fit_problems(protocol: type, instance: object) -> list[str]:
    """Every way `instance` falls short of `protocol`, one line each."""
    cls = type(instance)
    problems = []
    for name, declared in protocol_members(protocol).items():
        where = f"{cls.__name__}.{name}"
        if not hasattr(instance, name):
            problems.append(f"{where} is missing")
            continue
        implemented = inspect.getattr_static(cls, name, None)
        if declared is None and isinstance(implemented, property) and implemented.fset is None:
            problems.append(f"{where} cannot be set")
        elif callable(declared) and not isinstance(declared, property):
            problems += [f"{where}: {p}" for p in signature_problems(declared, getattr(cls, name))]
    return problems


@pytest.fixture
def log(tmp_path):
    with Log.open(tmp_path / "t-0", clock=ManualClock(0)) as opened:
        yield opened


def test_log_provides_log_like_and_segmented_log_like(log):
    assert fit_problems(LogLike, log) == []
    assert fit_problems(SegmentedLogLike, log) == []


def test_the_simulations_memory_log_provides_log_like():
    assert fit_problems(LogLike, MemoryLog("t", 0, {}, ManualClock(0))) == []


def test_compactions_log_cleaner_provides_the_managers_cleaner_protocols():
    assert fit_problems(BackgroundCleaner, LogCleaner(list, {}, clock=ManualClock(0))) == []
    assert signature_problems(CleanerFactory.__call__, LogCleaner.__init__) == []


def test_apply_retention_is_a_retention_pass():
    assert signature_problems(RetentionPass.__call__, apply_retention, implemented_is_method=False) == []


def test_the_check_reports_missing_members_and_calls_that_would_fail():
    class Stale:
        topic, partition, high_watermark, high_watermark_follows_log_end = "t", 0, 0, True
        config = clock = log_start_offset = log_end_offset = None

        def truncate_to(self, end: int) -> bool: ...

        def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None) -> Any: ...

    problems = fit_problems(LogLike, Stale())
    assert "Stale.append is missing" in problems
    assert "Stale.truncate_to: no parameter 'offset'" in problems
    assert "Stale.read: 'max_bytes' has no default" in problems

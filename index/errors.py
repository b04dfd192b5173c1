"""The root of logstore's error hierarchy and the errors an index raises.

They live in the lowest layer so that `index` imports nothing above it; `logstore.errors`
re-exports every one, so `LogstoreError` stays the one root and stays importable from there.
"""

from __future__ import annotations

import resource


class LogstoreError(Exception):
    """Root of every error logstore raises on purpose."""


class CorruptIndexError(LogstoreError):
    """An offset or time index whose entries contradict its segment or its own order."""


class InvalidConfigError(LogstoreError):
    """A config key that is unknown, of the wrong type or out of range."""


class LogClosedError(LogstoreError):
    """An operation on a log or segment that has been closed or deleted."""


class ReadOnlyLogError(LogstoreError):
    """A write attempted on a log opened with read_only=True."""


class InvalidOffsetError(LogstoreError):
    """An index or segment append whose offset does not follow the last one (Kafka's InvalidOffsetException)."""


class IndexOffsetOverflowError(LogstoreError):
    """An offset that does not fit in a segment's 4-byte relative offset (Kafka's IndexOffsetOverflowException)."""


class IndexFullError(LogstoreError):
    """An append to an index with no free slot left: the segment should have rolled first."""


class DescriptorLimitError(LogstoreError):
    """No file descriptor left for a segment's file: the process's RLIMIT_NOFILE is reached, or
    every descriptor of the pool is pinned by an ongoing send or read."""


def descriptor_limit_error(what: str) -> DescriptorLimitError:
    """The error for `what` failing for want of descriptors, naming the limit and how to raise it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return DescriptorLimitError(
        f"{what}: out of file descriptors (RLIMIT_NOFILE soft limit {soft}, hard limit {hard}); "
        "raise it with `ulimit -n` or resource.setrlimit(resource.RLIMIT_NOFILE, ...)")

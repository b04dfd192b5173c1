"""The Record value type: one decoded (or to-be-encoded) Kafka record."""

from __future__ import annotations

from dataclasses import dataclass

Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True, slots=True)
class Record:
    """One record: absolute offset, timestamp (ms), key, value (None = null) and headers."""

    offset: int
    timestamp: int
    key: bytes | None = None
    value: bytes | None = None
    headers: Headers = ()

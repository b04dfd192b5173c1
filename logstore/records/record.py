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


def _init(self: Record, offset: int, timestamp: int, key: bytes | None = None,
          value: bytes | None = None, headers: Headers = (),
          _offset=Record.offset.__set__, _timestamp=Record.timestamp.__set__,
          _key=Record.key.__set__, _value=Record.value.__set__,
          _headers=Record.headers.__set__) -> None:
    _offset(self, offset)
    _timestamp(self, timestamp)
    _key(self, key)
    _value(self, value)
    _headers(self, headers)


# Same signature as the generated __init__, but it writes the slots through their
# descriptors: about twice as fast, and decoding builds a Record per record.
_init.__qualname__ = "Record.__init__"
Record.__init__ = _init

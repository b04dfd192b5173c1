"""The topics a consumer subscribes to, read from its JoinGroup metadata (Kafka's
ConsumerProtocolSubscription: int16 version, then an array of int16-length topic names in
every version), for the coordinator's rebalance and offset-expiry rules."""

from __future__ import annotations

import struct

CONSUMER_PROTOCOL_TYPE = "consumer"
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def subscribed_topics(metadata: bytes) -> frozenset[str] | None:
    """The subscription's topic names, or None when `metadata` is not a consumer subscription."""
    try:
        (version,) = _INT16.unpack_from(metadata, 0)
        (count,) = _INT32.unpack_from(metadata, 2)
        if version < 0 or count < 0 or count > len(metadata):
            return None
        topics, position = [], 6
        for _ in range(count):
            (size,) = _INT16.unpack_from(metadata, position)
            end = position + 2 + size
            if size < 0 or end > len(metadata):
                return None
            topics.append(metadata[position + 2:end].decode("utf-8"))
            position = end
    except (struct.error, UnicodeDecodeError):
        return None
    return frozenset(topics)

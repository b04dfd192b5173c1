"""The consumer group protocol's APIs (KIP-848), generated from Kafka 4.0's definitions:
ConsumerGroupHeartbeat (key 68) and ConsumerGroupDescribe (key 69)."""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from logstore.server.messages import RESOURCES, schema_loading

with schema_loading():
    class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=RESOURCES):
        """A member joins, heartbeats, acknowledges revocations or leaves (MemberEpoch 0 / n / -1 / -2)."""

    class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=RESOURCES):
        """The member's epoch and, when it changed, the partitions it may use now."""

    class ConsumerGroupDescribeRequest(ApiMessage, load_json=RESOURCES):
        """The groups to describe."""

    class ConsumerGroupDescribeResponse(ApiMessage, load_json=RESOURCES):
        """Each group's epochs, assignor and members with their current and target assignments."""


__all__ = ["ConsumerGroupDescribeRequest", "ConsumerGroupDescribeResponse", "ConsumerGroupHeartbeatRequest",
           "ConsumerGroupHeartbeatResponse"]

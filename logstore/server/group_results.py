"""What the group coordinator's calls take and answer: typed values, no wire messages."""

from __future__ import annotations

import uuid
from typing import NamedTuple


class JoinResult(NamedTuple):
    """A JoinGroup answer; `members` (id, instance id, metadata) only for the leader."""

    error: int
    member_id: str
    generation: int = -1
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()


class SyncResult(NamedTuple):
    """A SyncGroup answer."""

    error: int
    protocol_type: str | None = None
    protocol: str | None = None
    assignment: bytes = b""


class PartitionOffset(NamedTuple):
    """One partition's committed offset as OffsetFetch reports it."""

    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    error: int


class OffsetCommitEntry(NamedTuple):
    """One offset a client asks to commit."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


class ConsumerHeartbeat(NamedTuple):
    """A ConsumerGroupHeartbeat (KIP-848) as the coordinator takes it; None fields did not change
    since the member's last heartbeat, `owned` maps topic ids to the partitions it holds."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: dict[uuid.UUID, frozenset[int]] | None = None
    client_id: str = ""
    client_host: str = ""


class ConsumerHeartbeatResult(NamedTuple):
    """The answer to a ConsumerGroupHeartbeat; `assignment` (topic id -> partitions) only when
    the member is to be told its partitions."""

    error: int
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: dict[uuid.UUID, frozenset[int]] | None = None

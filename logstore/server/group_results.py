"""What the group coordinator's calls take and answer: typed values, no wire messages."""

from __future__ import annotations

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

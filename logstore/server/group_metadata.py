"""A classic group's in-memory state (Kafka's GroupMetadata and MemberMetadata): its rebalance
state, members, committed offsets and the offsets of transactions still open, with the rules
about them that need no clock and no wire."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass, field

from logstore.server import error_codes as ec
from logstore.server.consumer_group import CLASSIC_GROUP_TYPE, CONSUMER_GROUP_TYPE, ConsumerGroup
from logstore.server.consumer_group_storage import records_between
from logstore.server.consumer_protocol import CONSUMER_PROTOCOL_TYPE, subscribed_topics
from logstore.server.coordinator_records import (
    GroupMetadata,
    OffsetAndMetadata,
    StoredMember,
    group_record,
)

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"
MAX_RECORD_STRING_BYTES = 32_767  # what the int16 length of a __consumer_offsets record string holds
MEMBER_ID_SUFFIX_BYTES = 37  # "-" and a uuid, after the instance or client id a member id starts with


@dataclass
class Member:
    """A group member and the answers it awaits; `last_heartbeat` is the coordinator clock's ms."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout: int
    rebalance_timeout: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    last_heartbeat: int
    assignment: bytes = b""
    join: asyncio.Future | None = None
    sync: asyncio.Future | None = None

    def metadata(self, protocol: str | None) -> bytes:
        """The member's metadata for `protocol` (empty if it does not support it)."""
        return next((meta for name, meta in self.protocols if name == protocol), b"")

    def awaiting(self) -> bool:
        return (self.join is not None and not self.join.done()) or (self.sync is not None and not self.sync.done())

    def joining(self) -> bool:
        return self.join is not None and not self.join.done()


@dataclass
class Group:
    """One group: its rebalance state, members and committed offsets."""

    group_id: str
    state: str = EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: OrderedDict[str, Member] = field(default_factory=OrderedDict)
    pending_members: dict[str, int] = field(default_factory=dict)  # KIP-394 member id -> clock ms deadline
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    pending_txn: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = field(default_factory=dict)
    # __consumer_offsets position after the record each applied offset (or deletion) came from:
    # a write the ISR acknowledges late never undoes a later one
    offset_positions: dict[tuple[str, int], int] = field(default_factory=dict)
    rebalance: asyncio.Task | None = None
    state_timestamp: int = -1  # clock ms of the last state change; -1 if unknown (old records)
    consumer: ConsumerGroup | None = None  # set when the group speaks KIP-848's consumer protocol

    @property
    def group_type(self) -> str:
        """"consumer" for a group of KIP-848's protocol, else "classic", as ListGroups names them."""
        return CLASSIC_GROUP_TYPE if self.consumer is None else CONSUMER_GROUP_TYPE

    def reported_state(self) -> str:
        """The state DescribeGroups and ListGroups report (a consumer group's own states)."""
        return self.state if self.consumer is None else self.consumer.state()

    def static_member(self, group_instance_id: str | None) -> Member | None:
        """The current member of a static instance id, if any."""
        if group_instance_id is None:
            return None
        return next((m for m in self.members.values() if m.group_instance_id == group_instance_id), None)

    def stored(self) -> GroupMetadata:
        """The GroupMetadata record of the group as it stands."""
        members = [StoredMember(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout,
                                m.session_timeout, m.metadata(self.protocol), m.assignment)
                   for m in self.members.values()]
        return GroupMetadata(self.protocol_type or "", self.generation, self.protocol, self.leader,
                             self.state_timestamp, members)

    def select_protocol(self) -> str | None:
        """The leader's first protocol every member supports, else the leader's first."""
        candidates = [name for name, _ in self.members[self.leader].protocols]
        for name in candidates:
            if all(any(n == name for n, _ in m.protocols) for m in self.members.values()):
                return name
        return candidates[0] if candidates else None

    def member_error(self, member_id: str, instance_id: str | None) -> int:
        """FENCED_INSTANCE_ID if `instance_id` now belongs to another member id,
        UNKNOWN_MEMBER_ID if `member_id` is not in the group, else NONE."""
        static = self.static_member(instance_id)
        if static is not None and static.member_id != member_id:
            return ec.FENCED_INSTANCE_ID
        if member_id not in self.members or (instance_id is not None and static is None):
            return ec.UNKNOWN_MEMBER_ID
        return ec.NONE


def group_id_fits(group_id: str) -> bool:
    """Whether `group_id` fits the key of a __consumer_offsets record."""
    return record_string_fits(group_id)


def record_string_fits(text: str, reserve: int = 0) -> bool:
    """Whether `text` and `reserve` bytes more fit a string of a __consumer_offsets record (int16 length)."""
    return len(text.encode()) + reserve <= MAX_RECORD_STRING_BYTES


def same_subscription(protocol_type: str | None, old: bytes, new: bytes) -> bool:
    """Whether a rejoining static member asks for what it had: the same topics for a consumer
    (its owned partitions and generation change with every restart), else the same bytes."""
    if protocol_type == CONSUMER_PROTOCOL_TYPE:
        old_topics = subscribed_topics(old)
        return old_topics is not None and old_topics == subscribed_topics(new)
    return old == new


def expired_offsets(group: Group, now_ms: int, retention_ms: int) -> list[tuple[str, int]]:
    """The offsets of `group` past `retention_ms` at `now_ms`, as Kafka expires them: every
    offset of an Empty group (counted from when it became Empty) or of a standalone one (from
    its commit), and a Stable consumer group's offsets of topics nobody subscribes to."""
    subscribed: frozenset[str] = frozenset()
    since_empty = False
    if group.protocol_type is not None and group.state == EMPTY:
        since_empty = group.state_timestamp >= 0
    elif group.consumer is not None and group.state == STABLE:
        subscribed = frozenset(group.consumer.subscribed_names(t for t, _ in group.offsets))
    elif group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.state == STABLE:
        topics = [subscribed_topics(m.metadata(group.protocol)) for m in group.members.values()]
        if any(t is None for t in topics):
            return []
        subscribed = frozenset().union(*topics)
    elif group.protocol_type is not None:
        return []

    def expired(om: OffsetAndMetadata) -> bool:
        if om.expire_timestamp >= 0:  # a v1 record's own expiry time
            return now_ms >= om.expire_timestamp
        return now_ms - (group.state_timestamp if since_empty else om.commit_timestamp) >= retention_ms

    return [tp for tp, om in group.offsets.items() if tp[0] not in subscribed and expired(om)]


def group_tombstones(group: Group) -> list[tuple[bytes, bytes | None]]:
    """The tombstones of a group's metadata records (a consumer group's records, or the classic
    GroupMetadata), for its deletion."""
    if group.consumer is not None:
        return records_between(group.group_id, group.consumer, None)
    return [group_record(group.group_id, None)]

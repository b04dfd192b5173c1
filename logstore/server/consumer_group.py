"""A consumer group of KIP-848's protocol (Kafka's ConsumerGroup and ConsumerGroupMember): the
group epoch, the target assignment and its epoch, and each member's epochs, subscription and
current assignment, with the rules about them that need no clock and no wire. A partition is
owned by a member while it is assigned to it or pending its revocation."""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from logstore.server import error_codes as ec

# Kafka's MemberState values, as the CurrentMemberAssignment record keeps them
MEMBER_STABLE, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS = 0, 1, 2
# the group's states as DescribeGroups, ListGroups and ConsumerGroupDescribe name them
EMPTY, ASSIGNING, RECONCILING, STABLE, DEAD = "Empty", "Assigning", "Reconciling", "Stable", "Dead"
JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH = 0, -1, -2
CONSUMER_GROUP_TYPE, CLASSIC_GROUP_TYPE = "consumer", "classic"

Assignment = dict[uuid.UUID, frozenset[int]]  # topic id -> partitions


def without_empty(assignment: Assignment) -> Assignment:
    """`assignment` without topics that have no partitions."""
    return {t: ps for t, ps in assignment.items() if ps}


def partition_set(assignment: Assignment) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, ps in assignment.items() for p in ps}


@dataclass
class ConsumerMember:
    """One member: its identity, subscription and the assignment it reconciles towards the target."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: int = MEMBER_STABLE
    assigned: Assignment = field(default_factory=dict)
    revoking: Assignment = field(default_factory=dict)
    last_heartbeat_ms: int = 0
    revocation_deadline_ms: int | None = None  # the rebalance timeout of an unacknowledged revocation

    def subscribed_names(self, topic_names: Iterable[str]) -> set[str]:
        """The topics of `topic_names` this member subscribes to, by name or by its regex
        (matched whole, as Kafka's RE2J `matches` does)."""
        names = set(self.subscribed_topic_names)
        if self.subscribed_topic_regex is not None:
            pattern = compiled_regex(self.subscribed_topic_regex)
            if pattern is not None:
                names.update(t for t in topic_names if pattern.fullmatch(t))
        return names


def compiled_regex(regex: str) -> re.Pattern | None:
    """The compiled subscription regex, None if it does not compile."""
    try:
        return re.compile(regex)
    except (re.error, RecursionError, OverflowError):
        return None


@dataclass
class ConsumerGroup:
    """The KIP-848 state of a group: epochs, members, the target assignment and the metadata
    of the subscribed topics it was computed from (topic id -> (name, partition count))."""

    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    topics: dict[uuid.UUID, tuple[str, int]] = field(default_factory=dict)
    assignor: str = "uniform"

    def state(self) -> str:
        if not self.members:
            return EMPTY
        if self.assignment_epoch < self.group_epoch:
            return ASSIGNING
        if any(m.member_epoch != self.assignment_epoch or m.state != MEMBER_STABLE for m in self.members.values()):
            return RECONCILING
        return STABLE

    def static_member(self, instance_id: str | None) -> ConsumerMember | None:
        if instance_id is None:
            return None
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)

    def owners(self) -> dict[tuple[uuid.UUID, int], str]:
        """Each owned partition's member (assigned or pending revocation)."""
        owned = {}
        for member in self.members.values():
            for assignment in (member.assigned, member.revoking):
                for tp in partition_set(assignment):
                    owned[tp] = member.member_id
        return owned

    def subscribed_names(self, topic_names: Iterable[str]) -> set[str]:
        """Every topic any member subscribes to."""
        names = list(topic_names)
        return set().union(*(m.subscribed_names(names) for m in self.members.values()))

    def copy(self) -> ConsumerGroup:
        """A copy to work on: its members and target assignments are replaced, never changed in
        place, so the copy shares them until then."""
        return dataclasses.replace(self, members=dict(self.members), target=dict(self.target))

    def resume(self, now_ms: int) -> None:
        """After a restart, as Kafka after loading the group: every session (and every owed
        revocation's rebalance timeout) starts now."""
        for member in self.members.values():
            member.last_heartbeat_ms = now_ms
            if member.state == UNREVOKED_PARTITIONS:
                member.revocation_deadline_ms = now_ms + max(member.rebalance_timeout_ms, 0)

    def commit_error(self, member_id: str, member_epoch: int) -> int:
        """Whether a member may commit offsets at `member_epoch` (Kafka's
        ConsumerGroup.validateOffsetCommit): UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH or NONE. A
        commit without a member (an admin's) is taken only while nobody consumes."""
        if member_epoch < 0 and not member_id:
            return ec.NONE if not self.members else ec.UNKNOWN_MEMBER_ID
        return self.fetch_error(member_id, member_epoch)

    def fetch_error(self, member_id: str | None, member_epoch: int) -> int:
        """Whether a member may fetch committed offsets at `member_epoch` (OffsetFetch v9, Kafka's
        validateOffsetFetch); a fetch without a member (an admin's) always may."""
        if member_epoch < 0 and not member_id:
            return ec.NONE
        member = self.members.get(member_id or "")
        if member is None:
            return ec.UNKNOWN_MEMBER_ID
        return ec.NONE if member_epoch == member.member_epoch else ec.STALE_MEMBER_EPOCH


def owner_lookup(group: ConsumerGroup) -> Callable[[uuid.UUID, int], str | None]:
    """A lookup of the member owning a partition, taken once over the group as it stands."""
    owners = group.owners()
    return lambda topic_id, partition: owners.get((topic_id, partition))

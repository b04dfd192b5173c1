"""How a member's current assignment moves towards its target (Kafka's CurrentAssignmentBuilder):
partitions it must give up are revoked first, at its current epoch; only once its heartbeat no
longer reports them does it move to the target epoch, and it is given a partition only when no
other member owns it. So no partition is ever owned by two members."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable

from logstore.server.consumer_group import (
    MEMBER_STABLE,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    Assignment,
    ConsumerMember,
    without_empty,
)

OwnerOf = Callable[[uuid.UUID, int], "str | None"]


def still_owns(owned: Assignment | None, revoking: Assignment) -> bool:
    """Whether the member's reported partitions (None: not reported) hold any of `revoking`."""
    if owned is None:
        return True
    return any(ps & revoking.get(t, frozenset()) for t, ps in owned.items())


def reconcile(member: ConsumerMember, target_epoch: int, target: Assignment, subscribed: set[uuid.UUID],
              owner_of: OwnerOf, owned: Assignment | None) -> ConsumerMember:
    """The member's next state given the group's target assignment for it at `target_epoch`, the
    ids of the topics it subscribes to, who owns each partition now and the partitions its
    heartbeat reports (None when the heartbeat left them out). Returns `member` itself when
    nothing can move."""
    if member.state == MEMBER_STABLE and member.member_epoch == target_epoch:
        return member
    if member.state == UNREVOKED_PARTITIONS and still_owns(owned, member.revoking):
        return member
    return _next_assignment(member, target_epoch, target, subscribed, owner_of, owned)


def _next_assignment(member: ConsumerMember, target_epoch: int, target: Assignment, subscribed: set[uuid.UUID],
                     owner_of: OwnerOf, owned: Assignment | None) -> ConsumerMember:
    assigned: Assignment = {}
    revoking: Assignment = {}
    pending: Assignment = {}
    unreleased = False
    for topic in set(target) | set(member.assigned):
        wanted = target.get(topic, frozenset()) if topic in subscribed else frozenset()
        current = member.assigned.get(topic, frozenset())
        assigned[topic] = current & wanted
        revoking[topic] = current - wanted
        free = frozenset(p for p in wanted - current if owner_of(topic, p) in (None, member.member_id))
        unreleased = unreleased or len(free) < len(wanted - current)
        pending[topic] = free
    assigned, revoking, pending = without_empty(assigned), without_empty(revoking), without_empty(pending)
    if revoking and still_owns(owned, revoking):
        return _moved(member, member.member_epoch, UNREVOKED_PARTITIONS, assigned, revoking)
    for topic, partitions in pending.items():
        assigned[topic] = assigned.get(topic, frozenset()) | partitions
    state = UNRELEASED_PARTITIONS if unreleased else MEMBER_STABLE
    return _moved(member, target_epoch, state, assigned, {})


def _moved(member: ConsumerMember, epoch: int, state: int, assigned: Assignment,
           revoking: Assignment) -> ConsumerMember:
    """`member` at `epoch` (its previous epoch the one it had), in `state`, with these partitions."""
    return dataclasses.replace(member, member_epoch=epoch, previous_member_epoch=member.member_epoch, state=state,
                               assigned=assigned, revoking=revoking)

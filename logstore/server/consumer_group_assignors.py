"""The server-side assignors of KIP-848 groups (`group.consumer.assignors`): `uniform`, sticky
and balanced (a member keeps what it had as far as balance allows, the rest goes to the least
loaded members subscribed to it), and `range`, each topic's partitions split in contiguous
ranges over its subscribers in member id order. Both are deterministic."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

from logstore.server.consumer_group import Assignment

Subscriptions = Mapping[str, frozenset[uuid.UUID]]  # member id -> subscribed topic ids
TopicSizes = Mapping[uuid.UUID, int]  # topic id -> partition count
Assignor = Callable[[Subscriptions, TopicSizes, Mapping[str, Assignment]], dict[str, Assignment]]
Partition = tuple[uuid.UUID, int]


def uniform(members: Subscriptions, topics: TopicSizes, previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Every subscribed partition to one member, the counts as even as the subscriptions allow,
    moving as few partitions away from their previous member as that takes."""
    owner: dict[Partition, str] = {}
    held: dict[str, list[Partition]] = {m: [] for m in sorted(members)}
    for member in held:
        for topic, partitions in sorted(previous.get(member, {}).items(), key=lambda item: str(item[0])):
            if topic in members[member] and topic in topics:
                for p in sorted(partitions):
                    if p < topics[topic] and (topic, p) not in owner:
                        owner[topic, p] = member
                        held[member].append((topic, p))
    for topic in sorted(topics, key=str):
        subscribers = [m for m in held if topic in members[m]]
        for p in range(topics[topic]):
            if subscribers and (topic, p) not in owner:
                least = min(subscribers, key=lambda m: (len(held[m]), m))
                owner[topic, p] = least
                held[least].append((topic, p))
    _balance(members, held)
    return {m: _as_assignment(parts) for m, parts in held.items()}


def _balance(members: Subscriptions, held: dict[str, list[Partition]]) -> None:
    """Move partitions from the most to the least loaded member subscribed to them until no
    move narrows the gap (each move lowers the sum of squared counts, so this ends); a member
    gives up the partitions it took last first."""
    subscribers: dict[uuid.UUID, list[str]] = {}
    for member in held:
        for topic in members[member]:
            subscribers.setdefault(topic, []).append(member)
    moved = True
    while moved:
        moved = False
        for giver in sorted(held, key=lambda m: (-len(held[m]), m)):
            for topic in dict.fromkeys(t for t, _ in reversed(held[giver])):
                taker = min(subscribers[topic], key=lambda m: (len(held[m]), m))
                if len(held[taker]) + 1 < len(held[giver]):
                    partition = next(p for p in reversed(held[giver]) if p[0] == topic)
                    held[giver].remove(partition)
                    held[taker].append(partition)
                    moved = True
                    break
            if moved:
                break


def range_assignor(members: Subscriptions, topics: TopicSizes,
                   previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Each topic's partitions in contiguous ranges over its subscribers in member id order, the
    first `partitions % subscribers` of them one partition more."""
    held: dict[str, list[Partition]] = {m: [] for m in sorted(members)}
    for topic in sorted(topics, key=str):
        subscribers = [m for m in held if topic in members[m]]
        if not subscribers:
            continue
        quota, extra = divmod(topics[topic], len(subscribers))
        start = 0
        for i, member in enumerate(subscribers):
            end = start + quota + (1 if i < extra else 0)
            held[member].extend((topic, p) for p in range(start, end))
            start = end
    return {m: _as_assignment(parts) for m, parts in held.items()}


def _as_assignment(partitions: list[Partition]) -> Assignment:
    out: dict[uuid.UUID, set[int]] = {}
    for topic, p in partitions:
        out.setdefault(topic, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_assignor}

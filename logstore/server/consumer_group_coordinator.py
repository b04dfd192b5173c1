"""The consumer group protocol of KIP-848 as a state machine (Kafka's GroupMetadataManager for
consumer groups): ConsumerGroupHeartbeat's joins, heartbeats and leaves, static members, the
group epoch and the target assignment computed here by the `uniform` or `range` assignor, each
member reconciled towards it (consumer_group_reconciliation.py), and the session and rebalance
timeouts on the injected clock. Typed calls in, typed results out; every change is written as
Kafka 4.0's records before it takes effect."""

from __future__ import annotations

import dataclasses
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Protocol

from logstore.clock import Clock
from logstore.errors import LogstoreError
from logstore.server import error_codes as ec
from logstore.server.broker_config import BrokerConfig
from logstore.server.consumer_group import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    UNREVOKED_PARTITIONS,
    ConsumerGroup,
    ConsumerMember,
    compiled_regex,
    owner_lookup,
)
from logstore.server.consumer_group_assignors import ASSIGNORS
from logstore.server.consumer_group_reconciliation import reconcile
from logstore.server.consumer_group_storage import KeyValue, records_between
from logstore.server.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from logstore.server.coordinator_records import group_record
from logstore.server.group_metadata import EMPTY, STABLE, Group, group_id_fits
from logstore.server.group_results import ConsumerHeartbeat, ConsumerHeartbeatResult

Persist = Callable[[str, list[KeyValue]], None]


class TopicCatalog(Protocol):
    """The node's topics as the assignment needs them (Topics is one)."""

    def names(self) -> list[str]: ...
    def topic_id(self, topic: str) -> uuid.UUID: ...
    def partition_count(self, topic: str) -> int: ...
    def is_internal(self, topic: str) -> bool: ...


class Refused(Exception):
    """A heartbeat the coordinator refuses: its error code and message."""

    def __init__(self, error: int, message: str | None = None):
        super().__init__(message)
        self.error, self.message = error, message


class ConsumerGroupCoordinator:
    """The consumer groups among `groups` (shared with the classic coordinator: one id, one
    group of one protocol), their heartbeats and timers; `persist` writes a group's records."""

    def __init__(self, groups: dict[str, Group], topics: TopicCatalog, config: BrokerConfig, clock: Clock,
                 persist: Persist):
        self._groups, self._topics, self._config, self._clock, self._persist = groups, topics, config, clock, persist

    # ------------------------------------------------------------------ heartbeat

    def heartbeat(self, call: ConsumerHeartbeat, version: int = 1) -> ConsumerHeartbeatResult:
        """ConsumerGroupHeartbeat: join (epoch 0), heartbeat or acknowledge (the member's epoch),
        leave (-1) or leave as a static member that will return (-2)."""
        try:
            self._validate(call, version)
            group = self._consumer_group(call.group_id, create=call.member_epoch == JOIN_EPOCH)
            if call.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                return self._leave(group, call)
            return self._join_or_heartbeat(group, call)
        except Refused as refused:
            return ConsumerHeartbeatResult(refused.error, refused.message)

    def _validate(self, call: ConsumerHeartbeat, version: int) -> None:
        """Kafka's checks of a heartbeat's fields, as INVALID_REQUEST and the like."""
        def invalid(message: str) -> Refused:
            return Refused(ec.INVALID_REQUEST, message)
        if not call.group_id:
            raise invalid("GroupId can't be empty.")
        if not group_id_fits(call.group_id):
            raise Refused(ec.INVALID_GROUP_ID, "GroupId is too long.")
        if call.instance_id == "":
            raise invalid("InstanceId can't be empty.")
        if call.rack_id == "":
            raise invalid("RackId can't be empty.")
        if version >= 1 and not call.member_id:
            raise invalid("MemberId can't be empty.")
        if call.member_epoch == JOIN_EPOCH:
            if call.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if call.owned is None or call.owned:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if call.subscribed_topic_names is None and call.subscribed_topic_regex is None:
                raise invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif call.member_epoch == STATIC_LEAVE_EPOCH and call.instance_id is None:
            raise invalid("InstanceId can't be null.")
        elif call.member_epoch < STATIC_LEAVE_EPOCH:
            raise invalid("MemberEpoch is invalid.")
        elif call.member_epoch > JOIN_EPOCH and not call.member_id:
            raise invalid("MemberId can't be empty.")
        if call.subscribed_topic_regex and compiled_regex(call.subscribed_topic_regex) is None:
            raise Refused(ec.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex `{call.subscribed_topic_regex}` "
                                                      "is not a valid regular expression.")
        if call.server_assignor is not None and call.server_assignor not in self._config.group_consumer_assignors:
            raise Refused(ec.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {call.server_assignor} is not supported. "
                                                f"Supported assignors: {', '.join(self._config.group_consumer_assignors)}.")

    def _consumer_group(self, group_id: str, create: bool) -> Group:
        """The group of `group_id` as a consumer group; an empty classic group becomes one on a
        join, as Kafka converts it. GROUP_ID_NOT_FOUND for a classic group in use or none."""
        group = self._groups.get(group_id)
        if group is not None and group.consumer is not None:
            return group
        if group is not None and (group.members or group.pending_members):
            raise Refused(ec.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if not create:
            raise Refused(ec.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if group is None:
            group = Group(group_id, state_timestamp=self._clock.time_ms())
            self._groups[group_id] = group
        if group.protocol_type is not None or group.generation:  # its classic metadata is stored: drop it
            self._write(group_id, [group_record(group_id, None)])
        group.protocol_type, group.protocol, group.leader = CONSUMER_PROTOCOL_TYPE, None, None
        group.consumer = ConsumerGroup(assignor=self._config.group_consumer_assignors[0])
        return group

    def _join_or_heartbeat(self, group: Group, call: ConsumerHeartbeat) -> ConsumerHeartbeatResult:
        now = self._clock.time_ms()
        work = group.consumer.copy()
        member, joined = self._member(work, call)
        before = member
        member = dataclasses.replace(
            member, last_heartbeat_ms=now,
            instance_id=call.instance_id if call.instance_id is not None else member.instance_id,
            rack_id=call.rack_id if call.rack_id is not None else member.rack_id,
            client_id=call.client_id, client_host=call.client_host,
            subscribed_topic_names=(tuple(sorted(set(call.subscribed_topic_names)))
                                    if call.subscribed_topic_names is not None else member.subscribed_topic_names),
            subscribed_topic_regex=(call.subscribed_topic_regex or None
                                    if call.subscribed_topic_regex is not None else member.subscribed_topic_regex),
            rebalance_timeout_ms=(call.rebalance_timeout_ms if call.rebalance_timeout_ms != -1
                                  else member.rebalance_timeout_ms),
            server_assignor=call.server_assignor if call.server_assignor is not None else member.server_assignor)
        work.members[member.member_id] = member
        changed = joined or (before.subscribed_topic_names, before.subscribed_topic_regex, before.server_assignor) != \
            (member.subscribed_topic_names, member.subscribed_topic_regex, member.server_assignor)
        self._refresh(work, bump=changed)
        member = self._reconciled(work, member, call.owned, now)
        self._store(group, work)
        full = call.rebalance_timeout_ms != -1 and call.owned is not None and \
            (call.subscribed_topic_names is not None or call.subscribed_topic_regex is not None)
        # also a member that missed the answer that moved it (a timed-out request whose retry is
        # not a full one: it reports an older epoch, or partitions it no longer has) hears them again
        missed = JOIN_EPOCH < call.member_epoch < before.member_epoch or \
            (call.owned is not None and call.owned != member.assigned)
        tell = call.member_epoch == JOIN_EPOCH or full or missed or member.assigned != before.assigned
        return ConsumerHeartbeatResult(ec.NONE, None, member.member_id, member.member_epoch,
                                       self._config.group_consumer_heartbeat_interval_ms,
                                       member.assigned if tell else None)

    def _member(self, group: ConsumerGroup, call: ConsumerHeartbeat) -> tuple[ConsumerMember, bool]:
        """The member the heartbeat speaks for, and whether it is new to the group; a static
        member rejoining after its temporary leave takes over its old self (KIP-345's way)."""
        member_id = call.member_id or str(uuid.uuid4())  # v0 lets the coordinator name a new member
        existing = group.members.get(member_id)
        static = group.static_member(call.instance_id)
        if call.member_epoch == JOIN_EPOCH:
            if static is not None and static.member_id != member_id:
                if static.member_epoch != STATIC_LEAVE_EPOCH:
                    raise Refused(ec.UNRELEASED_INSTANCE_ID, f"Static member {static.member_id} with instance id "
                                                          f"{call.instance_id} is not released yet.")
                return self._replace_static(group, static, member_id), False
            if existing is not None:
                return existing, False
            if len(group.members) >= self._config.group_consumer_max_size:
                raise Refused(ec.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its maximum capacity.")
            return ConsumerMember(member_id, rebalance_timeout_ms=call.rebalance_timeout_ms), True
        if call.instance_id is not None and static is not None and static.member_id != member_id:
            raise Refused(ec.FENCED_INSTANCE_ID, f"Instance id {call.instance_id} belongs to another member.")
        if existing is None or (call.instance_id is not None and static is None):
            raise Refused(ec.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group.")
        if call.member_epoch > existing.member_epoch or (
                call.member_epoch < existing.member_epoch and not (
                    call.member_epoch == existing.previous_member_epoch and _within(call.owned, existing.assigned))):
            raise Refused(ec.FENCED_MEMBER_EPOCH, f"The consumer group member has member epoch {call.member_epoch}, "
                                                  f"the group coordinator knows it at {existing.member_epoch}. The "
                                                  "member must abandon all its partitions and rejoin.")
        return existing, False

    @staticmethod
    def _replace_static(group: ConsumerGroup, old: ConsumerMember, member_id: str) -> ConsumerMember:
        """The new member of a static instance: the old one's partitions, target and settings."""
        del group.members[old.member_id]
        if old.member_id in group.target:
            group.target[member_id] = group.target.pop(old.member_id)
        return dataclasses.replace(old, member_id=member_id, member_epoch=0, previous_member_epoch=0, revoking={})

    def _reconciled(self, group: ConsumerGroup, member: ConsumerMember, owned: dict | None, now: int) -> ConsumerMember:
        """`member` moved towards its target, its rebalance timeout set while it owes a revocation."""
        names = self._topics.names()
        subscribed = {t for t, (name, _) in group.topics.items() if name in member.subscribed_names(names)}
        updated = reconcile(member, group.assignment_epoch, group.target.get(member.member_id, {}), subscribed,
                            owner_lookup(group), owned)
        if updated.state != UNREVOKED_PARTITIONS:
            updated.revocation_deadline_ms = None
        elif member.state != UNREVOKED_PARTITIONS or member.revocation_deadline_ms is None:
            updated.revocation_deadline_ms = now + max(updated.rebalance_timeout_ms, 0)
        group.members[member.member_id] = updated
        return updated

    def _refresh(self, group: ConsumerGroup, bump: bool) -> None:
        """Bump the group epoch when membership, subscriptions or the subscribed topics' metadata
        changed, and compute the target assignment of a new epoch."""
        names = self._topics.names()
        existing = set(names)  # a regex matches no internal topic; a name may ask for one
        subscribed = {n for n in group.subscribed_names(n for n in names if not self._topics.is_internal(n))
                      if n in existing}
        topics = {self._topics.topic_id(n): (n, self._topics.partition_count(n)) for n in sorted(subscribed)}
        if bump or topics != group.topics:
            group.group_epoch += 1
            group.topics = topics
        if group.group_epoch <= group.assignment_epoch:
            return
        chosen = Counter(m.server_assignor for m in group.members.values() if m.server_assignor is not None)
        group.assignor = min(chosen, key=lambda a: (-chosen[a], a)) if chosen else \
            self._config.group_consumer_assignors[0]
        by_name = {name: t for t, (name, _) in topics.items()}
        subscriptions = {m.member_id: frozenset(by_name[n] for n in m.subscribed_names(names) if n in by_name)
                         for m in group.members.values()}
        group.target = ASSIGNORS[group.assignor](subscriptions, {t: n for t, (_, n) in topics.items()}, group.target)
        group.assignment_epoch = group.group_epoch

    def _leave(self, group: Group, call: ConsumerHeartbeat) -> ConsumerHeartbeatResult:
        work = group.consumer.copy()
        member = work.members.get(call.member_id)
        static = work.static_member(call.instance_id)
        if call.instance_id is not None and static is not None and static.member_id != call.member_id:
            raise Refused(ec.FENCED_INSTANCE_ID, f"Instance id {call.instance_id} belongs to another member.")
        if member is None:
            raise Refused(ec.UNKNOWN_MEMBER_ID, f"Member {call.member_id} is not a member of group.")
        if call.member_epoch == STATIC_LEAVE_EPOCH:  # it returns under the same instance id: keep its partitions
            work.members[member.member_id] = dataclasses.replace(member, member_epoch=STATIC_LEAVE_EPOCH, revoking={},
                                                                 revocation_deadline_ms=None)
        else:
            self._remove(work, member.member_id)
        self._store(group, work)
        return ConsumerHeartbeatResult(ec.NONE, None, call.member_id, call.member_epoch, 0)

    def _remove(self, group: ConsumerGroup, member_id: str) -> None:
        """Fence a member: its partitions become free, the group moves to a new epoch."""
        group.members.pop(member_id, None)
        group.target.pop(member_id, None)
        self._refresh(group, bump=True)

    def _store(self, group: Group, work: ConsumerGroup) -> None:
        """Write the records from the group's state to `work`, then make `work` its state."""
        self._write(group.group_id, records_between(group.group_id, group.consumer, work))
        now = self._clock.time_ms()
        was_empty = not group.consumer.members
        group.consumer = work
        group.state = STABLE if work.members else EMPTY  # what offset expiry reads
        if was_empty != (not work.members):
            group.state_timestamp = now

    def _write(self, group_id: str, records: list[KeyValue]) -> None:
        try:
            self._persist(group_id, records)
        except LogstoreError as exc:
            raise Refused(ec.for_exception(exc), str(exc)) from None

    # ------------------------------------------------------------------ timers

    def check_timers(self) -> None:
        """Fence the members past their session timeout and those that did not revoke within
        their rebalance timeout."""
        now = self._clock.time_ms()
        session = self._config.group_consumer_session_timeout_ms
        for group in list(self._groups.values()):
            if group.consumer is None:
                continue
            expired = [m.member_id for m in group.consumer.members.values()
                       if now - m.last_heartbeat_ms > session or
                       (m.revocation_deadline_ms is not None and now > m.revocation_deadline_ms)]
            if not expired:
                continue
            work = group.consumer.copy()
            for member_id in expired:
                self._remove(work, member_id)
            try:
                self._store(group, work)
            except Refused:
                continue  # tried again at the next check

    # ------------------------------------------------------------------ admin

    def to_classic(self, group: Group) -> int:
        """An empty consumer group joined by a classic member becomes a classic group, as Kafka
        converts it: its consumer records get tombstones. Returns the error of writing them."""
        try:
            self._write(group.group_id, records_between(group.group_id, group.consumer, None))
        except Refused as refused:
            return refused.error
        group.consumer, group.protocol_type, group.state = None, None, EMPTY
        return ec.NONE

    def describe(self, group_id: str) -> tuple[int, str | None, Group | None]:
        """ConsumerGroupDescribe of one group: (error, message, group)."""
        if not group_id or not group_id_fits(group_id):
            return ec.INVALID_GROUP_ID, None, None
        group = self._groups.get(group_id)
        if group is None:
            return ec.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
        if group.consumer is None:
            return ec.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.", None
        return ec.NONE, None, group



def _within(owned: dict | None, assigned: dict) -> bool:
    """Whether the partitions a heartbeat reports (None: not reported) are all assigned."""
    return owned is None or all(ps <= assigned.get(t, frozenset()) for t, ps in owned.items())

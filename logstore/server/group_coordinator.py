"""The classic group coordinator as a state machine (Kafka's GroupCoordinator with its
GroupMetadataManager and OffsetMetadataManager): JoinGroup/SyncGroup rebalances, static members
(KIP-345), heartbeats and session expiry, offset commits and fetches (transactional ones too)
and offset expiry. It takes typed calls and answers typed results (group_api.py speaks the
wire); every timer reads the injected clock. State is written to `__consumer_offsets` as
typed records (coordinator_records) and replayed at start-up."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import OrderedDict

from logstore.errors import LogstoreError
from logstore.log import Log
from logstore.server import error_codes as ec
from logstore.server.consumer_protocol import CONSUMER_PROTOCOL_TYPE, subscribed_topics
from logstore.server.context import ServerContext
from logstore.server.coordinator_records import (
    OFFSETS_TOPIC,
    OffsetAndMetadata,
    append_records,
    group_record,
    offset_record,
    partition_for,
    replay_groups,
)
from logstore.server.group_metadata import (
    COMPLETING,
    DEAD,
    EMPTY,
    MEMBER_ID_SUFFIX_BYTES,
    PREPARING,
    STABLE,
    Group,
    Member,
    expired_offsets,
    group_id_fits,
    record_string_fits,
    same_subscription,
)
from logstore.server.group_results import JoinResult, OffsetCommitEntry, PartitionOffset, SyncResult

TIMER_CHECK_S = 0.5  # how often the session, pending-member and offset-expiry timers are checked
JOIN_POLL_S = 0.01  # how often a rebalance looks whether every member has rejoined
CLIENT_HOST = "/127.0.0.1"

logger = logging.getLogger("logstore.server")


class GroupCoordinator:
    """Every group of the node (this node coordinates all __consumer_offsets partitions)."""

    def __init__(self, ctx: ServerContext):
        self._ctx = ctx
        self._groups: dict[str, Group] = {}
        self._timers: asyncio.Task | None = None
        self._partitions = ctx.topics.coordinator_partition_count(OFFSETS_TOPIC, ctx.config.offsets_topic_num_partitions)
        self._offsets_checked_ms = self._now_ms()
        for p in range(self._partitions):
            log = ctx.manager.get(OFFSETS_TOPIC, p)
            if log is not None:
                self._load(log)

    def _load(self, log: Log) -> None:
        now = self._now_ms()
        for stored in replay_groups(log).values():
            if stored.deleted and not stored.offsets:
                continue
            group = Group(stored.group_id, generation=stored.generation, protocol_type=stored.protocol_type,
                          protocol=stored.protocol, leader=stored.leader, offsets=stored.offsets,
                          pending_txn=stored.pending_txn, state_timestamp=stored.state_timestamp)
            for m in stored.members:
                group.members[m.member_id] = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                                    m.session_timeout, m.rebalance_timeout,
                                                    stored.protocol_type or "", [(stored.protocol or "", m.subscription)],
                                                    now, m.assignment)
            group.state = STABLE if group.members else EMPTY  # state_timestamp: the stored last change
            self._groups[group.group_id] = group

    # ------------------------------------------------------------------ storage

    def _offsets_log(self, group_id: str) -> Log:
        return self._ctx.topics.log(OFFSETS_TOPIC, self.offsets_partition(group_id))

    def offsets_partition(self, group_id: str) -> int:
        """The __consumer_offsets partition of `group_id` (the topic is created on first use)."""
        self._ctx.topics.ensure_internal(OFFSETS_TOPIC, self._partitions)
        return partition_for(group_id, self._partitions)

    def _now_ms(self) -> int:
        return self._ctx.clock.time_ms()

    def _store_group(self, group: Group) -> None:
        append_records(self._offsets_log(group.group_id), [group_record(group.group_id, group.stored())],
                       self._now_ms())

    def _group(self, group_id: str, create: bool = False) -> Group | None:
        group = self._groups.get(group_id)
        if group is None and create:
            group = self._groups[group_id] = Group(group_id, state_timestamp=self._now_ms())
        return group

    def _transition(self, group: Group, state: str) -> None:
        group.state, group.state_timestamp = state, self._now_ms()

    # ------------------------------------------------------------------ timers

    def start(self) -> None:
        """Start the timers (call inside the server's event loop): silent members, unused member
        ids and old offsets expire; members restored from the log expire too if their consumers
        never return."""
        if self._timers is None or self._timers.done():
            self._timers = asyncio.get_running_loop().create_task(self._timer_loop())

    async def _timer_loop(self) -> None:
        while True:
            await asyncio.sleep(TIMER_CHECK_S)
            self.check_timers()

    def check_timers(self) -> None:
        """Expire what the clock says is due: offsets at each `offsets.retention.check.interval.ms`
        (first, so a Stable group's rules apply to the time it was Stable), then pending member
        ids and members past their session timeout."""
        now = self._now_ms()
        if now - self._offsets_checked_ms >= self._ctx.config.offsets_retention_check_interval_ms:
            self._offsets_checked_ms = now
            self.expire_offsets(now)
        for group in list(self._groups.values()):
            for member_id in [m for m, deadline in group.pending_members.items() if deadline < now]:
                del group.pending_members[member_id]
            expired = [m for m in group.members.values()
                       if not m.awaiting() and now - m.last_heartbeat > m.session_timeout]
            for member in expired:
                self._remove_member(group, member)
            if expired:
                self._member_left(group)

    def _remove_member(self, group: Group, member: Member) -> None:
        group.members.pop(member.member_id, None)
        for future in (member.join, member.sync):
            if future is not None and not future.done():
                future.set_result(ec.UNKNOWN_MEMBER_ID)

    def _member_left(self, group: Group) -> None:
        if group.members:
            if group.state != PREPARING:
                self._prepare_rebalance(group)
        elif group.state != DEAD:
            self._become_empty(group)

    # ------------------------------------------------------------------ rebalance

    def _become_empty(self, group: Group) -> None:
        """The last member left: a new generation without members. Storing it may fail (a full
        disk, an altered __consumer_offsets): Kafka warns and goes on, and so does this, which
        runs in the timer and rebalance tasks too."""
        self._transition(group, EMPTY)
        group.generation += 1
        group.protocol, group.leader = None, None
        try:
            self._store_group(group)
        except LogstoreError as exc:
            logger.warning("failed to write the empty metadata of group %r: %s", group.group_id, exc)

    def _prepare_rebalance(self, group: Group) -> None:
        was_empty = group.state == EMPTY
        if group.state == COMPLETING:
            for member in group.members.values():  # the leader's assignment will not come
                if member.sync is not None and not member.sync.done():
                    member.sync.set_result(ec.REBALANCE_IN_PROGRESS)
        self._transition(group, PREPARING)
        delay = self._ctx.config.group_initial_rebalance_delay_ms if was_empty else 0
        if group.rebalance is None or group.rebalance.done():
            group.rebalance = asyncio.get_running_loop().create_task(self._complete_join(group, delay))

    async def _complete_join(self, group: Group, initial_delay_ms: int) -> None:
        """Wait for every member to rejoin (up to the rebalance timeout, on the clock), then
        start the next generation. Dynamic members that did not rejoin are removed; static ones
        stay with their last metadata, and while no member at all rejoined the wait starts over
        (their session timeout removes them), as in Kafka."""
        while True:
            timeout = max((m.rebalance_timeout for m in group.members.values()), default=0)
            start = self._now_ms()
            delay_end = start + min(initial_delay_ms, timeout)
            initial_delay_ms = 0
            while self._now_ms() < delay_end:
                await asyncio.sleep(JOIN_POLL_S)
            while self._now_ms() - start < timeout and not all(m.joining() for m in group.members.values()):
                await asyncio.sleep(JOIN_POLL_S)
            for member in list(group.members.values()):
                if not member.joining() and member.group_instance_id is None:
                    self._remove_member(group, member)
            if not group.members or any(m.joining() for m in group.members.values()):
                break
            await asyncio.sleep(TIMER_CHECK_S)
        if not group.members:
            self._become_empty(group)
            return
        group.generation += 1
        self._transition(group, COMPLETING)
        if group.leader not in group.members or not group.members[group.leader].joining():
            group.leader = next(m.member_id for m in group.members.values() if m.joining())
        group.protocol = group.select_protocol()
        now = self._now_ms()
        for member in group.members.values():
            if member.joining():
                member.last_heartbeat = now
                member.join.set_result(ec.NONE)

    # ------------------------------------------------------------------ membership

    @staticmethod
    def _joined(group: Group, member_id: str, error: int, leader: str | None = None) -> JoinResult:
        """The JoinGroup result; `leader` overrides the group's leader (a static member's
        rejoin in a Stable group names the old leader so that nobody reassigns)."""
        if error != ec.NONE:
            return JoinResult(error, member_id)
        leader = group.leader if leader is None else leader
        members = ()
        if member_id == leader:
            members = tuple((m.member_id, m.group_instance_id, m.metadata(group.protocol))
                            for m in group.members.values())
        return JoinResult(ec.NONE, member_id, group.generation, group.protocol_type, group.protocol, leader, members)

    def _join_error(self, group_id: str, member_id: str, instance_id: str | None, client_id: str,
                    session_timeout_ms: int, protocol_type: str, protocols: list[tuple[str, bytes]]) -> int:
        """Why a JoinGroup cannot be taken at all, else NONE."""
        config = self._ctx.config
        if not group_id or not group_id_fits(group_id):
            return ec.INVALID_GROUP_ID
        if not config.group_min_session_timeout_ms <= session_timeout_ms <= config.group_max_session_timeout_ms:
            return ec.INVALID_SESSION_TIMEOUT
        if not protocol_type or not protocols:  # Kafka's supportsProtocols
            return ec.INCONSISTENT_GROUP_PROTOCOL
        # every string the member's group record holds, a member id made of the instance or client id included
        named = [protocol_type, *(name for name, _ in protocols)]
        if not (all(map(record_string_fits, named)) and
                record_string_fits(instance_id or client_id, MEMBER_ID_SUFFIX_BYTES)):
            return ec.INVALID_REQUEST
        return ec.NONE

    async def join(self, group_id: str, member_id: str, instance_id: str | None, client_id: str, *,
                   session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
                   protocols: list[tuple[str, bytes]], require_known_member_id: bool) -> JoinResult:
        """JoinGroup: waits for the rebalance this join starts or joins. With
        `require_known_member_id` (KIP-394) a new dynamic member first gets MEMBER_ID_REQUIRED."""
        error = self._join_error(group_id, member_id, instance_id, client_id, session_timeout_ms, protocol_type,
                                 protocols)
        if error != ec.NONE:
            return JoinResult(error, member_id)
        group = self._group(group_id, create=True)
        if group.state == DEAD:
            return JoinResult(ec.COORDINATOR_NOT_AVAILABLE, member_id)
        if group.protocol_type not in (None, protocol_type) and group.members:
            return JoinResult(ec.INCONSISTENT_GROUP_PROTOCOL, member_id)
        rebalance_timeout = rebalance_timeout_ms if rebalance_timeout_ms > 0 else session_timeout_ms
        if not member_id:
            member_id = f"{instance_id or client_id or 'client'}-{uuid.uuid4()}"
            static = group.static_member(instance_id)
            if static is not None:
                return await self._rejoin_static(group, static, member_id, client_id, session_timeout_ms,
                                                 rebalance_timeout, protocols)
            if instance_id is None and require_known_member_id:  # KIP-394: dynamic members learn their id first
                # forgotten after a session timeout unless it joins, as in Kafka: a client
                # asking for ids in a loop would otherwise grow the set without bound
                group.pending_members[member_id] = self._now_ms() + session_timeout_ms
                return JoinResult(ec.MEMBER_ID_REQUIRED, member_id)
        elif member_id not in group.pending_members:
            error = group.member_error(member_id, instance_id)
            if error != ec.NONE:
                return JoinResult(error, member_id)
        if member_id not in group.members and len(group.members) >= self._ctx.config.group_max_size:
            return JoinResult(ec.GROUP_MAX_SIZE_REACHED, member_id)
        group.pending_members.pop(member_id, None)
        member = group.members.get(member_id)
        if member is None:
            member = Member(member_id, instance_id, client_id, CLIENT_HOST, session_timeout_ms, rebalance_timeout,
                            protocol_type, protocols, self._now_ms())
            group.members[member_id] = member
        else:
            unchanged = member.protocols == protocols
            member.protocols, member.session_timeout = protocols, session_timeout_ms
            member.rebalance_timeout = rebalance_timeout
            member.last_heartbeat = self._now_ms()
            # a member that missed its answer gets the current generation again, as in Kafka
            if unchanged and (group.state == COMPLETING or (group.state == STABLE and member_id != group.leader)):
                return self._joined(group, member_id, ec.NONE)
        group.protocol_type = protocol_type
        return await self._await_join(group, member)

    async def _await_join(self, group: Group, member: Member) -> JoinResult:
        member.join = asyncio.get_running_loop().create_future()
        if group.state != PREPARING:
            self._prepare_rebalance(group)
        error = await member.join
        return self._joined(group, member.member_id, error)

    async def _rejoin_static(self, group: Group, member: Member, member_id: str, client_id: str,
                             session_timeout_ms: int, rebalance_timeout_ms: int,
                             protocols: list[tuple[str, bytes]]) -> JoinResult:
        """A known static instance joins with a new member id: the old id is fenced and the new
        one takes its place and assignment. A Stable group whose subscriptions and protocol stay
        the same does not rebalance (KIP-345)."""
        old_id, old_leader = member.member_id, group.leader
        for future in (member.join, member.sync):
            if future is not None and not future.done():
                future.set_result(ec.FENCED_INSTANCE_ID)
        group.members = OrderedDict((member_id if key == old_id else key, m) for key, m in group.members.items())
        if group.leader == old_id:
            group.leader = member_id
        old_metadata = member.metadata(group.protocol)
        member.member_id, member.join, member.sync = member_id, None, None
        member.client_id, member.protocols = client_id, protocols
        member.session_timeout, member.rebalance_timeout = session_timeout_ms, rebalance_timeout_ms
        member.last_heartbeat = self._now_ms()
        if group.state == STABLE and group.select_protocol() == group.protocol and \
                same_subscription(group.protocol_type, old_metadata, member.metadata(group.protocol)):
            try:
                self._store_group(group)
            except LogstoreError as exc:
                return JoinResult(ec.for_exception(exc), member_id)
            return self._joined(group, member_id, ec.NONE, leader=old_leader)
        return await self._await_join(group, member)

    async def sync(self, group_id: str, member_id: str, instance_id: str | None, generation: int,
                   assignments: dict[str, bytes]) -> SyncResult:
        """SyncGroup: the leader's `assignments` complete the rebalance; the others wait for them."""
        group = self._group(group_id)

        def answer(error: int, assignment: bytes = b"") -> SyncResult:
            if group is None:
                return SyncResult(error, assignment=assignment)
            return SyncResult(error, group.protocol_type, group.protocol, assignment)

        error = ec.UNKNOWN_MEMBER_ID if group is None else group.member_error(member_id, instance_id)
        if error != ec.NONE:
            return answer(error)
        if generation != group.generation:
            return answer(ec.ILLEGAL_GENERATION)
        member = group.members[member_id]
        member.last_heartbeat = self._now_ms()
        if group.state == PREPARING:
            return answer(ec.REBALANCE_IN_PROGRESS)
        if group.state == STABLE:
            return answer(ec.NONE, member.assignment)
        if member_id == group.leader:
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            try:
                self._store_group(group)
                error = ec.NONE
            except LogstoreError as exc:
                error = ec.for_exception(exc)
            if error == ec.NONE:
                self._transition(group, STABLE)
            for m in group.members.values():
                if m.sync is not None and not m.sync.done():
                    m.sync.set_result(error)
            return answer(error, member.assignment)
        member.sync = asyncio.get_running_loop().create_future()
        error = await member.sync
        return answer(error, member.assignment if error == ec.NONE else b"")

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation: int) -> int:
        """Heartbeat: keeps the member's session; REBALANCE_IN_PROGRESS tells it to rejoin."""
        group = self._group(group_id)
        error = ec.UNKNOWN_MEMBER_ID if group is None else group.member_error(member_id, instance_id)
        if error == ec.NONE:
            if generation != group.generation:
                error = ec.ILLEGAL_GENERATION
            else:
                group.members[member_id].last_heartbeat = self._now_ms()
                if group.state == PREPARING:
                    error = ec.REBALANCE_IN_PROGRESS
        return error

    def leave(self, group_id: str, leaving: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """LeaveGroup of (member id, instance id) pairs, an empty member id naming a static member
        by its instance id: the group's error and each member's."""
        group = self._group(group_id)
        errors = []
        removed = False
        for member_id, instance_id in leaving:
            current = member_id
            if group is None:
                error = ec.UNKNOWN_MEMBER_ID
            elif not member_id:  # an administrator removes a static member by its instance id
                static = group.static_member(instance_id)
                error = ec.UNKNOWN_MEMBER_ID if static is None else ec.NONE
                current = static.member_id if static is not None else current
            elif member_id in group.pending_members:
                group.pending_members.pop(member_id, None)
                error = ec.NONE
            else:
                error = group.member_error(member_id, instance_id)
            if error == ec.NONE and current in group.members:
                self._remove_member(group, group.members[current])
                removed = True
            errors.append(error)
        if removed:
            self._member_left(group)
        return (ec.UNKNOWN_MEMBER_ID if group is None else ec.NONE), errors

    # ------------------------------------------------------------------ offsets

    def check_member(self, group_id: str, member_id: str, generation: int,
                     group_instance_id: str | None = None) -> int:
        """NONE if `member_id` (static as `group_instance_id`) at `generation` may commit for
        `group_id` (or a simple commit), else the error. A rebalance does not stop a member of
        the current generation: it commits what it processed before it rejoins, as in Kafka."""
        group = self._group(group_id)
        if generation < 0 and not member_id and group_instance_id is None:
            return ec.NONE if group is None or not group.members else ec.UNKNOWN_MEMBER_ID
        error = ec.UNKNOWN_MEMBER_ID if group is None else group.member_error(member_id, group_instance_id)
        if error != ec.NONE:
            return error
        if generation != group.generation:
            return ec.ILLEGAL_GENERATION
        return ec.NONE

    def commit(self, group_id: str, offsets: dict[tuple[str, int], OffsetAndMetadata], *,
               producer_id: int = -1, producer_epoch: int = -1) -> int:
        """Write offsets (transactional ones wait for their marker); returns an error code."""
        records = [offset_record(group_id, t, p, om) for (t, p), om in offsets.items()]
        try:
            append_records(self._offsets_log(group_id), records, self._now_ms(), producer_id=producer_id,
                           producer_epoch=producer_epoch)
        except LogstoreError as exc:
            return ec.for_exception(exc)
        group = self._group(group_id, create=True)
        if producer_id >= 0:
            group.pending_txn.setdefault(producer_id, {}).update(offsets)
        else:
            group.offsets.update(offsets)
        return ec.NONE

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> tuple[int, dict[tuple[str, int], int]]:
        """OffsetDelete as Kafka's coordinator rules it: (group error, error per partition).
        An Empty group loses any offsets; a consumer group only those of topics no member
        subscribes to (GROUP_SUBSCRIBED_TO_TOPIC); another non-empty group none (NON_EMPTY_GROUP)."""
        group = self._group(group_id)
        if group is None or group.state == DEAD:
            return ec.GROUP_ID_NOT_FOUND, {}
        subscribed: frozenset[str] = frozenset()
        if group.state != EMPTY:
            if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
                return ec.NON_EMPTY_GROUP, {}
            subscribed = frozenset().union(*(subscribed_topics(m.metadata(group.protocol)) or frozenset()
                                             for m in group.members.values()))
        errors = {tp: ec.GROUP_SUBSCRIBED_TO_TOPIC if tp[0] in subscribed else ec.NONE for tp in partitions}
        deleted = [tp for tp, error in errors.items() if error == ec.NONE and tp in group.offsets]
        try:
            if deleted:
                append_records(self._offsets_log(group_id), [offset_record(group_id, t, p, None) for t, p in deleted],
                               self._now_ms())
        except LogstoreError as exc:
            return ec.for_exception(exc), {}
        for tp in deleted:
            del group.offsets[tp]
        return ec.NONE, errors

    def complete_transaction(self, producer_id: int, committed: bool) -> None:
        """Apply or drop the offsets `producer_id` committed in its transaction (after the marker)."""
        for group in self._groups.values():
            pending = group.pending_txn.pop(producer_id, None)
            if pending and committed:
                group.offsets.update(pending)

    def offsets_to_commit(self, entries: list[OffsetCommitEntry]) -> tuple[dict[tuple[str, int], OffsetAndMetadata],
                                                                           dict[tuple[str, int], int]]:
        """The offsets of an (Txn)OffsetCommit that may be written, and the error of each one
        that may not, as Kafka refuses them: UNKNOWN_TOPIC_OR_PARTITION for a partition the
        node does not have, OFFSET_METADATA_TOO_LARGE past offset.metadata.max.bytes."""
        now = self._now_ms()
        offsets, errors = {}, {}
        for e in entries:
            tp = (e.topic, e.partition)
            metadata = e.metadata or ""
            if self._ctx.partition(*tp) is None:
                errors[tp] = ec.UNKNOWN_TOPIC_OR_PARTITION
            elif len(metadata) > self._ctx.config.offset_metadata_max_bytes:
                errors[tp] = ec.OFFSET_METADATA_TOO_LARGE
            else:
                offsets[tp] = OffsetAndMetadata(e.offset, e.leader_epoch, metadata, now)
        return offsets, errors

    def commit_offsets(self, group_id: str, member_id: str, generation: int, instance_id: str | None,
                       entries: list[OffsetCommitEntry]) -> tuple[int, dict[tuple[str, int], int]]:
        """OffsetCommit: the error of the whole commit and those of single partitions."""
        offsets, errors = self.offsets_to_commit(entries)
        group = self._group(group_id)
        if not group_id_fits(group_id):  # an empty id is a simple commit, as in Kafka
            error = ec.INVALID_GROUP_ID
        else:
            error = self.check_member(group_id, member_id, generation, instance_id)
        if error == ec.NONE and group is not None and group.state == COMPLETING:
            error = ec.REBALANCE_IN_PROGRESS  # joined the new generation but not yet given its partitions
        if error == ec.NONE and offsets:
            error = self.commit(group_id, offsets)
        return error, errors

    def fetch_offsets(self, group_id: str, wanted: dict[str, list[int]] | None,
                      require_stable: bool) -> dict[str, list[PartitionOffset]]:
        """OffsetFetch of `wanted` partitions by topic (None: every committed one). With
        `require_stable`, a partition with a transactional commit pending is UNSTABLE_OFFSET_COMMIT."""
        group = self._group(group_id)
        committed = group.offsets if group else {}
        pending = {tp for txn in group.pending_txn.values() for tp in txn} if group else set()
        if wanted is None:
            wanted = {}
            for t, p in sorted(committed):
                wanted.setdefault(t, []).append(p)
        found = {}
        for name, partitions in wanted.items():
            entries = []
            for p in partitions:
                om = committed.get((name, p))
                error = ec.UNSTABLE_OFFSET_COMMIT if require_stable and (name, p) in pending else ec.NONE
                entries.append(PartitionOffset(p, om.offset if om and error == ec.NONE else -1,
                                               om.leader_epoch if om else -1, om.metadata if om else "", error))
            found[name] = entries
        return found

    def expire_offsets(self, now_ms: int) -> int:
        """Drop committed offsets older than `offsets.retention.minutes` (group_metadata's
        expired_offsets). Tombstones go to __consumer_offsets; an Empty group left without
        offsets is Dead and deleted. Returns the number of offsets removed."""
        removed = 0
        retention_ms = self._ctx.config.offsets_retention_minutes * 60_000
        for group in list(self._groups.values()):
            expired = expired_offsets(group, now_ms, retention_ms)
            dead = group.state == EMPTY and not group.members and not group.pending_members and \
                len(expired) == len(group.offsets) and not any(group.pending_txn.values())
            if not expired and not dead:
                continue
            records = [offset_record(group.group_id, t, p, None) for t, p in expired]
            if dead:
                records.append(group_record(group.group_id, None))
            try:
                append_records(self._offsets_log(group.group_id), records, now_ms)
            except LogstoreError as exc:
                logger.warning("expiring offsets of group %r failed, tried again at the next check: %s",
                               group.group_id, exc)
                continue
            for tp in expired:
                del group.offsets[tp]
            removed += len(expired)
            if dead:
                self._transition(group, DEAD)
                del self._groups[group.group_id]
        return removed

    # ------------------------------------------------------------------ admin

    def describe(self, group_id: str) -> Group | None:
        """The group of `group_id`, to describe (None: Dead); not to be changed by the caller."""
        return self._group(group_id)

    def listed(self, states: set[str]) -> list[Group]:
        """The groups that are not Dead, in `states` when any are given."""
        return [g for g in self._groups.values() if g.state != DEAD and (not states or g.state in states)]

    def delete(self, group_id: str) -> int:
        """DeleteGroups of one group: its offsets and metadata get tombstones; NON_EMPTY_GROUP
        while it has members."""
        group = self._group(group_id)
        if group is None or group.state == DEAD:
            return ec.GROUP_ID_NOT_FOUND
        if group.members:
            return ec.NON_EMPTY_GROUP
        records = [offset_record(group_id, t, p, None) for t, p in group.offsets]
        records.append(group_record(group_id, None))
        try:
            append_records(self._offsets_log(group_id), records, self._now_ms())
        except LogstoreError as exc:
            return ec.for_exception(exc)
        del self._groups[group_id]
        return ec.NONE

    def close(self) -> None:
        """Stop the background tasks."""
        for task in [self._timers, *(g.rebalance for g in self._groups.values())]:
            if task is not None:
                task.cancel()

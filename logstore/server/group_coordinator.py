"""The classic group coordinator as a state machine (Kafka's GroupCoordinator): JoinGroup/
SyncGroup rebalances, static members (KIP-345), heartbeats, session expiry and the timers,
over the groups and offsets a GroupStore keeps (group_store.py: commits, fetches, expiry).
It takes typed calls and answers typed results (group_api.py speaks the wire); every timer
reads the injected clock."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import OrderedDict

from logstore.errors import LogstoreError
from logstore.server import error_codes as ec
from logstore.server.consumer_group_coordinator import ConsumerGroupCoordinator
from logstore.server.context import ServerContext
from logstore.server.coordinator_records import group_record, offset_record
from logstore.server.group_metadata import (
    COMPLETING,
    DEAD,
    EMPTY,
    MEMBER_ID_SUFFIX_BYTES,
    PREPARING,
    STABLE,
    Group,
    Member,
    group_id_fits,
    group_tombstones,
    record_string_fits,
    same_subscription,
)
from logstore.server.group_results import JoinResult, SyncResult
from logstore.server.group_store import GroupStore

TIMER_CHECK_S = 0.5  # how often the session, pending-member and offset-expiry timers are checked
JOIN_POLL_S = 0.01  # how often a rebalance looks whether every member has rejoined
CLIENT_HOST = "/127.0.0.1"

logger = logging.getLogger("logstore.server")


class GroupCoordinator(GroupStore):
    """Every group the node coordinates (all of them on a single node; in a cluster those of
    the __consumer_offsets partitions it leads): the rebalance protocol and the timers over the
    groups and offsets GroupStore keeps."""

    def __init__(self, ctx: ServerContext):
        super().__init__(ctx)
        self._timers: asyncio.Task | None = None
        self._offsets_checked_ms = self._now_ms()
        # KIP-848 groups share the ids (one id, one protocol), the offsets and the timers
        self.consumer_groups = ConsumerGroupCoordinator(self._groups, ctx.topics, ctx.config, ctx.clock,
                                                        self._append_group_records)

    def _append_group_records(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> None:
        if records:
            self._append(group_id, records, self._now_ms())

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
        self.consumer_groups.check_timers()
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

    def _unload(self, partition: int) -> list[Group]:
        """Another node coordinates these groups now: their rebalances stop and the members
        waiting in JoinGroup or SyncGroup are answered NOT_COORDINATOR, to find the new one."""
        gone = super()._unload(partition)
        for group in gone:
            if group.rebalance is not None:
                group.rebalance.cancel()
            for member in group.members.values():
                for future in (member.join, member.sync):
                    if future is not None and not future.done():
                        future.set_result(ec.NOT_COORDINATOR)
        return gone

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
        if self.coordinator_error(group_id) != ec.NONE:
            return self.coordinator_error(group_id)
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
        if group.consumer is not None:  # a KIP-848 group: joined classically only once empty
            error = ec.INCONSISTENT_GROUP_PROTOCOL if group.consumer.members else \
                self.consumer_groups.to_classic(group)
            if error != ec.NONE:
                return JoinResult(error, member_id)
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
        the same does not rebalance (KIP-345): the new id is stored, and where the ISR does not
        take it the old one comes back and the joiner gets no id (Kafka's revert)."""
        old_id, old_leader = member.member_id, group.leader
        old = (member.client_id, member.protocols, member.session_timeout, member.rebalance_timeout)
        for future in (member.join, member.sync):
            if future is not None and not future.done():
                future.set_result(ec.FENCED_INSTANCE_ID)
        self._rename_member(group, old_id, member_id)
        old_metadata = member.metadata(group.protocol)
        member.join, member.sync = None, None
        member.client_id, member.protocols = client_id, protocols
        member.session_timeout, member.rebalance_timeout = session_timeout_ms, rebalance_timeout_ms
        member.last_heartbeat = self._now_ms()
        if group.state == STABLE and group.select_protocol() == group.protocol and \
                same_subscription(group.protocol_type, old_metadata, member.metadata(group.protocol)):
            error, _ = await self._write(group.group_id, [group_record(group.group_id, group.stored())])
            if error != ec.NONE:
                if group.members.get(member_id) is member:
                    self._rename_member(group, member_id, old_id)
                    member.client_id, member.protocols, member.session_timeout, member.rebalance_timeout = old
                return JoinResult(error, "")
            return self._joined(group, member_id, ec.NONE, leader=old_leader)
        return await self._await_join(group, member)

    @staticmethod
    def _rename_member(group: Group, old_id: str, new_id: str) -> None:
        """The member `old_id` goes by `new_id`, in its place and with its leadership."""
        group.members = OrderedDict((new_id if key == old_id else key, m) for key, m in group.members.items())
        group.members[new_id].member_id = new_id
        if group.leader == old_id:
            group.leader = new_id

    async def sync(self, group_id: str, member_id: str, instance_id: str | None, generation: int,
                   assignments: dict[str, bytes]) -> SyncResult:
        """SyncGroup: the leader's `assignments` complete the rebalance; the others wait for them."""
        if self.coordinator_error(group_id) != ec.NONE:
            return SyncResult(self.coordinator_error(group_id))
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
        if self.coordinator_error(group_id) != ec.NONE:
            return self.coordinator_error(group_id)
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

    async def leave(self, group_id: str, leaving: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """LeaveGroup of (member id, instance id) pairs, an empty member id naming a static member
        by its instance id: the group's error and each member's, once the ISR holds the group's
        writes (a group left empty is stored)."""
        if self.coordinator_error(group_id) != ec.NONE:
            return self.coordinator_error(group_id), [self.coordinator_error(group_id)] * len(leaving)
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
        if group is None:
            return ec.UNKNOWN_MEMBER_ID, errors
        error = await self.replicated(group_id)
        return error, errors if error == ec.NONE else [error] * len(leaving)

    # ------------------------------------------------------------------ admin

    def describe(self, group_id: str) -> Group | None:
        """The group of `group_id`, to describe (None: Dead); not to be changed by the caller."""
        return self._group(group_id)

    def listed(self, states: set[str], types: set[str] = frozenset()) -> list[Group]:
        """The groups that are not Dead, in `states` and of `types` when any are given (matched
        without regard to case, as Kafka parses them)."""
        states, types = {s.lower() for s in states}, {t.lower() for t in types}
        return [g for g in self._groups.values() if g.state != DEAD
                and (not states or g.reported_state().lower() in states)
                and (not types or g.group_type in types)]

    async def delete(self, group_id: str) -> int:
        """DeleteGroups of one group: its offsets and metadata get tombstones, answered once the
        ISR holds them; NON_EMPTY_GROUP while it has members. Kafka's coordinator forgets the
        group before its tombstones are replicated, and so does this."""
        if self.coordinator_error(group_id) != ec.NONE:
            return self.coordinator_error(group_id)
        group = self._group(group_id)
        if group is None or group.state == DEAD:
            return ec.GROUP_ID_NOT_FOUND
        if group.members or (group.consumer is not None and group.consumer.members):
            return ec.NON_EMPTY_GROUP
        records = [offset_record(group_id, t, p, None) for t, p in group.offsets]
        records += group_tombstones(group)
        try:
            end = self._append(group_id, records, self._now_ms())
        except LogstoreError as exc:
            return ec.for_exception(exc)
        self._transition(group, DEAD)
        del self._groups[group_id]
        return await self.coordinated.replicated(group_id, end)

    def close(self) -> None:
        """Stop the background tasks."""
        for task in [self._timers, *(g.rebalance for g in self._groups.values())]:
            if task is not None:
                task.cancel()
        self.coordinated.close()

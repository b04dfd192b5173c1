"""The classic group coordinator: JoinGroup/SyncGroup rebalances, static members (KIP-345),
heartbeats and session expiry, offset commits and fetches (transactional ones too) and offset
expiry, as Kafka's GroupCoordinator. State is written to `__consumer_offsets` (group_log) and
replayed at start-up."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from logstore.errors import LogstoreError
from logstore.log import Log
from logstore.server import error_codes as ec
from logstore.server.consumer_protocol import CONSUMER_PROTOCOL_TYPE, subscribed_topics
from logstore.server.context import ServerContext
from logstore.server.group_log import (
    OFFSETS_TOPIC,
    OffsetAndMetadata,
    StoredMember,
    append_records,
    group_record,
    offset_record,
    partition_for,
    replay,
)
from logstore.server.protocol import Request

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"
EXPIRY_CHECK_S = 0.5
MAX_RECORD_STRING_BYTES = 32_767  # what the int16 length of a __consumer_offsets record string holds
MEMBER_ID_SUFFIX_BYTES = 37  # "-" and a uuid, after the instance or client id a member id starts with

logger = logging.getLogger("logstore.server")


@dataclass
class Member:
    """A group member and the answers it awaits."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout: int
    rebalance_timeout: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join: asyncio.Future | None = None
    sync: asyncio.Future | None = None
    last_heartbeat: float = field(default_factory=time.monotonic)

    def metadata(self, protocol: str | None) -> bytes:
        """The member's metadata for `protocol` (empty if it does not support it)."""
        return next((meta for name, meta in self.protocols if name == protocol), b"")

    def awaiting(self) -> bool:
        return (self.join is not None and not self.join.done()) or (self.sync is not None and not self.sync.done())


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
    pending_members: dict[str, float] = field(default_factory=dict)  # KIP-394 member id -> monotonic deadline
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    pending_txn: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = field(default_factory=dict)
    rebalance: asyncio.Task | None = None
    state_timestamp: int = -1  # wall-clock ms of the last state change; -1 if unknown (old records)

    def static_member(self, group_instance_id: str | None) -> Member | None:
        """The current member of a static instance id, if any."""
        if group_instance_id is None:
            return None
        return next((m for m in self.members.values() if m.group_instance_id == group_instance_id), None)


class GroupCoordinator:
    """Every group of the node (this node coordinates all __consumer_offsets partitions)."""

    def __init__(self, ctx: ServerContext):
        self._ctx = ctx
        self._groups: dict[str, Group] = {}
        self._expiry: asyncio.Task | None = None
        self._partitions = ctx.topics.coordinator_partition_count(OFFSETS_TOPIC, ctx.config.offsets_topic_num_partitions)
        self._offsets_checked_ms = self._now_ms()
        for p in range(self._partitions):
            log = ctx.manager.get(OFFSETS_TOPIC, p)
            if log is not None:
                self._load(log)

    def _load(self, log: Log) -> None:
        for stored in replay(log).values():
            if stored.deleted and not stored.offsets:
                continue
            group = Group(stored.group_id, generation=stored.generation, protocol_type=stored.protocol_type,
                          protocol=stored.protocol, leader=stored.leader, offsets=stored.offsets,
                          pending_txn=stored.pending_txn, state_timestamp=stored.state_timestamp)
            for m in stored.members:
                group.members[m.member_id] = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                                    m.session_timeout, m.rebalance_timeout,
                                                    stored.protocol_type or "", [(stored.protocol or "", m.subscription)],
                                                    m.assignment)
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
        members = [StoredMember(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout,
                                m.session_timeout, m.metadata(group.protocol), m.assignment)
                   for m in group.members.values()]
        record = group_record(group.group_id, group.protocol_type or "", group.generation, group.protocol,
                              group.leader, members, group.state_timestamp)
        append_records(self._offsets_log(group.group_id), [record], self._now_ms())

    def _group(self, group_id: str, create: bool = False) -> Group | None:
        group = self._groups.get(group_id)
        if group is None and create:
            group = self._groups[group_id] = Group(group_id, state_timestamp=self._now_ms())
        return group

    def _transition(self, group: Group, state: str) -> None:
        group.state, group.state_timestamp = state, self._now_ms()

    # ------------------------------------------------------------------ expiry

    def start(self) -> None:
        """Start expiring silent members and old offsets (call inside the server's event loop):
        members restored from the log expire too if their consumers never return."""
        if self._expiry is None or self._expiry.done():
            self._expiry = asyncio.get_running_loop().create_task(self._expire_loop())

    async def _expire_loop(self) -> None:
        while True:
            await asyncio.sleep(EXPIRY_CHECK_S)
            now = time.monotonic()
            for group in list(self._groups.values()):
                for member_id in [m for m, deadline in group.pending_members.items() if deadline < now]:
                    del group.pending_members[member_id]
                expired = [m for m in group.members.values()
                           if not m.awaiting() and now - m.last_heartbeat > m.session_timeout / 1000]
                for member in expired:
                    self._remove_member(group, member)
                if expired:
                    self._member_left(group)
            now_ms = self._now_ms()
            if now_ms - self._offsets_checked_ms >= self._ctx.config.offsets_retention_check_interval_ms:
                self._offsets_checked_ms = now_ms
                self.expire_offsets(now_ms)

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
        runs in the expiry and rebalance tasks too."""
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
        delay = self._ctx.config.group_initial_rebalance_delay_ms / 1000 if was_empty else 0.0
        if group.rebalance is None or group.rebalance.done():
            group.rebalance = asyncio.get_running_loop().create_task(self._complete_join(group, delay))

    async def _complete_join(self, group: Group, initial_delay: float) -> None:
        """Wait for every member to rejoin (up to the rebalance timeout), then start the next
        generation. Dynamic members that did not rejoin are removed; static ones stay with
        their last metadata, and while no member at all rejoined the wait starts over (their
        session timeout removes them), as in Kafka."""
        while True:
            timeout = max((m.rebalance_timeout for m in group.members.values()), default=0) / 1000
            start = time.monotonic()
            if initial_delay:
                await asyncio.sleep(min(initial_delay, timeout))
                initial_delay = 0.0
            while time.monotonic() - start < timeout and not all(_joining(m) for m in group.members.values()):
                await asyncio.sleep(0.01)
            for member in list(group.members.values()):
                if not _joining(member) and member.group_instance_id is None:
                    self._remove_member(group, member)
            if not group.members or any(_joining(m) for m in group.members.values()):
                break
            await asyncio.sleep(EXPIRY_CHECK_S)
        if not group.members:
            self._become_empty(group)
            return
        group.generation += 1
        self._transition(group, COMPLETING)
        if group.leader not in group.members or not _joining(group.members[group.leader]):
            group.leader = next(m.member_id for m in group.members.values() if _joining(m))
        group.protocol = self._select_protocol(group)
        for member in group.members.values():
            if _joining(member):
                member.last_heartbeat = time.monotonic()
                member.join.set_result(ec.NONE)

    def _select_protocol(self, group: Group) -> str | None:
        candidates = [name for name, _ in group.members[group.leader].protocols]
        for name in candidates:
            if all(any(n == name for n, _ in m.protocols) for m in group.members.values()):
                return name
        return candidates[0] if candidates else None

    # ------------------------------------------------------------------ APIs

    async def find_coordinator(self, req: Request) -> Any:
        body = req.body
        ctx = self._ctx
        if req.version >= 4:
            cls = req.spec.response.Coordinator
            coordinators = [cls(key=key, node_id=ctx.node_id, host=ctx.host, port=ctx.port, error_code=ec.NONE,
                                error_message=None) for key in body.coordinator_keys]
            return req.response(throttle_time_ms=0, coordinators=coordinators)
        return req.response(throttle_time_ms=0, error_code=ec.NONE, error_message=None, node_id=ctx.node_id,
                            host=ctx.host, port=ctx.port)

    def _join_response(self, req: Request, group: Group | None, member_id: str, error: int, *,
                       leader: str | None = None) -> Any:
        """The JoinGroup answer; `leader` overrides the group's leader (a static member's
        rejoin in a Stable group names the old leader so that nobody reassigns)."""
        if error != ec.NONE or group is None:
            return req.response(throttle_time_ms=0, error_code=error, generation_id=-1, protocol_type=None,
                                protocol_name=None if req.version >= 7 else "", leader="", member_id=member_id,
                                members=[])
        leader = group.leader if leader is None else leader
        cls = req.spec.response.JoinGroupResponseMember
        members = []
        if member_id == leader:
            members = [cls(member_id=m.member_id, group_instance_id=m.group_instance_id,
                           metadata=m.metadata(group.protocol)) for m in group.members.values()]
        return req.response(throttle_time_ms=0, error_code=ec.NONE, generation_id=group.generation,
                            protocol_type=group.protocol_type, protocol_name=group.protocol, leader=leader,
                            member_id=member_id, members=members)

    async def join_group(self, req: Request) -> Any:
        body = req.body
        config = self._ctx.config
        if not body.group_id or not group_id_fits(body.group_id):
            return self._join_response(req, None, body.member_id, ec.INVALID_GROUP_ID)
        if not config.group_min_session_timeout_ms <= body.session_timeout_ms <= config.group_max_session_timeout_ms:
            return self._join_response(req, None, body.member_id, ec.INVALID_SESSION_TIMEOUT)
        if not body.protocol_type or not body.protocols:  # Kafka's supportsProtocols
            return self._join_response(req, None, body.member_id, ec.INCONSISTENT_GROUP_PROTOCOL)
        # every string the member's group record holds, a member id made of the instance or client id included
        named = [body.protocol_type, *(p.name for p in body.protocols)]
        id_base = body.group_instance_id or req.client_id or ""
        if not (all(map(record_string_fits, named)) and record_string_fits(id_base, MEMBER_ID_SUFFIX_BYTES)):
            return self._join_response(req, None, body.member_id, ec.INVALID_REQUEST)
        group = self._group(body.group_id, create=True)
        if group.state == DEAD:
            return self._join_response(req, None, body.member_id, ec.COORDINATOR_NOT_AVAILABLE)
        if group.protocol_type not in (None, body.protocol_type) and group.members:
            return self._join_response(req, None, body.member_id, ec.INCONSISTENT_GROUP_PROTOCOL)
        instance_id = body.group_instance_id
        protocols = [(p.name, bytes(p.metadata)) for p in body.protocols]
        member_id = body.member_id
        if not member_id:
            member_id = f"{instance_id or req.client_id or 'client'}-{uuid.uuid4()}"
            static = group.static_member(instance_id)
            if static is not None:
                return await self._rejoin_static(req, group, static, member_id, protocols)
            if instance_id is None and req.version >= 4:  # KIP-394: dynamic members learn their id first
                # forgotten after a session timeout unless it joins, as in Kafka: a client
                # asking for ids in a loop would otherwise grow the set without bound
                group.pending_members[member_id] = time.monotonic() + body.session_timeout_ms / 1000
                return self._join_response(req, None, member_id, ec.MEMBER_ID_REQUIRED)
        elif member_id not in group.pending_members:
            error = self._member_error(group, member_id, instance_id)
            if error != ec.NONE:
                return self._join_response(req, None, member_id, error)
        if member_id not in group.members and len(group.members) >= config.group_max_size:
            return self._join_response(req, None, member_id, ec.GROUP_MAX_SIZE_REACHED)
        group.pending_members.pop(member_id, None)
        rebalance_timeout = body.rebalance_timeout_ms if body.rebalance_timeout_ms > 0 else body.session_timeout_ms
        member = group.members.get(member_id)
        if member is None:
            member = Member(member_id, instance_id, req.client_id or "", "/127.0.0.1",
                            body.session_timeout_ms, rebalance_timeout, body.protocol_type, protocols)
            group.members[member_id] = member
        else:
            unchanged = member.protocols == protocols
            member.protocols, member.session_timeout = protocols, body.session_timeout_ms
            member.rebalance_timeout = rebalance_timeout
            member.last_heartbeat = time.monotonic()
            # a member that missed its answer gets the current generation again, as in Kafka
            if unchanged and (group.state == COMPLETING or (group.state == STABLE and member_id != group.leader)):
                return self._join_response(req, group, member_id, ec.NONE)
        group.protocol_type = body.protocol_type
        member.join = asyncio.get_running_loop().create_future()
        if group.state != PREPARING:
            self._prepare_rebalance(group)
        error = await member.join
        return self._join_response(req, group, member_id, error)

    async def _rejoin_static(self, req: Request, group: Group, member: Member, member_id: str,
                             protocols: list[tuple[str, bytes]]) -> Any:
        """A known static instance joins with a new member id: the old id is fenced and the new
        one takes its place and assignment. A Stable group whose subscriptions and protocol stay
        the same does not rebalance (KIP-345)."""
        body = req.body
        old_id, old_leader = member.member_id, group.leader
        for future in (member.join, member.sync):
            if future is not None and not future.done():
                future.set_result(ec.FENCED_INSTANCE_ID)
        group.members = OrderedDict((member_id if key == old_id else key, m) for key, m in group.members.items())
        if group.leader == old_id:
            group.leader = member_id
        old_metadata = member.metadata(group.protocol)
        member.member_id, member.join, member.sync = member_id, None, None
        member.client_id, member.protocols = req.client_id or "", protocols
        member.session_timeout = body.session_timeout_ms
        member.rebalance_timeout = body.rebalance_timeout_ms if body.rebalance_timeout_ms > 0 else \
            body.session_timeout_ms
        member.last_heartbeat = time.monotonic()
        if group.state == STABLE and self._select_protocol(group) == group.protocol and \
                _same_subscription(group.protocol_type, old_metadata, member.metadata(group.protocol)):
            try:
                self._store_group(group)
            except LogstoreError as exc:
                return self._join_response(req, None, member_id, ec.for_exception(exc))
            return self._join_response(req, group, member_id, ec.NONE, leader=old_leader)
        member.join = asyncio.get_running_loop().create_future()
        if group.state != PREPARING:
            self._prepare_rebalance(group)
        error = await member.join
        return self._join_response(req, group, member_id, error)

    async def sync_group(self, req: Request) -> Any:
        body = req.body
        group = self._group(body.group_id)

        def answer(error: int, assignment: bytes = b"") -> Any:
            return req.response(throttle_time_ms=0, error_code=error, protocol_type=group.protocol_type if group else None,
                                protocol_name=group.protocol if group else None, assignment=assignment)

        error = self._member_error(group, body.member_id, body.group_instance_id)
        if error != ec.NONE:
            return answer(error)
        if body.generation_id != group.generation:
            return answer(ec.ILLEGAL_GENERATION)
        member = group.members[body.member_id]
        member.last_heartbeat = time.monotonic()
        if group.state == PREPARING:
            return answer(ec.REBALANCE_IN_PROGRESS)
        if group.state == STABLE:
            return answer(ec.NONE, member.assignment)
        if body.member_id == group.leader:
            given = {a.member_id: bytes(a.assignment) for a in body.assignments}
            for m in group.members.values():
                m.assignment = given.get(m.member_id, b"")
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

    async def heartbeat(self, req: Request) -> Any:
        body = req.body
        group = self._group(body.group_id)
        error = self._member_error(group, body.member_id, body.group_instance_id)
        if error == ec.NONE:
            if body.generation_id != group.generation:
                error = ec.ILLEGAL_GENERATION
            else:
                group.members[body.member_id].last_heartbeat = time.monotonic()
                if group.state == PREPARING:
                    error = ec.REBALANCE_IN_PROGRESS
        return req.response(throttle_time_ms=0, error_code=error)

    async def leave_group(self, req: Request) -> Any:
        body = req.body
        group = self._group(body.group_id)
        leaving = [(body.member_id, None)] if req.version < 3 else \
            [(m.member_id, m.group_instance_id) for m in body.members]
        results = []
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
                error = self._member_error(group, member_id, instance_id)
            if error == ec.NONE and current in group.members:
                self._remove_member(group, group.members[current])
                removed = True
            results.append((member_id, instance_id, error))
        if removed:
            self._member_left(group)
        if req.version < 3:
            return req.response(throttle_time_ms=0, error_code=results[0][2])
        cls = req.spec.response.MemberResponse
        return req.response(throttle_time_ms=0, error_code=ec.UNKNOWN_MEMBER_ID if group is None else ec.NONE,
                            members=[cls(member_id=m, group_instance_id=i, error_code=e) for m, i, e in results])

    # ------------------------------------------------------------------ members

    def _member_error(self, group: Group | None, member_id: str, instance_id: str | None) -> int:
        """FENCED_INSTANCE_ID if `instance_id` now belongs to another member id,
        UNKNOWN_MEMBER_ID if `member_id` is not in the group, else NONE."""
        if group is None:
            return ec.UNKNOWN_MEMBER_ID
        static = group.static_member(instance_id)
        if static is not None and static.member_id != member_id:
            return ec.FENCED_INSTANCE_ID
        if member_id not in group.members or (instance_id is not None and static is None):
            return ec.UNKNOWN_MEMBER_ID
        return ec.NONE

    # ------------------------------------------------------------------ offsets

    def check_member(self, group_id: str, member_id: str, generation: int,
                     group_instance_id: str | None = None) -> int:
        """NONE if `member_id` (static as `group_instance_id`) at `generation` may commit for
        `group_id` (or a simple commit), else the error. A rebalance does not stop a member of
        the current generation: it commits what it processed before it rejoins, as in Kafka."""
        return self._check_member(self._group(group_id), member_id, generation, group_instance_id)

    def _check_member(self, group: Group | None, member_id: str, generation: int,
                      group_instance_id: str | None = None) -> int:
        if generation < 0 and not member_id and group_instance_id is None:
            return ec.NONE if group is None or not group.members else ec.UNKNOWN_MEMBER_ID
        error = self._member_error(group, member_id, group_instance_id)
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

    def complete_transaction(self, producer_id: int, committed: bool) -> None:
        """Apply or drop the offsets `producer_id` committed in its transaction (after the marker)."""
        for group in self._groups.values():
            pending = group.pending_txn.pop(producer_id, None)
            if pending and committed:
                group.offsets.update(pending)

    def offsets_to_commit(self, topics: list) -> tuple[dict[tuple[str, int], OffsetAndMetadata], dict]:
        """The offsets of an (Txn)OffsetCommit request that may be written, and the error of each
        one that may not, as Kafka refuses them: UNKNOWN_TOPIC_OR_PARTITION for a partition the
        node does not have, OFFSET_METADATA_TOO_LARGE past offset.metadata.max.bytes."""
        now = self._now_ms()
        offsets, errors = {}, {}
        for t in topics:
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                metadata = p.committed_metadata or ""
                if self._ctx.partition(*tp) is None:
                    errors[tp] = ec.UNKNOWN_TOPIC_OR_PARTITION
                elif len(metadata) > self._ctx.config.offset_metadata_max_bytes:
                    errors[tp] = ec.OFFSET_METADATA_TOO_LARGE
                else:
                    offsets[tp] = OffsetAndMetadata(p.committed_offset, p.committed_leader_epoch, metadata, now)
        return offsets, errors

    async def offset_commit(self, req: Request) -> Any:
        body = req.body
        offsets, errors = self.offsets_to_commit(body.topics)
        group = self._group(body.group_id)
        if not group_id_fits(body.group_id):  # an empty id is a simple commit, as in Kafka
            error = ec.INVALID_GROUP_ID
        else:
            error = self._check_member(group, body.member_id, body.generation_id_or_member_epoch,
                                       body.group_instance_id)
        if error == ec.NONE and group is not None and group.state == COMPLETING:
            error = ec.REBALANCE_IN_PROGRESS  # joined the new generation but not yet given its partitions
        if error == ec.NONE and offsets:
            error = self.commit(body.group_id, offsets)
        cls = req.spec.response.OffsetCommitResponseTopic
        return req.response(throttle_time_ms=0, topics=[cls(name=t.name, partitions=[
            cls.OffsetCommitResponsePartition(partition_index=p.partition_index,
                                              error_code=errors.get((t.name, p.partition_index), error))
            for p in t.partitions]) for t in body.topics])

    async def offset_fetch(self, req: Request) -> Any:
        body = req.body
        group = self._group(body.group_id)
        committed = group.offsets if group else {}
        pending = {tp for txn in group.pending_txn.values() for tp in txn} if group else set()
        if body.topics is None:
            wanted: dict[str, list[int]] = {}
            for t, p in sorted(committed):
                wanted.setdefault(t, []).append(p)
        else:
            wanted = {t.name: list(t.partition_indexes) for t in body.topics}
        cls = req.spec.response.OffsetFetchResponseTopic
        topics = []
        for name, partitions in wanted.items():
            entries = []
            for p in partitions:
                om = committed.get((name, p))
                error = ec.UNSTABLE_OFFSET_COMMIT if body.require_stable and (name, p) in pending else ec.NONE
                entries.append(cls.OffsetFetchResponsePartition(
                    partition_index=p, committed_offset=om.offset if om and error == ec.NONE else -1,
                    committed_leader_epoch=om.leader_epoch if om else -1, metadata=om.metadata if om else "",
                    error_code=error))
            topics.append(cls(name=name, partitions=entries))
        return req.response(throttle_time_ms=0, topics=topics, error_code=ec.NONE)

    # ------------------------------------------------------------------ offset expiry

    def expire_offsets(self, now_ms: int) -> int:
        """Drop committed offsets older than `offsets.retention.minutes` as Kafka does: every
        offset of an Empty group (counted from when it became Empty) or of a standalone one
        (from its commit), and a Stable consumer group's offsets of topics nobody subscribes to.
        Tombstones go to __consumer_offsets; an Empty group left without offsets is Dead and
        deleted. Returns the number of offsets removed."""
        removed = 0
        for group in list(self._groups.values()):
            expired = self._expired_offsets(group, now_ms)
            dead = group.state == EMPTY and not group.members and not group.pending_members and \
                len(expired) == len(group.offsets) and not any(group.pending_txn.values())
            if not expired and not dead:
                continue
            records = [offset_record(group.group_id, t, p, None) for t, p in expired]
            if dead:
                records.append(group_record(group.group_id, "", 0, None, None, [], now_ms, tombstone=True))
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

    def _expired_offsets(self, group: Group, now_ms: int) -> list[tuple[str, int]]:
        retention_ms = self._ctx.config.offsets_retention_minutes * 60_000
        subscribed: frozenset[str] = frozenset()
        since_empty = False
        if group.protocol_type is not None and group.state == EMPTY:
            since_empty = group.state_timestamp >= 0
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

    # ------------------------------------------------------------------ admin

    async def describe_groups(self, req: Request) -> Any:
        cls = req.spec.response.DescribedGroup
        described = []
        for group_id in req.body.groups:
            group = self._group(group_id)
            if group is None:
                described.append(cls(error_code=ec.NONE, group_id=group_id, group_state=DEAD, protocol_type="",
                                     protocol_data="", members=[]))
                continue
            members = [cls.DescribedGroupMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                client_host=m.client_host, member_metadata=m.metadata(group.protocol),
                member_assignment=m.assignment) for m in group.members.values()]
            described.append(cls(error_code=ec.NONE, group_id=group_id, group_state=group.state,
                                 protocol_type=group.protocol_type or "", protocol_data=group.protocol or "",
                                 members=members))
        return req.response(throttle_time_ms=0, groups=described)

    async def list_groups(self, req: Request) -> Any:
        states = set(req.body.states_filter or [])
        cls = req.spec.response.ListedGroup
        groups = [cls(group_id=g.group_id, protocol_type=g.protocol_type or "", group_state=g.state,
                      group_type="classic")
                  for g in self._groups.values() if g.state != DEAD and (not states or g.state in states)]
        return req.response(throttle_time_ms=0, error_code=ec.NONE, groups=groups)

    async def delete_groups(self, req: Request) -> Any:
        cls = req.spec.response.DeletableGroupResult
        results = []
        for group_id in req.body.groups_names:
            group = self._group(group_id)
            if group is None or group.state == DEAD:
                results.append(cls(group_id=group_id, error_code=ec.GROUP_ID_NOT_FOUND))
                continue
            if group.members:
                results.append(cls(group_id=group_id, error_code=ec.NON_EMPTY_GROUP))
                continue
            records = [offset_record(group_id, t, p, None) for t, p in group.offsets]
            records.append(group_record(group_id, "", 0, None, None, [], self._now_ms(), tombstone=True))
            try:
                append_records(self._offsets_log(group_id), records, self._now_ms())
                del self._groups[group_id]
                error = ec.NONE
            except LogstoreError as exc:
                error = ec.for_exception(exc)
            results.append(cls(group_id=group_id, error_code=error))
        return req.response(throttle_time_ms=0, results=results)

    def close(self) -> None:
        """Stop the background tasks."""
        for task in [self._expiry, *(g.rebalance for g in self._groups.values())]:
            if task is not None:
                task.cancel()


def group_id_fits(group_id: str) -> bool:
    """Whether `group_id` fits the key of a __consumer_offsets record."""
    return record_string_fits(group_id)


def record_string_fits(text: str, reserve: int = 0) -> bool:
    """Whether `text` and `reserve` bytes more fit a string of a __consumer_offsets record (int16 length)."""
    return len(text.encode()) + reserve <= MAX_RECORD_STRING_BYTES


def _same_subscription(protocol_type: str | None, old: bytes, new: bytes) -> bool:
    """Whether a rejoining static member asks for what it had: the same topics for a consumer
    (its owned partitions and generation change with every restart), else the same bytes."""
    if protocol_type == CONSUMER_PROTOCOL_TYPE:
        old_topics = subscribed_topics(old)
        return old_topics is not None and old_topics == subscribed_topics(new)
    return old == new


def _joining(member: Member) -> bool:
    return member.join is not None and not member.join.done()

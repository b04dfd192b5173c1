"""The group APIs on the wire: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch, DescribeGroups, ListGroups and DeleteGroups, each a translation
between a request's version and the GroupCoordinator's typed calls (Kafka's KafkaApis)."""

from __future__ import annotations

from typing import Any

from logstore.server import error_codes as ec
from logstore.server.context import ServerContext
from logstore.server.coordinator_partitions import CoordinatorPartitions
from logstore.server.group_coordinator import GroupCoordinator
from logstore.server.group_metadata import DEAD
from logstore.server.group_results import OffsetCommitEntry, SyncResult
from logstore.server.protocol import Request

GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator's key types


def commit_entries(topics: list) -> list[OffsetCommitEntry]:
    """The offsets of an (Txn)OffsetCommit request's topics."""
    return [OffsetCommitEntry(t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch,
                              p.committed_metadata) for t in topics for p in t.partitions]


class GroupApi:
    """The group APIs over the node's GroupCoordinator."""

    def __init__(self, ctx: ServerContext, groups: GroupCoordinator, txn_partitions: CoordinatorPartitions):
        self._ctx = ctx
        self._groups = groups
        self._txn_partitions = txn_partitions  # FindCoordinator of transactional ids

    async def find_coordinator(self, req: Request) -> Any:
        body = req.body
        key_type = body.key_type if req.version >= 1 else GROUP_KEY
        if req.version >= 4:
            cls = req.spec.response.Coordinator
            coordinators = []
            for key in body.coordinator_keys:
                error, node_id, host, port = self._coordinator(key_type, key)
                coordinators.append(cls(key=key, node_id=node_id, host=host, port=port, error_code=error,
                                        error_message=None))
            return req.response(throttle_time_ms=0, coordinators=coordinators)
        error, node_id, host, port = self._coordinator(key_type, body.key)
        return req.response(throttle_time_ms=0, error_code=error, error_message=None, node_id=node_id, host=host,
                            port=port)

    def _coordinator(self, key_type: int, key: str) -> tuple[int, int, str, int]:
        """(error, node id, host, port) of the coordinator of a group or transactional id: this
        node on a single node, the leader of the key's partition in a cluster."""
        partitions = {GROUP_KEY: self._groups.coordinated, TRANSACTION_KEY: self._txn_partitions}.get(key_type)
        if partitions is None:
            return ec.INVALID_REQUEST, -1, "", -1
        error, node_id = partitions.leader_of(key)
        if error != ec.NONE:
            return error, -1, "", -1
        if node_id == self._ctx.node_id:
            return ec.NONE, node_id, self._ctx.host, self._ctx.port
        address = next(((h, p) for b, h, p, _rack in self._ctx.cluster.brokers() if b == node_id), None)
        if address is None:  # fenced, or not on the clients' listener
            return ec.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        return ec.NONE, node_id, *address

    async def join_group(self, req: Request) -> Any:
        body = req.body
        result = await self._groups.join(
            body.group_id, body.member_id, body.group_instance_id, req.client_id or "",
            session_timeout_ms=body.session_timeout_ms, rebalance_timeout_ms=body.rebalance_timeout_ms,
            protocol_type=body.protocol_type, protocols=[(p.name, bytes(p.metadata)) for p in body.protocols],
            require_known_member_id=req.version >= 4)
        if result.error != ec.NONE:
            return req.response(throttle_time_ms=0, error_code=result.error, generation_id=-1, protocol_type=None,
                                protocol_name=None if req.version >= 7 else "", leader="",
                                member_id=result.member_id, members=[])
        cls = req.spec.response.JoinGroupResponseMember
        return req.response(throttle_time_ms=0, error_code=ec.NONE, generation_id=result.generation,
                            protocol_type=result.protocol_type, protocol_name=result.protocol, leader=result.leader,
                            member_id=result.member_id,
                            members=[cls(member_id=m, group_instance_id=i, metadata=meta)
                                     for m, i, meta in result.members])

    async def sync_group(self, req: Request) -> Any:
        body = req.body
        result = await self._groups.sync(body.group_id, body.member_id, body.group_instance_id, body.generation_id,
                                         {a.member_id: bytes(a.assignment) for a in body.assignments})
        if result.error == ec.NONE and body.assignments:  # the leader's: the group's record first held by the ISR
            error = await self._groups.replicated(body.group_id)
            if error != ec.NONE:
                result = SyncResult(error)
        return req.response(throttle_time_ms=0, error_code=result.error, protocol_type=result.protocol_type,
                            protocol_name=result.protocol, assignment=result.assignment)

    async def heartbeat(self, req: Request) -> Any:
        body = req.body
        error = self._groups.heartbeat(body.group_id, body.member_id, body.group_instance_id, body.generation_id)
        return req.response(throttle_time_ms=0, error_code=error)

    async def leave_group(self, req: Request) -> Any:
        body = req.body
        leaving = [(body.member_id, None)] if req.version < 3 else \
            [(m.member_id, m.group_instance_id) for m in body.members]
        group_error, errors = await self._groups.leave(body.group_id, leaving)
        if req.version < 3:
            return req.response(throttle_time_ms=0, error_code=errors[0])
        cls = req.spec.response.MemberResponse
        return req.response(throttle_time_ms=0, error_code=group_error,
                            members=[cls(member_id=m, group_instance_id=i, error_code=e)
                                     for (m, i), e in zip(leaving, errors, strict=True)])

    async def offset_commit(self, req: Request) -> Any:
        body = req.body
        error, errors = await self._groups.commit_offsets(body.group_id, body.member_id,
                                                          body.generation_id_or_member_epoch, body.group_instance_id,
                                                          commit_entries(body.topics))
        cls = req.spec.response.OffsetCommitResponseTopic
        return req.response(throttle_time_ms=0, topics=[cls(name=t.name, partitions=[
            cls.OffsetCommitResponsePartition(partition_index=p.partition_index,
                                              error_code=errors.get((t.name, p.partition_index), error))
            for p in t.partitions]) for t in body.topics])

    async def offset_fetch(self, req: Request) -> Any:
        body = req.body
        if req.version >= 8:  # a batch of groups, v9 naming the member that asks
            cls = req.spec.response.OffsetFetchResponseGroup
            groups = []
            for g in body.groups:
                error = self._groups.coordinator_error(g.group_id)
                if error == ec.NONE and req.version >= 9:
                    error = self._groups.fetch_member_error(g.group_id, g.member_id, g.member_epoch)
                topics = self._fetched(cls.OffsetFetchResponseTopics, g.topics, g.group_id, body.require_stable) \
                    if error == ec.NONE else []
                groups.append(cls(group_id=g.group_id, topics=topics, error_code=error))
            return req.response(throttle_time_ms=0, groups=groups)
        error = self._groups.coordinator_error(body.group_id)
        topics = [] if error != ec.NONE else self._fetched(req.spec.response.OffsetFetchResponseTopic, body.topics,
                                                           body.group_id, body.require_stable)
        return req.response(throttle_time_ms=0, topics=topics, error_code=error)

    def _fetched(self, cls: Any, asked: list | None, group_id: str, require_stable: bool) -> list:
        """The committed offsets of the `asked` topics (None: all), as `cls` entries."""
        wanted = None if asked is None else {t.name: list(t.partition_indexes) for t in asked}
        found = self._groups.fetch_offsets(group_id, wanted, require_stable)
        entry = next(getattr(cls, name) for name in ("OffsetFetchResponsePartition", "OffsetFetchResponsePartitions")
                     if hasattr(cls, name))
        return [cls(name=name, partitions=[
            entry(partition_index=p.partition, committed_offset=p.offset, committed_leader_epoch=p.leader_epoch,
                  metadata=p.metadata, error_code=p.error) for p in partitions])
            for name, partitions in found.items()]

    async def describe_groups(self, req: Request) -> Any:
        cls = req.spec.response.DescribedGroup
        described = []
        for group_id in req.body.groups:
            error = self._groups.coordinator_error(group_id)
            if error != ec.NONE:
                described.append(cls(error_code=error, group_id=group_id, group_state="", protocol_type="",
                                     protocol_data="", members=[]))
                continue
            group = self._groups.describe(group_id)
            if group is None or group.consumer is not None:  # Kafka 4.0: a KIP-848 group is not described here
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
        cls = req.spec.response.ListedGroup
        listed = self._groups.listed(set(req.body.states_filter or []), set(req.body.types_filter or []))
        groups = [cls(group_id=g.group_id, protocol_type=g.protocol_type or "", group_state=g.reported_state(),
                      group_type=g.group_type) for g in listed]
        return req.response(throttle_time_ms=0, error_code=ec.NONE, groups=groups)

    async def delete_groups(self, req: Request) -> Any:
        cls = req.spec.response.DeletableGroupResult
        return req.response(throttle_time_ms=0, results=[
            cls(group_id=group_id, error_code=await self._groups.delete(group_id)) for group_id in req.body.groups_names])

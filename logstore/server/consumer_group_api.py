"""The consumer group protocol's APIs on the wire (KIP-848): ConsumerGroupHeartbeat and
ConsumerGroupDescribe, each a translation between a request's version and the
ConsumerGroupCoordinator's typed calls."""

from __future__ import annotations

from typing import Any

from logstore.server import error_codes as ec
from logstore.server.consumer_group import Assignment
from logstore.server.context import ServerContext
from logstore.server.group_coordinator import CLIENT_HOST, GroupCoordinator
from logstore.server.group_results import ConsumerHeartbeat
from logstore.server.protocol import Request

CONSUMER_MEMBER_TYPE = 1  # ConsumerGroupDescribe v1's MemberType of a member of this protocol
# READ, DELETE and DESCRIBE: what a group allows (Kafka's AclOperation codes), no ACLs being enforced
GROUP_OPERATIONS = (3, 6, 8)
NO_OPERATIONS = -(2**31)


class ConsumerGroupApi:
    """ConsumerGroupHeartbeat and ConsumerGroupDescribe over the node's group coordinator."""

    def __init__(self, ctx: ServerContext, groups: GroupCoordinator):
        self._ctx = ctx
        self._groups = groups

    async def consumer_group_heartbeat(self, req: Request) -> Any:
        body = req.body
        error = self._groups.coordinator_error(body.group_id)
        if error != ec.NONE:
            return req.response(throttle_time_ms=0, error_code=error, error_message=None, member_id=body.member_id,
                                member_epoch=body.member_epoch, heartbeat_interval_ms=0, assignment=None)
        owned = None if body.topic_partitions is None else \
            {t.topic_id: frozenset(t.partitions) for t in body.topic_partitions}
        names = None if body.subscribed_topic_names is None else tuple(body.subscribed_topic_names)
        result = self._groups.consumer_groups.heartbeat(ConsumerHeartbeat(
            body.group_id, body.member_id, body.member_epoch, instance_id=body.instance_id, rack_id=body.rack_id,
            rebalance_timeout_ms=body.rebalance_timeout_ms, subscribed_topic_names=names,
            subscribed_topic_regex=body.subscribed_topic_regex if req.version >= 1 else None,
            server_assignor=body.server_assignor, owned=owned, client_id=req.client_id or "",
            client_host=CLIENT_HOST), req.version)
        if result.error == ec.NONE:  # answered once the ISR holds the group's records
            error = await self._groups.replicated(body.group_id)
            if error != ec.NONE:
                return req.response(throttle_time_ms=0, error_code=error, error_message=None,
                                    member_id=body.member_id, member_epoch=body.member_epoch,
                                    heartbeat_interval_ms=0, assignment=None)
        assignment = None
        if result.assignment is not None:
            cls = req.spec.response.Assignment
            assignment = cls(topic_partitions=[cls.TopicPartitions(topic_id=t, partitions=sorted(ps))
                                               for t, ps in sorted(result.assignment.items(), key=str)])
        return req.response(throttle_time_ms=0, error_code=result.error, error_message=result.message,
                            member_id=result.member_id, member_epoch=result.member_epoch,
                            heartbeat_interval_ms=result.heartbeat_interval_ms, assignment=assignment)

    async def consumer_group_describe(self, req: Request) -> Any:
        cls = req.spec.response.DescribedGroup
        operations = sum(1 << op for op in GROUP_OPERATIONS) if req.body.include_authorized_operations \
            else NO_OPERATIONS
        described = []
        for group_id in req.body.group_ids:
            error, message, group = self._groups.consumer_groups.describe(group_id)
            if self._groups.coordinator_error(group_id) != ec.NONE:
                error, message, group = self._groups.coordinator_error(group_id), None, None
            if group is None:
                described.append(cls(error_code=error, error_message=message, group_id=group_id, group_state="Dead",
                                      group_epoch=-1, assignment_epoch=-1, assignor_name="", members=[],
                                      authorized_operations=NO_OPERATIONS))
                continue
            consumer = group.consumer
            names = self._ctx.topics.names()
            members = [cls.Member(
                member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                client_id=m.client_id, client_host=m.client_host,
                subscribed_topic_names=sorted(m.subscribed_names(names)), subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=self._assignment(cls, m.assigned), member_type=CONSUMER_MEMBER_TYPE,
                target_assignment=self._assignment(cls, consumer.target.get(m.member_id, {})))
                for m in consumer.members.values()]
            described.append(cls(error_code=ec.NONE, group_id=group_id, group_state=consumer.state(),
                                  group_epoch=consumer.group_epoch, assignment_epoch=consumer.assignment_epoch,
                                  assignor_name=consumer.assignor, members=members,
                                  authorized_operations=operations))
        return req.response(throttle_time_ms=0, groups=described)

    def _assignment(self, cls: Any, assignment: Assignment) -> Any:
        """A member's partitions as ConsumerGroupDescribe lists them: topic id, name and partitions."""
        topics = {self._ctx.topics.topic_id(name): name for name in self._ctx.topics.names()}
        entry = cls.Member.Assignment.TopicPartitions
        return cls.Member.Assignment(topic_partitions=[
            entry(topic_id=t, topic_name=topics.get(t, ""), partitions=sorted(ps))
            for t, ps in sorted(assignment.items(), key=str)])

"""A consumer group's state as Kafka 4.0's records in __consumer_offsets, and back: the records
a change of state takes (only what changed, in the order Kafka writes them), the tombstones of
a group that goes away, and the replay of the records at start-up."""

from __future__ import annotations

import struct
import uuid

from logstore.internal_topics.records import decode_offsets_record, encode_offsets_record
from logstore.server.consumer_group import Assignment, ConsumerGroup, ConsumerMember

KeyValue = tuple[bytes, bytes | None]
_INT16 = struct.Struct(">h")
GROUP_EPOCH, TOPICS, MEMBER, TARGET_EPOCH, TARGET, CURRENT = (
    "ConsumerGroupMetadata", "ConsumerGroupPartitionMetadata", "ConsumerGroupMemberMetadata",
    "ConsumerGroupTargetAssignmentMetadata", "ConsumerGroupTargetAssignmentMember",
    "ConsumerGroupCurrentMemberAssignment")
CONSUMER_RECORD_TYPES = frozenset(range(3, 9))  # their type ids in Kafka 4.0, in the order above


def record_type(key: bytes) -> int:
    """The record type a __consumer_offsets key starts with."""
    return _INT16.unpack_from(key, 0)[0]


def _record(name: str, group_id: str, member_id: str | None, value: dict | None) -> KeyValue:
    key = {"groupId": group_id} if member_id is None else {"groupId": group_id, "memberId": member_id}
    return encode_offsets_record(name, key, None if value is None else 0, value)


def _topic_partitions(assignment: Assignment) -> list[dict]:
    return [{"topicId": t, "partitions": sorted(ps)} for t, ps in sorted(assignment.items(), key=lambda i: str(i[0]))]


def _assignment(entries: list[dict]) -> Assignment:
    return {e["topicId"]: frozenset(e["partitions"]) for e in entries if e["partitions"]}


def _subscription(member: ConsumerMember) -> tuple:
    return (member.instance_id, member.rack_id, member.client_id, member.client_host,
            member.subscribed_topic_names, member.subscribed_topic_regex, member.rebalance_timeout_ms,
            member.server_assignor)


def _current(member: ConsumerMember) -> tuple:
    return member.member_epoch, member.previous_member_epoch, member.state, member.assigned, member.revoking


def _member_record(group_id: str, m: ConsumerMember | None, member_id: str) -> KeyValue:
    return _record(MEMBER, group_id, member_id, None if m is None else {
        "instanceId": m.instance_id, "rackId": m.rack_id, "clientId": m.client_id, "clientHost": m.client_host,
        "subscribedTopicNames": list(m.subscribed_topic_names), "subscribedTopicRegex": m.subscribed_topic_regex,
        "rebalanceTimeoutMs": m.rebalance_timeout_ms, "serverAssignor": m.server_assignor})


def _target_record(group_id: str, member_id: str, assignment: Assignment | None) -> KeyValue:
    return _record(TARGET, group_id, member_id,
                   None if assignment is None else {"topicPartitions": _topic_partitions(assignment)})


def _current_record(group_id: str, m: ConsumerMember | None, member_id: str) -> KeyValue:
    return _record(CURRENT, group_id, member_id, None if m is None else {
        "memberEpoch": m.member_epoch, "previousMemberEpoch": m.previous_member_epoch, "state": m.state,
        "assignedPartitions": _topic_partitions(m.assigned),
        "partitionsPendingRevocation": _topic_partitions(m.revoking)})


def _epoch_record(group_id: str, epoch: int | None) -> KeyValue:
    return _record(GROUP_EPOCH, group_id, None, None if epoch is None else {"epoch": epoch})


def _topics_record(group_id: str, topics: dict[uuid.UUID, tuple[str, int]] | None) -> KeyValue:
    return _record(TOPICS, group_id, None, None if topics is None else {"topics": [
        {"topicId": t, "topicName": name, "numPartitions": count, "partitionMetadata": []}
        for t, (name, count) in sorted(topics.items(), key=lambda i: i[1][0])]})


def _target_epoch_record(group_id: str, epoch: int | None) -> KeyValue:
    return _record(TARGET_EPOCH, group_id, None, None if epoch is None else {"assignmentEpoch": epoch})


def records_between(group_id: str, old: ConsumerGroup | None, new: ConsumerGroup | None) -> list[KeyValue]:
    """The records that take the stored `old` state (None: nothing stored) to `new` (None: the
    group is deleted, every record of it gets its tombstone)."""
    old = old or ConsumerGroup(group_epoch=-1, assignment_epoch=-1)
    if new is None:
        records = []
        for member_id in old.members:
            records += [_current_record(group_id, None, member_id), _target_record(group_id, member_id, None),
                        _member_record(group_id, None, member_id)]
        return records + [_target_epoch_record(group_id, None), _topics_record(group_id, None),
                          _epoch_record(group_id, None)]
    records = []
    for member_id in old.members.keys() - new.members.keys():  # removed members, as Kafka fences them
        records += [_current_record(group_id, None, member_id), _target_record(group_id, member_id, None),
                    _member_record(group_id, None, member_id)]
    for member_id, member in new.members.items():
        before = old.members.get(member_id)
        if before is None or _subscription(before) != _subscription(member):
            records.append(_member_record(group_id, member, member_id))
    if new.topics != old.topics:
        records.append(_topics_record(group_id, new.topics))
    if new.group_epoch != old.group_epoch:
        records.append(_epoch_record(group_id, new.group_epoch))
    for member_id, assignment in new.target.items():
        if old.target.get(member_id) != assignment or member_id not in old.target:
            records.append(_target_record(group_id, member_id, assignment))
    for member_id in old.target.keys() - new.target.keys() - (old.members.keys() - new.members.keys()):
        records.append(_target_record(group_id, member_id, None))
    if new.assignment_epoch != old.assignment_epoch:
        records.append(_target_epoch_record(group_id, new.assignment_epoch))
    for member_id, member in new.members.items():
        before = old.members.get(member_id)
        if before is None or _current(before) != _current(member):
            records.append(_current_record(group_id, member, member_id))
    return records


def apply_record(groups: dict[str, ConsumerGroup | None], key: bytes, value: bytes | None) -> str:
    """Replay one consumer group record into `groups` (group id -> state; None once the group's
    metadata got its tombstone). Returns the record's group id."""
    record = decode_offsets_record(key, value)
    group_id, member_id, v = record.key["groupId"], record.key.get("memberId"), record.value
    group = groups.get(group_id)
    if group is None:
        if v is None:
            return group_id
        group = groups[group_id] = ConsumerGroup()
    if record.name == GROUP_EPOCH:
        if v is None:
            groups[group_id] = None
        else:
            group.group_epoch = v["epoch"]
    elif record.name == TOPICS:
        group.topics = {} if v is None else {t["topicId"]: (t["topicName"], t["numPartitions"]) for t in v["topics"]}
    elif record.name == TARGET_EPOCH:
        group.assignment_epoch = 0 if v is None else v["assignmentEpoch"]
    elif record.name == TARGET:
        if v is None:
            group.target.pop(member_id, None)
        else:
            group.target[member_id] = _assignment(v["topicPartitions"])
    elif v is None:  # a member's metadata or current assignment tombstone: the member is gone
        group.members.pop(member_id, None)
    else:
        member = group.members.setdefault(member_id, ConsumerMember(member_id))
        if record.name == MEMBER:
            member.instance_id, member.rack_id = v["instanceId"], v["rackId"]
            member.client_id, member.client_host = v["clientId"], v["clientHost"]
            member.subscribed_topic_names = tuple(v["subscribedTopicNames"])
            member.subscribed_topic_regex, member.rebalance_timeout_ms = v["subscribedTopicRegex"], v["rebalanceTimeoutMs"]
            member.server_assignor = v["serverAssignor"]
        else:
            member.member_epoch, member.previous_member_epoch, member.state = \
                v["memberEpoch"], v["previousMemberEpoch"], v["state"]
            member.assigned = _assignment(v["assignedPartitions"])
            member.revoking = _assignment(v["partitionsPendingRevocation"])
    return group_id

"""A consumer group's state as Kafka 4.0's records in __consumer_offsets, and back: the records
a change of state takes (only what changed, in the order Kafka writes them), the tombstones of
a group that goes away, and the replay of the records at start-up."""

from __future__ import annotations

import struct
import uuid

from logstore.server.consumer_group import Assignment, ConsumerGroup, ConsumerMember
from logstore.server.messages.consumer_group_records import (
    RECORD_TYPES,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
)

KeyValue = tuple[bytes, bytes | None]
_INT16 = struct.Struct(">h")
CONSUMER_RECORD_TYPES = frozenset(RECORD_TYPES)


def record_type(key: bytes) -> int:
    """The record type a __consumer_offsets key starts with."""
    return _INT16.unpack_from(key, 0)[0]


def _topic_partitions(cls: type, assignment: Assignment) -> list:
    return [cls(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(assignment.items(), key=lambda i: str(i[0]))]


def _assignment(entries: list) -> Assignment:
    return {e.topic_id: frozenset(e.partitions) for e in entries if e.partitions}


def _subscription(member: ConsumerMember) -> tuple:
    return (member.instance_id, member.rack_id, member.client_id, member.client_host,
            member.subscribed_topic_names, member.subscribed_topic_regex, member.rebalance_timeout_ms,
            member.server_assignor)


def _current(member: ConsumerMember) -> tuple:
    return member.member_epoch, member.previous_member_epoch, member.state, member.assigned, member.revoking


def _member_record(group_id: str, m: ConsumerMember | None, member_id: str) -> KeyValue:
    key = ConsumerGroupMemberMetadataKey(group_id=group_id, member_id=member_id).to_bytes()
    if m is None:
        return key, None
    return key, ConsumerGroupMemberMetadataValue(
        instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
        subscribed_topic_names=list(m.subscribed_topic_names), subscribed_topic_regex=m.subscribed_topic_regex,
        rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor).to_bytes()


def _target_record(group_id: str, member_id: str, assignment: Assignment | None) -> KeyValue:
    key = ConsumerGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id).to_bytes()
    if assignment is None:
        return key, None
    cls = ConsumerGroupTargetAssignmentMemberValue
    return key, cls(topic_partitions=_topic_partitions(cls.TopicPartition, assignment)).to_bytes()


def _current_record(group_id: str, m: ConsumerMember | None, member_id: str) -> KeyValue:
    key = ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member_id).to_bytes()
    if m is None:
        return key, None
    cls = ConsumerGroupCurrentMemberAssignmentValue
    return key, cls(member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch, state=m.state,
                    assigned_partitions=_topic_partitions(cls.TopicPartitions, m.assigned),
                    partitions_pending_revocation=_topic_partitions(cls.TopicPartitions, m.revoking)).to_bytes()


def _epoch_record(group_id: str, epoch: int | None) -> KeyValue:
    key = ConsumerGroupMetadataKey(group_id=group_id).to_bytes()
    return key, None if epoch is None else ConsumerGroupMetadataValue(epoch=epoch).to_bytes()


def _topics_record(group_id: str, topics: dict[uuid.UUID, tuple[str, int]] | None) -> KeyValue:
    key = ConsumerGroupPartitionMetadataKey(group_id=group_id).to_bytes()
    if topics is None:
        return key, None
    cls = ConsumerGroupPartitionMetadataValue
    return key, cls(topics=[cls.TopicMetadata(topic_id=t, topic_name=name, num_partitions=count, partition_metadata=[])
                            for t, (name, count) in sorted(topics.items(), key=lambda i: i[1][0])]).to_bytes()


def _target_epoch_record(group_id: str, epoch: int | None) -> KeyValue:
    key = ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id).to_bytes()
    return key, None if epoch is None else ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch).to_bytes()


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
    key_cls, value_cls = RECORD_TYPES[record_type(key)]
    k = key_cls.from_bytes(key)
    group = groups.get(k.group_id)
    if group is None:
        if value is None:
            return k.group_id
        group = groups[k.group_id] = ConsumerGroup()
    v = None if value is None else value_cls.from_bytes(value)
    if key_cls is ConsumerGroupMetadataKey:
        if v is None:
            groups[k.group_id] = None
        else:
            group.group_epoch = v.epoch
    elif key_cls is ConsumerGroupPartitionMetadataKey:
        group.topics = {} if v is None else {t.topic_id: (t.topic_name, t.num_partitions) for t in v.topics}
    elif key_cls is ConsumerGroupTargetAssignmentMetadataKey:
        group.assignment_epoch = 0 if v is None else v.assignment_epoch
    elif key_cls is ConsumerGroupTargetAssignmentMemberKey:
        if v is None:
            group.target.pop(k.member_id, None)
        else:
            group.target[k.member_id] = _assignment(v.topic_partitions)
    elif v is None:  # a member's metadata or current assignment tombstone: the member is gone
        group.members.pop(k.member_id, None)
    else:
        member = group.members.setdefault(k.member_id, ConsumerMember(k.member_id))
        if key_cls is ConsumerGroupMemberMetadataKey:
            member.instance_id, member.rack_id = v.instance_id, v.rack_id
            member.client_id, member.client_host = v.client_id, v.client_host
            member.subscribed_topic_names = tuple(v.subscribed_topic_names)
            member.subscribed_topic_regex, member.rebalance_timeout_ms = v.subscribed_topic_regex, v.rebalance_timeout_ms
            member.server_assignor = v.server_assignor
        else:
            member.member_epoch, member.previous_member_epoch, member.state = \
                v.member_epoch, v.previous_member_epoch, v.state
            member.assigned = _assignment(v.assigned_partitions)
            member.revoking = _assignment(v.partitions_pending_revocation)
    return k.group_id

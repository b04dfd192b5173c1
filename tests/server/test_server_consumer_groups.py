"""KIP-848 consumer groups over the wire: ConsumerGroupHeartbeat and ConsumerGroupDescribe as
Kafka 4.0 answers them, beside classic groups (one group id, one protocol, Kafka's errors when
they are mixed), listed with their type, committing at their member epoch, kept in Kafka 4.0's
records that `logstore dump --offsets-decoder` reads and a restarted server resumes."""

from __future__ import annotations

import json
from pathlib import Path

from kafka.protocol.admin import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.consumer import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)

from logstore.clock import ManualClock
from logstore.server import KafkaServer
from logstore.server import error_codes as ec
from logstore.server.messages.consumer_group_apis import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from tests.cli.test_cli_dump import run_in_process
from tests.server.group_wire import Wire
from tests.support.clock import NOW
from tests.support.wire import WireClient

CONFIG = {"offsets.topic.num.partitions": 1, "group.consumer.session.timeout.ms": 6_000, "group.initial.rebalance.delay.ms": 0,
          "group.consumer.heartbeat.interval.ms": 250, "num.partitions": 3}
HB = ConsumerGroupHeartbeatRequest[1]


def heartbeat(wire: WireClient, group: str, member: str, epoch: int, *, topics: list[str] | None = None,
              owned: list | None = None, regex: str | None = None, instance: str | None = None,
              assignor: str | None = None):
    joining = epoch == 0
    return wire.call(HB(group_id=group, member_id=member, member_epoch=epoch, instance_id=instance,
                        rebalance_timeout_ms=30_000 if joining else -1, subscribed_topic_names=topics,
                        subscribed_topic_regex=regex, server_assignor=assignor,
                        topic_partitions=[] if joining else owned), ConsumerGroupHeartbeatResponse[1])


def owned(response) -> list:
    return [HB.TopicPartitions(topic_id=t.topic_id, partitions=t.partitions)
            for t in response.assignment.topic_partitions]


def partitions(response) -> list[int]:
    return sorted(p for t in response.assignment.topic_partitions for p in t.partitions)


def describe(wire: WireClient, *groups: str):
    return wire.call(ConsumerGroupDescribeRequest[1](group_ids=list(groups), include_authorized_operations=False),
                     ConsumerGroupDescribeResponse[1]).groups


def create_topic(server: KafkaServer, name: str, count: int) -> None:
    server.context.topics.create(name, count)


def test_two_members_split_a_topic_revoking_before_assigning(tmp_path):
    with KafkaServer(tmp_path, port=0, config=CONFIG) as server, WireClient(server.port) as wire:
        create_topic(server, "orders", 4)
        first = heartbeat(wire, "shop", "m1", 0, topics=["orders"])
        assert (first.error_code, first.member_epoch, partitions(first)) == (ec.NONE, 1, [0, 1, 2, 3])
        assert first.heartbeat_interval_ms == 250
        second = heartbeat(wire, "shop", "m2", 0, topics=["orders"])
        assert (second.member_epoch, partitions(second)) == (2, [])  # m1 still owns them all
        told = heartbeat(wire, "shop", "m1", 1, owned=owned(first))
        assert (told.member_epoch, len(partitions(told))) == (1, 2)  # revoke two, still at epoch 1
        (group,) = describe(wire, "shop")
        assert (group.group_state, group.group_epoch, group.assignment_epoch, group.assignor_name) == \
            ("Reconciling", 2, 2, "uniform")
        acked = heartbeat(wire, "shop", "m1", 1, owned=owned(told))
        assert (acked.member_epoch, acked.assignment) == (2, None)  # what it kept, at the new epoch
        missed = heartbeat(wire, "shop", "m1", 1)  # that answer was lost: its retry at the old epoch hears it again
        assert (missed.member_epoch, partitions(missed)) == (2, partitions(told))
        given = heartbeat(wire, "shop", "m2", 2)
        assert sorted(partitions(given) + partitions(told)) == [0, 1, 2, 3]
        (group,) = describe(wire, "shop")
        assert group.group_state == "Stable" and {m.member_epoch for m in group.members} == {2}
        assert {m.member_id: sorted(p for t in m.assignment.topic_partitions for p in t.partitions)
                for m in group.members} == {"m1": partitions(told), "m2": partitions(given)}
        assert {t.topic_name for m in group.members for t in m.target_assignment.topic_partitions} == {"orders"}
        left = heartbeat(wire, "shop", "m2", -1)
        assert (left.error_code, left.member_epoch) == (ec.NONE, -1)
        back = heartbeat(wire, "shop", "m1", 2, owned=owned(told))
        assert (back.member_epoch, partitions(back)) == (3, [0, 1, 2, 3])


def test_a_regex_subscription_follows_the_topics_it_matches(tmp_path):
    with KafkaServer(tmp_path, port=0, config=CONFIG) as server, WireClient(server.port) as wire:
        create_topic(server, "logs-a", 1)
        joined = heartbeat(wire, "tail", "m1", 0, regex="logs-.*")
        assert partitions(joined) == [0] and joined.member_epoch == 1
        create_topic(server, "logs-b", 2)
        create_topic(server, "other", 1)
        grown = heartbeat(wire, "tail", "m1", 1, owned=owned(joined))
        names = {server.context.topics.name_of(t.topic_id): sorted(t.partitions)
                 for t in grown.assignment.topic_partitions}
        assert names == {"logs-a": [0], "logs-b": [0, 1]} and grown.member_epoch == 2
        bad = heartbeat(wire, "tail", "m2", 0, regex="logs-(")
        assert bad.error_code == ec.INVALID_REGULAR_EXPRESSION


def test_the_range_assignor_and_kafkas_errors_for_a_bad_heartbeat(tmp_path):
    with KafkaServer(tmp_path, port=0, config=CONFIG) as server, WireClient(server.port) as wire:
        create_topic(server, "t", 5)
        first = heartbeat(wire, "r", "m1", 0, topics=["t"], assignor="range")
        assert partitions(first) == [0, 1, 2, 3, 4]
        assert heartbeat(wire, "r", "m2", 0, topics=["t"], assignor="sticky").error_code == ec.UNSUPPORTED_ASSIGNOR
        assert heartbeat(wire, "r", "m1", 7, owned=owned(first)).error_code == ec.FENCED_MEMBER_EPOCH
        assert heartbeat(wire, "r", "nobody", 1, owned=[]).error_code == ec.UNKNOWN_MEMBER_ID
        assert heartbeat(wire, "r", "", 0, topics=["t"]).error_code == ec.INVALID_REQUEST
        assert heartbeat(wire, "unknown", "m1", 3, owned=[]).error_code == ec.GROUP_ID_NOT_FOUND
        heartbeat(wire, "r", "m2", 0, topics=["t"], assignor="range")
        (group,) = describe(wire, "r")
        assert group.assignor_name == "range"
        assert {m.member_id: sorted(p for t in m.target_assignment.topic_partitions for p in t.partitions)
                for m in group.members} == {"m1": [0, 1, 2], "m2": [3, 4]}


def test_a_static_member_that_leaves_for_a_while_gets_its_partitions_back(tmp_path):
    with KafkaServer(tmp_path, port=0, config=CONFIG) as server, WireClient(server.port) as wire:
        create_topic(server, "t", 4)
        a = heartbeat(wire, "s", "a1", 0, topics=["t"], instance="i-a")
        b = heartbeat(wire, "s", "b1", 0, topics=["t"], instance="i-b")
        told = heartbeat(wire, "s", "a1", a.member_epoch, owned=owned(a))  # give two to b
        mine = partitions(told)
        heartbeat(wire, "s", "a1", told.member_epoch, owned=owned(told))
        heartbeat(wire, "s", "b1", b.member_epoch, owned=[])
        assert heartbeat(wire, "s", "a1", -2, instance="i-a").member_epoch == -2
        assert heartbeat(wire, "s", "a2", 0, topics=["t"], instance="i-b").error_code == ec.UNRELEASED_INSTANCE_ID
        again = heartbeat(wire, "s", "a2", 0, topics=["t"], instance="i-a")
        assert (again.error_code, partitions(again)) == (ec.NONE, mine)
        assert {m.member_id for m in describe(wire, "s")[0].members} == {"a2", "b1"}


def test_classic_and_consumer_groups_side_by_side_never_mix(tmp_path):
    with KafkaServer(tmp_path, port=0, config=CONFIG) as server, Wire(server.port) as wire:
        create_topic(server, "t", 2)
        heartbeat(wire, "new", "m1", 0, topics=["t"])
        asked = wire.join("old", None)  # KIP-394: the member id first
        classic = wire.join("old", None, member_id=asked.member_id)
        assert (asked.error_code, classic.error_code) == (ec.MEMBER_ID_REQUIRED, ec.NONE)
        assert wire.join("new", None).error_code == ec.INCONSISTENT_GROUP_PROTOCOL
        assert heartbeat(wire, "old", "m9", 0, topics=["t"]).error_code == ec.GROUP_ID_NOT_FOUND
        listed = wire.call(ListGroupsRequest[5](states_filter=[], types_filter=[]), ListGroupsResponse[5]).groups
        assert {(g.group_id, g.group_type, g.protocol_type) for g in listed} == \
            {("new", "consumer", "consumer"), ("old", "classic", "consumer")}
        only = wire.call(ListGroupsRequest[5](states_filter=["stable"], types_filter=["Consumer"]),
                         ListGroupsResponse[5]).groups
        assert [(g.group_id, g.group_state) for g in only] == [("new", "Stable")]
        (described,) = wire.call(DescribeGroupsRequest[5](groups=["new"]), DescribeGroupsResponse[5]).groups
        assert (described.error_code, described.group_state) == (ec.NONE, "Dead")  # not a classic group
        (not_consumer,) = describe(wire, "old")
        assert not_consumer.error_code == ec.GROUP_ID_NOT_FOUND
        assert heartbeat(wire, "new", "m1", 1, owned=[]).error_code == ec.NONE
        heartbeat(wire, "new", "m1", -1)
        assert wire.join("new", None).error_code == ec.MEMBER_ID_REQUIRED  # an empty consumer group turns classic


def commit(wire: WireClient, version: int, member: str, epoch: int) -> int:
    cls = OffsetCommitRequest[version]
    topic = cls.OffsetCommitRequestTopic
    response = wire.call(cls(group_id="c", generation_id_or_member_epoch=epoch, member_id=member,
                             group_instance_id=None, topics=[topic(name="t", partitions=[
                                 topic.OffsetCommitRequestPartition(partition_index=0, committed_offset=5,
                                                                    committed_leader_epoch=-1,
                                                                    committed_metadata="")])]),
                         OffsetCommitResponse[version])
    return response.topics[0].partitions[0].error_code


def test_members_commit_at_their_member_epoch(tmp_path):
    with KafkaServer(tmp_path, port=0, config=CONFIG) as server, WireClient(server.port) as wire:
        create_topic(server, "t", 1)
        joined = heartbeat(wire, "c", "m1", 0, topics=["t"])
        assert commit(wire, 9, "m1", joined.member_epoch) == ec.NONE
        assert commit(wire, 9, "m1", joined.member_epoch + 1) == ec.STALE_MEMBER_EPOCH
        assert commit(wire, 8, "m1", joined.member_epoch + 1) == ec.ILLEGAL_GENERATION
        assert commit(wire, 9, "m2", joined.member_epoch) == ec.UNKNOWN_MEMBER_ID
        assert commit(wire, 9, "", -1) == ec.UNKNOWN_MEMBER_ID  # nobody else commits while it consumes
        assert fetch(wire, "m1", joined.member_epoch) == (ec.NONE, [5])
        assert fetch(wire, "m1", joined.member_epoch + 1) == (ec.STALE_MEMBER_EPOCH, [])
        assert fetch(wire, "", -1) == (ec.NONE, [5])  # an admin's fetch


def fetch(wire: WireClient, member: str, epoch: int) -> tuple[int, list[int]]:
    """OffsetFetch v9 of group "c" (and of a group nobody knows, in the same batch)."""
    cls = OffsetFetchRequest[9]
    group = cls.OffsetFetchRequestGroup
    response = wire.call(cls(require_stable=True, groups=[
        group(group_id="c", member_id=member, member_epoch=epoch,
              topics=[group.OffsetFetchRequestTopics(name="t", partition_indexes=[0])]),
        group(group_id="none", member_id=None, member_epoch=-1, topics=None)]), OffsetFetchResponse[9])
    ours, other = response.groups
    assert (other.group_id, other.error_code, other.topics) == ("none", ec.NONE, [])
    return ours.error_code, [p.committed_offset for t in ours.topics for p in t.partitions]


def test_a_silent_member_is_fenced_at_its_session_timeout_on_the_clock(tmp_path):
    clock = ManualClock(NOW)
    with KafkaServer(tmp_path, port=0, config=CONFIG, clock=clock) as server, WireClient(server.port) as wire:
        create_topic(server, "t", 2)
        quiet = heartbeat(wire, "q", "quiet", 0, topics=["t"])
        busy = heartbeat(wire, "q", "busy", 0, topics=["t"])
        clock.advance(6_000)
        busy = heartbeat(wire, "q", "busy", busy.member_epoch, owned=[])
        server.check_timers()
        assert {m.member_id for m in describe(wire, "q")[0].members} == {"quiet", "busy"}  # exactly at the timeout
        clock.advance(1)
        server.check_timers()
        assert {m.member_id for m in describe(wire, "q")[0].members} == {"busy"}
        assert heartbeat(wire, "q", "quiet", quiet.member_epoch, owned=[]).error_code == ec.UNKNOWN_MEMBER_ID
        taken = heartbeat(wire, "q", "busy", busy.member_epoch, owned=[])
        assert partitions(taken) == [0, 1]


def test_a_restarted_server_resumes_the_group_from_kafkas_records(tmp_path, capsys, monkeypatch):
    with KafkaServer(tmp_path, port=0, config=CONFIG) as server, WireClient(server.port) as wire:
        create_topic(server, "t", 3)
        joined = heartbeat(wire, "kept", "m1", 0, topics=["t"], instance="i-1")
        before = describe(wire, "kept")[0]
    with KafkaServer(tmp_path, port=0, config=CONFIG) as server, WireClient(server.port) as wire:
        after = describe(wire, "kept")[0]
        assert (after.group_epoch, after.assignment_epoch, after.group_state) == \
            (before.group_epoch, before.assignment_epoch, "Stable")
        assert [(m.member_id, m.instance_id, m.member_epoch, m.subscribed_topic_names) for m in after.members] == \
            [("m1", "i-1", joined.member_epoch, ["t"])]
        going_on = heartbeat(wire, "kept", "m1", joined.member_epoch, owned=owned(joined))
        assert (going_on.error_code, going_on.member_epoch) == (ec.NONE, joined.member_epoch)
    result = run_in_process("dump", "--offsets-decoder", "--json", "00000000000000000000.log",
                            cwd=Path(tmp_path) / "__consumer_offsets-0", capsys=capsys, monkeypatch=monkeypatch)
    assert result.returncode == 0, result.stderr
    batches = [json.loads(line) for line in result.stdout.splitlines() if line.startswith('{"type":"batch"')]
    names = {r["decoded"]["name"] for b in batches for r in b["records"]}
    assert names == {"ConsumerGroupMetadata", "ConsumerGroupPartitionMetadata", "ConsumerGroupMemberMetadata",
                     "ConsumerGroupTargetAssignmentMetadata", "ConsumerGroupTargetAssignmentMember",
                     "ConsumerGroupCurrentMemberAssignment"}


def test_a_consumer_group_is_deleted_only_once_empty_and_stays_deleted(tmp_path):
    def delete(wire: WireClient) -> int:
        (result,) = wire.call(DeleteGroupsRequest[2](groups_names=["gone"]), DeleteGroupsResponse[2]).results
        return result.error_code

    with KafkaServer(tmp_path, port=0, config=CONFIG) as server, WireClient(server.port) as wire:
        create_topic(server, "t", 1)
        joined = heartbeat(wire, "gone", "m1", 0, topics=["t"])
        assert delete(wire) == ec.NON_EMPTY_GROUP
        heartbeat(wire, "gone", "m1", -1)
        assert delete(wire) == ec.NONE
        assert heartbeat(wire, "gone", "m1", joined.member_epoch, owned=[]).error_code == ec.GROUP_ID_NOT_FOUND
    with KafkaServer(tmp_path, port=0, config=CONFIG) as server, WireClient(server.port) as wire:
        assert describe(wire, "gone")[0].error_code == ec.GROUP_ID_NOT_FOUND


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced(tmp_path):
    clock = ManualClock(NOW)
    with KafkaServer(tmp_path, port=0, config=CONFIG, clock=clock) as server, WireClient(server.port) as wire:
        create_topic(server, "t", 2)
        slow = heartbeat(wire, "rb", "slow", 0, topics=["t"])  # rebalance timeout 30 s
        other = heartbeat(wire, "rb", "other", 0, topics=["t"])
        told = heartbeat(wire, "rb", "slow", slow.member_epoch, owned=owned(slow))
        assert len(partitions(told)) == 1  # it is to give one up, and never does
        clock.advance(5_000)
        heartbeat(wire, "rb", "other", other.member_epoch, owned=[])
        heartbeat(wire, "rb", "slow", told.member_epoch, owned=owned(slow))  # still holding both
        clock.advance(25_001)
        heartbeat(wire, "rb", "other", other.member_epoch, owned=[])
        server.check_timers()
        assert [m.member_id for m in describe(wire, "rb")[0].members] == ["other"]
        assert partitions(heartbeat(wire, "rb", "other", other.member_epoch, owned=[])) == [0, 1]

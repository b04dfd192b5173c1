"""A cluster's group coordinator answers its writes only once the in-sync replicas hold them
(Kafka's coordinator appends with acks=-1), and a committed offset becomes visible only then:
with the leader cut off from its followers an OffsetCommit, a static member's rejoin, a
LeaveGroup, an OffsetDelete and a DeleteGroups are written but not answered until the link
heals, and a KIP-848 member's leave too; a commit or a static rejoin that times out is
COORDINATOR_NOT_AVAILABLE and leaves the committed offset, and the member its id, as they were."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable

from kafka.protocol.admin import DeleteGroupsRequest, DeleteGroupsResponse
from kafka.protocol.consumer import (
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
)

from logstore.server.coordinator_records import partition_for
from tests.server.group_wire import Wire
from tests.server.test_server_consumer_groups import heartbeat
from tests.server.test_server_kraft_cluster import Cluster, create_topic, eventually
from tests.server.test_server_kraft_coordinators import (
    CONFIGS,
    COORDINATOR_NOT_AVAILABLE,
    GROUP_KEY,
    PARTITIONS,
    coordinator_of,
    fetch_offset,
)

GROUP = "billing"


def committed(cluster: Cluster, node: int) -> int:
    """The offset of orders-0 node `node` answers OffsetFetch of GROUP with (-1: none)."""
    answer = fetch_offset(cluster.nodes[node].port, GROUP, "orders", 0)
    assert answer.error_code == 0
    return answer.topics[0].partitions[0].committed_offset


def coordinated_group(tmp_path, timeout_ms: int) -> tuple[Cluster, int]:
    """A cluster whose coordinator writes wait up to `timeout_ms` for the ISR, with topic
    orders (1 partition, 3 replicas): (cluster, the node coordinating GROUP, once loaded)."""
    cluster = Cluster(tmp_path, {**CONFIGS, "offsets.commit.timeout.ms": timeout_ms,
                                 "group.initial.rebalance.delay.ms": 0})
    create_topic(cluster.nodes[1].port, "orders", 1, 3)
    coordinator = coordinator_of(cluster, GROUP, GROUP_KEY)
    eventually(lambda: fetch_offset(cluster.nodes[coordinator].port, GROUP, "orders", 0).error_code == 0)
    return cluster, coordinator


def cut_off(cluster: Cluster, leader: int, heal: bool = False) -> None:
    """Cut (or heal) the links between `leader` and the other nodes: no follower fetches."""
    for node in (1, 2, 3):
        if node != leader:
            (cluster.kafka.heal if heal else cluster.kafka.cut)(leader, node)


def held_until_healed(cluster: Cluster, leader: int, call: Callable[[], object],
                      while_cut: Callable[[], None] = lambda: None):
    """Run `call` (a request to `leader`) with the leader cut off: once the leader has written
    its records the call is still unanswered (and `while_cut` holds); healed, its answer."""
    log = cluster.nodes[leader].manager.get("__consumer_offsets", partition_for(GROUP, PARTITIONS))
    end = log.log_end_offset
    cut_off(cluster, leader)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        answer = pool.submit(call)
        try:
            eventually(lambda: log.log_end_offset > end)
            assert not answer.done()
            assert log.high_watermark == end
            while_cut()
        finally:
            cut_off(cluster, leader, heal=True)
        return answer.result(30)


def test_group_writes_are_answered_and_commits_seen_only_once_the_isr_holds_them(tmp_path):
    cluster, leader = coordinated_group(tmp_path, timeout_ms=60_000)
    port = cluster.nodes[leader].port
    try:
        with Wire(port) as wire, Wire(port) as other:
            member = wire.join(GROUP, "instance-1")
            assert member.error_code == 0
            assert wire.sync(GROUP, member.generation_id, member.member_id, "instance-1",
                             {member.member_id: b""}).error_code == 0
            ids = (GROUP, member.generation_id, member.member_id, "instance-1")
            assert wire.commit(*ids, {("orders", 0): 7}) == [0]

            def unseen() -> None:  # written by the leader, not yet held by the ISR: not returned
                assert committed(cluster, leader) == 7

            assert held_until_healed(cluster, leader, lambda: wire.commit(*ids, {("orders", 0): 42}), unseen) == [0]
            assert committed(cluster, leader) == 42

            rejoined = held_until_healed(cluster, leader, lambda: other.join(GROUP, "instance-1"))
            assert rejoined.error_code == 0 and rejoined.generation_id == member.generation_id
            left = held_until_healed(cluster, leader, lambda: other.call(LeaveGroupRequest[3](
                group_id=GROUP, members=[LeaveGroupRequest[3].MemberIdentity(
                    member_id=rejoined.member_id, group_instance_id="instance-1")]), LeaveGroupResponse[3]))
            assert (left.error_code, [m.error_code for m in left.members]) == (0, [0])

            topic = OffsetDeleteRequest[0].OffsetDeleteRequestTopic
            deleted = held_until_healed(cluster, leader, lambda: other.call(OffsetDeleteRequest[0](
                group_id=GROUP, topics=[topic(name="orders", partitions=[
                    topic.OffsetDeleteRequestPartition(partition_index=0)])]), OffsetDeleteResponse[0]))
            assert (deleted.error_code, deleted.topics[0].partitions[0].error_code) == (0, 0)
            assert committed(cluster, leader) == -1

            assert other.commit(GROUP, -1, "", None, {("orders", 0): 5}) == [0]
            removed = held_until_healed(cluster, leader, lambda: other.call(
                DeleteGroupsRequest[2](groups_names=[GROUP]), DeleteGroupsResponse[2]))
            assert removed.results[0].error_code == 0
            assert committed(cluster, leader) == -1

            assert heartbeat(other, GROUP, "kip-848", 0, topics=["orders"]).error_code == 0
            gone = held_until_healed(cluster, leader, lambda: heartbeat(other, GROUP, "kip-848", -1))
            assert (gone.error_code, gone.member_epoch) == (0, -1)
    finally:
        cluster.close()


def test_writes_the_isr_does_not_take_in_time_are_refused_and_leave_the_group_as_it_was(tmp_path):
    cluster, leader = coordinated_group(tmp_path, timeout_ms=1000)
    port = cluster.nodes[leader].port
    try:
        with Wire(port) as wire, Wire(port) as other:
            member = wire.join(GROUP, "instance-1")
            ids = (GROUP, member.generation_id, member.member_id, "instance-1")
            eventually(lambda: wire.sync(*ids, {member.member_id: b""}).error_code == 0)  # clients retry
            eventually(lambda: wire.commit(*ids, {("orders", 0): 7}) == [0])
            cut_off(cluster, leader)
            try:
                assert wire.commit(*ids, {("orders", 0): 42}) == [COORDINATOR_NOT_AVAILABLE]
                assert committed(cluster, leader) == 7
                rejoined = other.join(GROUP, "instance-1")
                assert (rejoined.error_code, rejoined.member_id) == (COORDINATOR_NOT_AVAILABLE, "")
            finally:
                cut_off(cluster, leader, heal=True)
            assert wire.heartbeat(*ids) == 0  # the static member keeps its old id
            eventually(lambda: wire.commit(*ids, {("orders", 0): 43}) == [0])
            assert committed(cluster, leader) == 43
    finally:
        cluster.close()

"""Group requests sent by hand over one socket, for server tests that need the exact order
of JoinGroup, SyncGroup, Heartbeat and OffsetCommit no client library lets them choose."""

from __future__ import annotations

from kafka.protocol.consumer import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

from tests.support.wire import WireClient


class Wire(WireClient):
    """Group requests over one socket, as a client library would send them."""

    def __init__(self, port: int):
        super().__init__(port, timeout=None)

    def join(self, group: str, instance: str | None, member_id: str = "", session_ms: int = 10_000,
             metadata: bytes = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"):
        protocol = JoinGroupRequest[5].JoinGroupRequestProtocol(name="range", metadata=metadata)
        return self.call(JoinGroupRequest[5](group_id=group, session_timeout_ms=session_ms,
                                             rebalance_timeout_ms=session_ms, member_id=member_id,
                                             group_instance_id=instance, protocol_type="consumer",
                                             protocols=[protocol]), JoinGroupResponse[5])

    def sync(self, group: str, generation: int, member_id: str, instance: str | None,
             assignments: dict[str, bytes] | None = None):
        cls = SyncGroupRequest[3].SyncGroupRequestAssignment
        return self.call(SyncGroupRequest[3](group_id=group, generation_id=generation, member_id=member_id,
                                             group_instance_id=instance, assignments=[
                                                 cls(member_id=m, assignment=a)
                                                 for m, a in (assignments or {}).items()]), SyncGroupResponse[3])

    def heartbeat(self, group: str, generation: int, member_id: str, instance: str | None) -> int:
        return self.call(HeartbeatRequest[3](group_id=group, generation_id=generation, member_id=member_id,
                                             group_instance_id=instance), HeartbeatResponse[3]).error_code

    def commit(self, group: str, generation: int, member_id: str, instance: str | None,
               offsets: dict[tuple[str, int], int]) -> list[int]:
        """Commit `offsets` by (topic, partition); the error code of each partition."""
        topic = OffsetCommitRequest[7].OffsetCommitRequestTopic
        by_topic: dict[str, list] = {}
        for (name, partition), offset in offsets.items():
            by_topic.setdefault(name, []).append(topic.OffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_leader_epoch=-1,
                committed_metadata=""))
        response = self.call(OffsetCommitRequest[7](
            group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
            group_instance_id=instance, topics=[topic(name=n, partitions=ps) for n, ps in by_topic.items()]),
            OffsetCommitResponse[7])
        return [p.error_code for t in response.topics for p in t.partitions]

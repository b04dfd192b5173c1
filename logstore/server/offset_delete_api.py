"""OffsetDelete (`kafka-consumer-groups.sh --delete-offsets`): a group's committed offsets of
some partitions removed, with tombstones in __consumer_offsets, as the group coordinator rules."""

from __future__ import annotations

from typing import Any

from logstore.server import error_codes as ec
from logstore.server.context import ServerContext
from logstore.server.group_coordinator import GroupCoordinator
from logstore.server.group_metadata import group_id_fits
from logstore.server.protocol import Request


class OffsetDeleteApi:
    """Answers OffsetDelete through the group coordinator."""

    def __init__(self, ctx: ServerContext, groups: GroupCoordinator):
        self._ctx = ctx
        self._groups = groups

    async def offset_delete(self, req: Request) -> Any:
        body = req.body
        cls = req.spec.response.OffsetDeleteResponseTopic
        wanted = [(t.name, p.partition_index) for t in body.topics for p in t.partitions]
        # Kafka's KafkaApis answers partitions of unknown topics itself; the rest go to the coordinator
        unknown = {tp for tp in wanted if self._ctx.partition(*tp) is None}
        if not body.group_id or not group_id_fits(body.group_id):
            group_error, errors = ec.INVALID_GROUP_ID, {}
        else:
            group_error, errors = await self._groups.delete_offsets(body.group_id, [tp for tp in wanted if tp not in unknown])
        if group_error != ec.NONE:
            return req.response(error_code=group_error, throttle_time_ms=0, topics=[])
        errors |= {tp: ec.UNKNOWN_TOPIC_OR_PARTITION for tp in unknown}
        by_topic: dict[str, list] = {}
        for topic, partition in wanted:
            by_topic.setdefault(topic, []).append(cls.OffsetDeleteResponsePartition(
                partition_index=partition, error_code=errors[(topic, partition)]))
        return req.response(error_code=ec.NONE, throttle_time_ms=0,
                            topics=[cls(name=t, partitions=ps) for t, ps in by_topic.items()])

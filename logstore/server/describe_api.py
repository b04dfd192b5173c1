"""The describing APIs the Java admin tools use: DescribeCluster (`describeCluster`, with
authorized operations), DescribeTopicPartitions (`describeTopics`, paged by a cursor) and
DescribeLogDirs (`kafka-log-dirs.sh`), answered for this one node (in a cluster, DescribeCluster
and DescribeTopicPartitions from the metadata, ELR included)."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from typing import Any

from logstore.server import error_codes as ec
from logstore.server.admin_api import CLUSTER_OPERATIONS, TOPIC_OPERATIONS
from logstore.server.context import ServerContext
from logstore.server.protocol import Request
from logstore.server.topics import INTERNAL_TOPICS

BROKER_ENDPOINT, CONTROLLER_ENDPOINT = 1, 2
# Kafka's max.request.partition.size.limit: the most partitions one DescribeTopicPartitions answers
PARTITION_LIMIT = 2000


class DescribeApi:
    """Cluster, topic-partition and log-directory descriptions of the node."""

    def __init__(self, ctx: ServerContext):
        self._ctx = ctx

    async def describe_cluster(self, req: Request) -> Any:
        body = req.body
        endpoint = body.endpoint_type if req.version >= 1 else BROKER_ENDPOINT
        error, message = ec.NONE, None
        if endpoint == CONTROLLER_ENDPOINT:
            error, message = ec.MISMATCHED_ENDPOINT_TYPE, "this node answers broker endpoints, not controller ones"
        elif endpoint != BROKER_ENDPOINT:
            error, message = ec.UNSUPPORTED_ENDPOINT_TYPE, f"unknown endpoint type {endpoint}"
        entry = req.spec.response.DescribeClusterBroker
        if self._ctx.cluster is not None:  # every unfenced broker of the cluster's metadata
            brokers = [entry(broker_id=b, host=h, port=p, rack=r, is_fenced=False)
                       for b, h, p, r in self._ctx.cluster.brokers()]
        else:
            brokers = [entry(broker_id=self._ctx.node_id, host=self._ctx.host, port=self._ctx.port, rack=None,
                             is_fenced=False)]
        operations = set(CLUSTER_OPERATIONS) if body.include_cluster_authorized_operations else None
        return req.response(throttle_time_ms=0, error_code=error, error_message=message,
                            endpoint_type=BROKER_ENDPOINT, cluster_id=self._ctx.meta.cluster_id,
                            controller_id=self._ctx.node_id, brokers=[] if error else brokers,
                            authorized_operations=operations)

    async def describe_topic_partitions(self, req: Request) -> Any:
        body = req.body
        cls = req.spec.response.DescribeTopicPartitionsResponseTopic
        topics = self._ctx.topics
        image = None if self._ctx.cluster is None else self._ctx.cluster.image  # a cluster's metadata
        requested = sorted({t.name for t in body.topics}) if body.topics else None
        if image is not None:
            names = requested if requested is not None else sorted(info.name for info in list(image.topics.values()))
            counts = {name: None if (info := image.topic(name)) is None else len(info.partitions) for name in names}
        else:
            names = requested if requested is not None else topics.names()
            counts = {name: topics.partition_count(name) if name in topics else None for name in names}
        cursor = None if body.cursor is None else (body.cursor.topic_name, body.cursor.partition_index)
        limit = body.response_partition_limit
        pages, next_cursor = partition_page(counts, cursor, min(limit, PARTITION_LIMIT) if limit > 0 else PARTITION_LIMIT)
        node = self._ctx.node_id
        entries = []
        for name, start, end in pages:
            if counts[name] is None:
                entries.append(cls(error_code=ec.UNKNOWN_TOPIC_OR_PARTITION, name=name, partitions=[]))
                continue
            entry = cls.DescribeTopicPartitionsResponsePartition
            if image is not None:  # leaders, ISR and KIP-966's ELR as the controller recorded them
                info = image.topic(name)
                topic_id = info.topic_id
                partitions = [entry(
                    error_code=ec.NONE, partition_index=i, leader_id=p.leader, leader_epoch=p.leader_epoch,
                    replica_nodes=list(p.replicas), isr_nodes=list(p.isr), eligible_leader_replicas=list(p.elr),
                    last_known_elr=list(p.last_known_elr),
                    offline_replicas=[r for r in p.replicas if image.registry.is_fenced(r)])
                    for i, p in ((i, info.partitions[i]) for i in range(start, end))]
            else:
                topic_id = topics.topic_id(name)
                partitions = [entry(
                    error_code=ec.NONE, partition_index=p, leader_id=node, leader_epoch=0, replica_nodes=[node],
                    isr_nodes=[node], eligible_leader_replicas=None, last_known_elr=None, offline_replicas=[])
                    for p in range(start, end)]
            entries.append(cls(error_code=ec.NONE, name=name, topic_id=topic_id,
                               is_internal=name in INTERNAL_TOPICS, partitions=partitions,
                               topic_authorized_operations=sum(1 << op for op in TOPIC_OPERATIONS)))
        cursor_entry = None if next_cursor is None else req.spec.response.Cursor(
            topic_name=next_cursor[0], partition_index=next_cursor[1])
        return req.response(throttle_time_ms=0, topics=entries, next_cursor=cursor_entry)

    async def describe_log_dirs(self, req: Request) -> Any:
        cls = req.spec.response.DescribeLogDirsResult
        topics = self._ctx.topics
        if req.body.topics is None:
            wanted = [(name, list(range(topics.partition_count(name)))) for name in topics.names()]
        else:
            wanted = [(t.topic, t.partitions) for t in req.body.topics]
        described = []
        for name, partitions in wanted:
            logs = [(p, topics.log(name, p)) for p in partitions]
            found = [cls.DescribeLogDirsTopic.DescribeLogDirsPartition(
                partition_index=p, partition_size=log.size, offset_lag=0, is_future_key=False)
                for p, log in logs if log is not None]
            if found:
                described.append(cls.DescribeLogDirsTopic(name=name, partitions=found))
        data_dir = self._ctx.manager.data_dir
        usage = shutil.disk_usage(data_dir)
        result = cls(error_code=ec.NONE, log_dir=str(data_dir.resolve()), topics=described,
                     total_bytes=usage.total, usable_bytes=usage.free, is_cordoned=False)
        return req.response(throttle_time_ms=0, error_code=ec.NONE, results=[result])


def partition_page(counts: Mapping[str, int | None], cursor: tuple[str, int] | None,
                   limit: int) -> tuple[list[tuple[str, int, int]], tuple[str, int] | None]:
    """One page of DescribeTopicPartitions over topics in name order: (name, first partition,
    end) per topic shown (an unknown topic, count None, shows as (name, 0, 0)), at most `limit`
    partitions in all, from `cursor` (topic, partition) on; and where the next page starts, None
    when nothing is left."""
    pages: list[tuple[str, int, int]] = []
    for name in sorted(counts):
        start = 0
        if cursor is not None:
            if name < cursor[0]:
                continue
            if name == cursor[0]:
                start = cursor[1]
        count = counts[name]
        if count is None:
            pages.append((name, 0, 0))
            continue
        if start >= count:
            continue
        if limit == 0:
            return pages, (name, start)
        end = min(count, start + limit)
        pages.append((name, start, end))
        limit -= end - start
        if end < count:
            return pages, (name, end)
    return pages, None

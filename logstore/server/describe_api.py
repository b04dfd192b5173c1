"""The describing APIs the Java admin tools use: DescribeCluster (`describeCluster`, with
authorized operations), DescribeTopicPartitions (`describeTopics`, paged by a cursor) and
DescribeLogDirs (`kafka-log-dirs.sh`), answered for this one node."""

from __future__ import annotations

import shutil
from typing import Any

from logstore.server import error_codes as ec
from logstore.server.admin_api import CLUSTER_OPERATIONS, TOPIC_OPERATIONS
from logstore.server.context import ServerContext
from logstore.server.protocol import Request

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
        broker = req.spec.response.DescribeClusterBroker(broker_id=self._ctx.node_id, host=self._ctx.host,
                                                         port=self._ctx.port, rack=None, is_fenced=False)
        operations = set(CLUSTER_OPERATIONS) if body.include_cluster_authorized_operations else None
        return req.response(throttle_time_ms=0, error_code=error, error_message=message,
                            endpoint_type=BROKER_ENDPOINT, cluster_id=self._ctx.meta.cluster_id,
                            controller_id=self._ctx.node_id, brokers=[] if error else [broker],
                            authorized_operations=operations)

    async def describe_topic_partitions(self, req: Request) -> Any:
        body = req.body
        cls = req.spec.response.DescribeTopicPartitionsResponseTopic
        topics = self._ctx.topics
        names = sorted({t.name for t in body.topics}) if body.topics else topics.names()
        start = 0
        if body.cursor is not None:
            names = [n for n in names if n >= body.cursor.topic_name]
            start = body.cursor.partition_index if names and names[0] == body.cursor.topic_name else 0
        budget = min(body.response_partition_limit, PARTITION_LIMIT) if body.response_partition_limit > 0 \
            else PARTITION_LIMIT
        node = self._ctx.node_id
        entries, cursor = [], None
        for name in names:
            if name not in topics:
                entries.append(cls(error_code=ec.UNKNOWN_TOPIC_OR_PARTITION, name=name, partitions=[]))
                start = 0
                continue
            if budget == 0:
                cursor = req.spec.response.Cursor(topic_name=name, partition_index=start)
                break
            count = topics.partition_count(name)
            end = min(count, start + budget)
            partitions = [cls.DescribeTopicPartitionsResponsePartition(
                error_code=ec.NONE, partition_index=p, leader_id=node, leader_epoch=0, replica_nodes=[node],
                isr_nodes=[node], eligible_leader_replicas=None, last_known_elr=None, offline_replicas=[])
                for p in range(start, end)]
            entries.append(cls(error_code=ec.NONE, name=name, topic_id=topics.topic_id(name),
                               is_internal=topics.is_internal(name), partitions=partitions,
                               topic_authorized_operations=sum(1 << op for op in TOPIC_OPERATIONS)))
            budget -= end - start
            if end < count:
                cursor = req.spec.response.Cursor(topic_name=name, partition_index=end)
                break
            start = 0
        return req.response(throttle_time_ms=0, topics=entries, next_cursor=cursor)

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

"""Every API this server serves, each declared once: its messages, the versions it serves
(what ApiVersions advertises and what requests are decoded), the handler that answers it and
any encoding of its own. Dispatch, decoding and ApiVersions all read this table.

The versions are those kafka-python 3, aiokafka 0.14 and librdkafka 2.x negotiate, capped
where a later version needs what a single node without topic-id fetches does not have.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from logstore.server.admin_api import AdminApi
from logstore.server.connection import Handler
from logstore.server.consumer_group_api import ConsumerGroupApi
from logstore.server.data_api import DataApi
from logstore.server.describe_api import DescribeApi
from logstore.server.fetch_response import encode_fetch_response
from logstore.server.group_api import GroupApi
from logstore.server.messages import consumer_group_apis as kip848
from logstore.server.offset_delete_api import OffsetDeleteApi
from logstore.server.protocol import ApiSpec, admin, consumer, metadata, producer
from logstore.server.transaction_api import TransactionApi
from logstore.server.txn_describe_api import TxnDescribeApi
from logstore.server.txn_markers import TxnMarkerApi


def declare(*apis: ApiSpec) -> dict[int, ApiSpec]:
    """The declarations by API key; an API declared twice is a mistake, refused at import."""
    table: dict[int, ApiSpec] = {}
    for api in apis:
        if api.key in table:
            raise ValueError(f"api {api.key} ({api.name}) is declared twice")
        table[api.key] = api
    return table


APIS: dict[int, ApiSpec] = declare(
    # Produce v0-2 are advertised but refused, as Kafka 4.0 does (KAFKA-18659): librdkafka before
    # 2.10 sends compressed batches uncompressed to a broker whose Produce range starts above v0.
    ApiSpec(producer.ProduceRequest, producer.ProduceResponse, 3, 11, DataApi.produce, request_views=True,
            advertised_min_version=0),
    # v13-17 (topics by id; v15+ the follower's broker epoch in ReplicaState) are what followers
    # send; clients are offered v12, the last by topic name, which every client here fetches with
    ApiSpec(consumer.FetchRequest, consumer.FetchResponse, 4, 17, DataApi.fetch, encode=encode_fetch_response,
            advertised_max_version=12),
    ApiSpec(consumer.ListOffsetsRequest, consumer.ListOffsetsResponse, 1, 7, DataApi.list_offsets),
    ApiSpec(metadata.MetadataRequest, metadata.MetadataResponse, 0, 12, AdminApi.metadata),
    # v9 is the version for members of KIP-848 groups (their member epoch as the generation)
    ApiSpec(consumer.OffsetCommitRequest, consumer.OffsetCommitResponse, 2, 9, GroupApi.offset_commit),
    # v8 fetches for a batch of groups; v9 names the member that asks (KIP-848)
    ApiSpec(consumer.OffsetFetchRequest, consumer.OffsetFetchResponse, 1, 9, GroupApi.offset_fetch),
    ApiSpec(metadata.FindCoordinatorRequest, metadata.FindCoordinatorResponse, 0, 4,
            GroupApi.find_coordinator),
    ApiSpec(consumer.JoinGroupRequest, consumer.JoinGroupResponse, 0, 7, GroupApi.join_group),
    ApiSpec(consumer.HeartbeatRequest, consumer.HeartbeatResponse, 0, 4, GroupApi.heartbeat),
    ApiSpec(consumer.LeaveGroupRequest, consumer.LeaveGroupResponse, 0, 4, GroupApi.leave_group),
    ApiSpec(consumer.SyncGroupRequest, consumer.SyncGroupResponse, 0, 5, GroupApi.sync_group),
    ApiSpec(admin.DescribeGroupsRequest, admin.DescribeGroupsResponse, 0, 5, GroupApi.describe_groups),
    ApiSpec(admin.ListGroupsRequest, admin.ListGroupsResponse, 0, 5, GroupApi.list_groups),
    ApiSpec(metadata.ApiVersionsRequest, metadata.ApiVersionsResponse, 0, 3, AdminApi.api_versions),
    ApiSpec(admin.CreateTopicsRequest, admin.CreateTopicsResponse, 2, 7, AdminApi.create_topics),
    ApiSpec(admin.DeleteTopicsRequest, admin.DeleteTopicsResponse, 1, 5, AdminApi.delete_topics),
    ApiSpec(admin.DeleteRecordsRequest, admin.DeleteRecordsResponse, 0, 2, DataApi.delete_records),
    ApiSpec(producer.InitProducerIdRequest, producer.InitProducerIdResponse, 0, 4,
            TransactionApi.init_producer_id),
    ApiSpec(consumer.OffsetForLeaderEpochRequest, consumer.OffsetForLeaderEpochResponse, 2, 4,
            DataApi.offset_for_leader_epoch),
    ApiSpec(producer.AddPartitionsToTxnRequest, producer.AddPartitionsToTxnResponse, 0, 3,
            TransactionApi.add_partitions_to_txn),
    ApiSpec(producer.AddOffsetsToTxnRequest, producer.AddOffsetsToTxnResponse, 0, 3,
            TransactionApi.add_offsets_to_txn),
    ApiSpec(producer.EndTxnRequest, producer.EndTxnResponse, 0, 3, TransactionApi.end_txn),
    ApiSpec(producer.TxnOffsetCommitRequest, producer.TxnOffsetCommitResponse, 0, 3,
            TransactionApi.txn_offset_commit),
    ApiSpec(admin.ElectLeadersRequest, admin.ElectLeadersResponse, 0, 2, AdminApi.elect_leaders),
    ApiSpec(admin.UpdateFeaturesRequest, admin.UpdateFeaturesResponse, 0, 2, AdminApi.update_features),
    ApiSpec(admin.DescribeConfigsRequest, admin.DescribeConfigsResponse, 1, 4, AdminApi.describe_configs),
    ApiSpec(admin.CreatePartitionsRequest, admin.CreatePartitionsResponse, 0, 3, AdminApi.create_partitions),
    ApiSpec(admin.DeleteGroupsRequest, admin.DeleteGroupsResponse, 0, 2, GroupApi.delete_groups),
    ApiSpec(admin.AlterConfigsRequest, admin.AlterConfigsResponse, 0, 2, AdminApi.alter_configs),
    ApiSpec(admin.IncrementalAlterConfigsRequest, admin.IncrementalAlterConfigsResponse, 0, 1,
            AdminApi.incremental_alter_configs),
    ApiSpec(consumer.OffsetDeleteRequest, consumer.OffsetDeleteResponse, 0, 0, OffsetDeleteApi.offset_delete),
    ApiSpec(admin.DescribeLogDirsRequest, admin.DescribeLogDirsResponse, 1, 5, DescribeApi.describe_log_dirs),
    ApiSpec(admin.DescribeClusterRequest, admin.DescribeClusterResponse, 0, 2, DescribeApi.describe_cluster),
    ApiSpec(admin.DescribeTopicPartitionsRequest, admin.DescribeTopicPartitionsResponse, 0, 0,
            DescribeApi.describe_topic_partitions),
    ApiSpec(admin.DescribeProducersRequest, admin.DescribeProducersResponse, 0, 0, TxnDescribeApi.describe_producers),
    ApiSpec(admin.DescribeTransactionsRequest, admin.DescribeTransactionsResponse, 0, 0,
            TxnDescribeApi.describe_transactions),
    ApiSpec(kip848.ConsumerGroupHeartbeatRequest, kip848.ConsumerGroupHeartbeatResponse, 0, 1,
            ConsumerGroupApi.consumer_group_heartbeat),
    ApiSpec(kip848.ConsumerGroupDescribeRequest, kip848.ConsumerGroupDescribeResponse, 0, 1,
            ConsumerGroupApi.consumer_group_describe),
    # sent between the nodes of a cluster: a transaction coordinator to a partition's leader
    ApiSpec(producer.WriteTxnMarkersRequest, producer.WriteTxnMarkersResponse, 0, 1, TxnMarkerApi.write_txn_markers),
    # v2 filters transactional ids by a Java regular expression: not served
    ApiSpec(admin.ListTransactionsRequest, admin.ListTransactionsResponse, 0, 1, TxnDescribeApi.list_transactions),
)


def bind(apis: Mapping[int, ApiSpec], services: Iterable[object]) -> dict[int, Handler]:
    """Each API's handler, bound to the one service whose class defines it.

    Raises ValueError when no service, or more than one, answers a declared API.
    """
    services = list(services)
    handlers: dict[int, Handler] = {}
    for key, api in apis.items():
        name = api.handler.__name__
        owners = [s for s in services if getattr(type(s), name, None) is api.handler]
        if len(owners) != 1:
            raise ValueError(f"api {key} ({api.name}) is answered by {len(owners)} services, not one")
        handlers[key] = getattr(owners[0], name)
    return handlers

"""The APIs the controller listener serves (Kafka's ControllerApis, reduced): ApiVersions,
BrokerRegistration, BrokerHeartbeat, AlterPartition (ISR changes from partition leaders),
AllocateProducerIds (blocks of producer ids for brokers' idempotent and transactional producers), Fetch of `__cluster_metadata` (brokers learn the metadata
by fetching its log, long-polling for new records), CreateTopics, ElectLeaders and UpdateFeatures (brokers
forward their clients' requests here). Declared once, in `CONTROLLER_APIS`; answered by `ControllerApi`."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from logstore.clean_shutdown import NO_BROKER_EPOCH
from logstore.errors import InvalidReplicationError, LogstoreError, OffsetOutOfRangeError
from logstore.internal_topics.metadata_schemas import METADATA_TOPIC
from logstore.server import error_codes as ec
from logstore.server.apis import declare
from logstore.server.context import DataSignal
from logstore.server.fetch_request import read_fetch
from logstore.server.kraft import elect_leaders, feature_updates
from logstore.server.kraft.quorum_controller import PRODUCER_ID_BLOCK_SIZE, QuorumController
from logstore.server.messages.controller_apis import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from logstore.server.protocol import (
    ApiSpec,
    Request,
    admin,
    api_versions_entries,
    consumer,
    metadata,
)
from logstore.server.topics import TopicExistsError

METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka's Uuid.METADATA_TOPIC_ID
DEFAULT_REPLICATION_FACTOR = 1  # default.replication.factor


class ControllerApi:
    """The active controller's answers on the controller listener; `num_partitions` is the
    broker-level num.partitions used when CreateTopics leaves the count to the cluster;
    `on_change` runs after each request that may have appended records."""

    def __init__(self, controller: QuorumController, num_partitions: int,
                 on_change: Callable[[], None] = lambda: None):
        self._controller = controller
        self._num_partitions = num_partitions
        self._on_change = on_change
        self.committed = DataSignal()  # wakes metadata fetches waiting for new records

    def changed(self) -> None:
        """Records may have been appended: wake waiting fetches, run `on_change`."""
        self.committed.notify()
        self._on_change()

    async def api_versions(self, req: Request) -> Any:
        return req.response(error_code=ec.NONE, throttle_time_ms=0,
                            api_keys=api_versions_entries(req.spec.response, CONTROLLER_APIS))

    async def broker_registration(self, req: Request) -> Any:
        body = req.body
        registration = self._controller.register_broker(
            body.broker_id, cluster_id=body.cluster_id, incarnation_id=body.incarnation_id,
            listeners=[{"name": li.name, "host": li.host, "port": li.port, "securityProtocol": li.security_protocol}
                       for li in body.listeners],
            features=[{"name": f.name, "minSupportedVersion": f.min_supported_version,
                       "maxSupportedVersion": f.max_supported_version} for f in body.features],
            rack=body.rack, log_dirs=list(body.log_dirs or ()), previous_broker_epoch=body.previous_broker_epoch)
        self.changed()
        return req.response(throttle_time_ms=0, error_code=registration.error_code,
                            broker_epoch=registration.broker_epoch)

    async def broker_heartbeat(self, req: Request) -> Any:
        body = req.body
        reply = self._controller.heartbeat(body.broker_id, body.broker_epoch,
                                           current_metadata_offset=body.current_metadata_offset,
                                           want_fence=body.want_fence, want_shut_down=body.want_shut_down)
        self.changed()
        return req.response(throttle_time_ms=0, error_code=reply.error_code, is_caught_up=reply.is_caught_up,
                            is_fenced=reply.is_fenced, should_shut_down=reply.should_shut_down)

    async def fetch(self, req: Request) -> Any:
        """Fetch of the metadata partition only: batches from the offset asked, waiting up to
        MaxWaitMs for some when there are none yet."""
        body = req.body
        cls = req.spec.response
        wanted = [(t, p) for t in body.topics for p in t.partitions]
        if len(wanted) != 1 or wanted[0][0].topic_id != METADATA_TOPIC_ID or wanted[0][1].partition != 0:
            return req.response(throttle_time_ms=0, error_code=ec.INVALID_REQUEST, session_id=0, responses=[])
        topic, partition = wanted[0]
        log = self._controller.log
        self._controller.metadata_fetched(read_fetch(req, lambda _id: None).replica_id, partition.fetch_offset)
        if partition.fetch_offset >= log.end_offset:
            await self.committed.wait(body.max_wait_ms / 1000)
        data = cls.FetchableTopicResponse.PartitionData
        leader = data.LeaderIdAndEpoch(leader_id=self._controller.node_id, leader_epoch=log.epoch)
        try:
            result = log.read(partition.fetch_offset, min(partition.partition_max_bytes, body.max_bytes))
            answer = data(partition_index=0, error_code=ec.NONE, high_watermark=result.high_watermark,
                          last_stable_offset=result.high_watermark, log_start_offset=result.log_start_offset,
                          current_leader=leader, aborted_transactions=None, preferred_read_replica=-1,
                          records=bytes(result.records))
        except OffsetOutOfRangeError:
            answer = data(partition_index=0, error_code=ec.OFFSET_OUT_OF_RANGE, high_watermark=log.end_offset,
                          last_stable_offset=log.end_offset, log_start_offset=log.start_offset,
                          current_leader=leader, aborted_transactions=None, preferred_read_replica=-1, records=b"")
        responses = [cls.FetchableTopicResponse(topic=METADATA_TOPIC, topic_id=topic.topic_id, partitions=[answer])]
        return req.response(throttle_time_ms=0, error_code=ec.NONE, session_id=0, responses=responses)

    async def alter_partition(self, req: Request) -> Any:
        """ISR changes from partition leaders; v2 names the ISR, v3 each member's broker epoch too."""
        body, cls = req.body, req.spec.response
        image = self._controller.image
        if self._controller.is_stale(body.broker_id, body.broker_epoch):
            return req.response(throttle_time_ms=0, error_code=ec.STALE_BROKER_EPOCH, topics=[])
        topics = []
        for topic in body.topics:
            partitions = []
            for p in topic.partitions:
                new_isr = ([(b.broker_id, b.broker_epoch) for b in p.new_isr_with_epochs] if req.version >= 3
                           else [(b, NO_BROKER_EPOCH) for b in p.new_isr])
                error = self._controller.alter_partition(
                    body.broker_id, body.broker_epoch, topic.topic_id, p.partition_index, leader_epoch=p.leader_epoch,
                    partition_epoch=p.partition_epoch, new_isr=new_isr, leader_recovery_state=p.leader_recovery_state)
                partitions.append(_partition_state(cls, error, image, topic.topic_id, p.partition_index))
            topics.append(cls.TopicData(topic_id=topic.topic_id, partitions=partitions))
        self.changed()
        return req.response(throttle_time_ms=0, error_code=ec.NONE, topics=topics)

    async def elect_leaders(self, req: Request) -> Any:
        """Preferred or unclean elections, forwarded by brokers (`elect_leaders.requested`)."""
        kind, wanted = elect_leaders.requested(req)
        results = self._controller.elect_leaders(kind, wanted)
        self.changed()
        return elect_leaders.respond(req, results)

    async def update_features(self, req: Request) -> Any:
        """Feature levels finalized (`feature_updates.requested`), forwarded by brokers."""
        results = self._controller.update_features(feature_updates.requested(req),
                                                   validate_only=feature_updates.validate_only(req))
        self.changed()
        return feature_updates.respond(req, results)

    async def allocate_producer_ids(self, req: Request) -> Any:
        error, start = self._controller.allocate_producer_ids(req.body.broker_id, req.body.broker_epoch)
        self.changed()
        return req.response(throttle_time_ms=0, error_code=error, producer_id_start=start,
                            producer_id_len=PRODUCER_ID_BLOCK_SIZE if error == ec.NONE else 0)

    async def create_topics(self, req: Request) -> Any:
        cls = req.spec.response
        results = []
        for topic in req.body.topics:
            count = self._num_partitions if topic.num_partitions == -1 else topic.num_partitions
            factor = DEFAULT_REPLICATION_FACTOR if topic.replication_factor == -1 else topic.replication_factor
            error, message, topic_id = ec.NONE, None, uuid.UUID(int=0)
            if topic.assignments:
                error, message = ec.INVALID_REQUEST, "manual replica assignments are not supported in a cluster yet"
            else:
                try:
                    configs = {c.name: c.value for c in topic.configs}
                    if not req.body.validate_only:
                        topic_id = self._controller.create_topic(topic.name, count, factor, configs)
                except TopicExistsError as exc:
                    error, message = ec.TOPIC_ALREADY_EXISTS, str(exc)
                except LogstoreError as exc:
                    error, message = _create_error(exc), str(exc)
            result = cls.CreatableTopicResult(name=topic.name, error_code=error, error_message=message,
                                              topic_id=topic_id)
            if error == ec.NONE:
                result.num_partitions, result.replication_factor = count, factor
            results.append(result)
        self.changed()
        return req.response(throttle_time_ms=0, topics=results)


def _partition_state(cls: Any, error: int, image, topic_id: uuid.UUID, partition_id: int) -> Any:
    """AlterPartition's answer for one partition: the error, or the state now recorded."""
    entry = cls.TopicData.PartitionData
    if error != ec.NONE:
        return entry(partition_index=partition_id, error_code=error, leader_id=-1, leader_epoch=-1, isr=[],
                     leader_recovery_state=0, partition_epoch=-1)
    p = image.topics[topic_id].partitions[partition_id]
    return entry(partition_index=partition_id, error_code=ec.NONE, leader_id=p.leader, leader_epoch=p.leader_epoch,
                 isr=list(p.isr), leader_recovery_state=p.leader_recovery_state, partition_epoch=p.partition_epoch)


def _create_error(exc: LogstoreError) -> int:
    if isinstance(exc, InvalidReplicationError):
        return ec.INVALID_REPLICATION_FACTOR
    return ec.for_exception(exc)


CONTROLLER_APIS: dict[int, ApiSpec] = declare(
    ApiSpec(metadata.ApiVersionsRequest, metadata.ApiVersionsResponse, 0, 3, ControllerApi.api_versions),
    ApiSpec(consumer.FetchRequest, consumer.FetchResponse, 13, 17, ControllerApi.fetch),
    ApiSpec(admin.CreateTopicsRequest, admin.CreateTopicsResponse, 2, 7, ControllerApi.create_topics),
    ApiSpec(BrokerRegistrationRequest, BrokerRegistrationResponse, 0, 4, ControllerApi.broker_registration),
    ApiSpec(BrokerHeartbeatRequest, BrokerHeartbeatResponse, 0, 1, ControllerApi.broker_heartbeat),
    ApiSpec(AlterPartitionRequest, AlterPartitionResponse, 2, 3, ControllerApi.alter_partition),
    ApiSpec(AllocateProducerIdsRequest, AllocateProducerIdsResponse, 0, 0, ControllerApi.allocate_producer_ids),
    ApiSpec(admin.ElectLeadersRequest, admin.ElectLeadersResponse, 0, 2, ControllerApi.elect_leaders),
    ApiSpec(admin.UpdateFeaturesRequest, admin.UpdateFeaturesResponse, 0, 2, ControllerApi.update_features),
)

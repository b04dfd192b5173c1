"""Cluster and topic APIs: ApiVersions, Metadata (with auto-creation), CreateTopics,
DeleteTopics, CreatePartitions, DescribeConfigs and IncrementalAlterConfigs."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

from logstore.config import LogConfig
from logstore.errors import InvalidConfigError, InvalidTopicError, LogstoreError, ReservedTopicError
from logstore.kafka_uuid import ZERO_UUID
from logstore.log_files import validate_topic
from logstore.server import error_codes as ec
from logstore.server.config_entries import (
    SOURCE_DEFAULT,
    TOPIC_KEYS,
    ConfigEntry,
    broker_entries,
    topic_entries,
)
from logstore.server.context import ServerContext
from logstore.server.kraft import elect_leaders, feature_updates
from logstore.server.protocol import Request, api_versions_entries
from logstore.server.replica_assignment import InvalidReplicaAssignmentError, assigned_partitions
from logstore.server.topics import (
    InvalidPartitionsError,
    TopicExistsError,
    UnknownTopicError,
)

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
OPERATIONS = frozenset({OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT})
# Kafka's AclOperation codes (a 32-bit field on the wire, a set in kafka-python): what a topic
# supports (read, write, create, delete, alter, describe, describe and alter configs); None
# when not asked for (Integer.MIN_VALUE on the wire)
TOPIC_OPERATIONS = frozenset({3, 4, 5, 6, 7, 8, 10, 11})
# and what the cluster supports: create, alter, describe, cluster action, describe and alter
# configs, idempotent write
CLUSTER_OPERATIONS = frozenset({5, 7, 8, 9, 10, 11, 12})
OPEN_CHUNK = 32  # partitions a CreateTopics or CreatePartitions opens between two turns of the event loop
_TOPIC_KEY_NAMES = {k.name for k in TOPIC_KEYS}
_LIST_KEYS = {k.name for k in TOPIC_KEYS if k.type == "list"}


class InvalidRequestError(LogstoreError):
    """A request Kafka refuses as malformed (INVALID_REQUEST): duplicate entries, unknown operations."""


def _duplicated(keys) -> set:
    """The keys that occur more than once."""
    seen, twice = set(), set()
    for key in keys:
        (twice if key in seen else seen).add(key)
    return twice


def _error_of(exc: BaseException) -> int:
    if isinstance(exc, InvalidRequestError):
        return ec.INVALID_REQUEST
    if isinstance(exc, TopicExistsError):
        return ec.TOPIC_ALREADY_EXISTS
    if isinstance(exc, UnknownTopicError):
        return ec.UNKNOWN_TOPIC_OR_PARTITION
    if isinstance(exc, InvalidPartitionsError):
        return ec.INVALID_PARTITIONS
    if isinstance(exc, ReservedTopicError):
        return ec.INVALID_REQUEST  # Kafka's controller answers so for __cluster_metadata
    if isinstance(exc, InvalidReplicaAssignmentError):
        return ec.INVALID_REPLICA_ASSIGNMENT
    return ec.for_exception(exc)


class AdminApi:
    """Cluster metadata and topic administration for one node."""

    def __init__(self, ctx: ServerContext):
        self._ctx = ctx

    async def api_versions(self, req: Request) -> Any:
        # a cluster node's v3 answer carries its supported and finalized features (KIP-584)
        features = self._ctx.cluster.feature_fields(req.spec.response) \
            if req.version >= 3 and self._ctx.cluster is not None else {}
        return req.response(error_code=ec.NONE, api_keys=api_versions_entries(req.spec.response, self._ctx.implemented),
                            throttle_time_ms=0, **features)

    # ------------------------------------------------------------------ metadata

    def _topic_metadata(self, cls: Any, name: str, authorized_operations: frozenset[int] | None) -> Any:
        entry = cls.MetadataResponseTopic
        topics = self._ctx.topics
        node = self._ctx.node_id
        partitions = [entry.MetadataResponsePartition(
            error_code=ec.NONE, partition_index=p, leader_id=node, leader_epoch=0, replica_nodes=[node],
            isr_nodes=[node], offline_replicas=[]) for p in range(topics.partition_count(name))]
        return entry(error_code=ec.NONE, name=name, topic_id=topics.topic_id(name),
                     is_internal=topics.is_internal(name), partitions=partitions,
                     authorized_operations=authorized_operations)

    async def metadata(self, req: Request) -> Any:
        body = req.body
        cls = req.spec.response
        topics = self._ctx.topics
        # without an authorizer every operation a topic supports is allowed (Kafka's AuthHelper)
        operations = TOPIC_OPERATIONS if req.version >= 8 and body.include_topic_authorized_operations else None
        asked = 8 <= req.version <= 10 and body.include_cluster_authorized_operations
        if self._ctx.cluster is not None:  # a KRaft cluster: what the metadata log says
            allow = body.allow_auto_topic_creation and self._ctx.config.auto_create_topics_enable
            brokers, entries = self._ctx.cluster.metadata(req, operations, allow)
            return req.response(throttle_time_ms=0, brokers=brokers, cluster_id=self._ctx.meta.cluster_id,
                                controller_id=self._ctx.node_id, topics=entries,
                                authorized_operations=set(CLUSTER_OPERATIONS) if asked else None)
        entries = []
        if body.topics is None or (req.version == 0 and not body.topics):
            entries = [self._topic_metadata(cls, name, operations) for name in topics.names()]
        else:
            allow = body.allow_auto_topic_creation and self._ctx.config.auto_create_topics_enable
            for requested in body.topics:
                name = requested.name
                if req.version >= 10 and name is None:  # a lookup by topic id (Admin.describeTopics by id)
                    entries.append(self._topic_by_id(cls, req.version, requested.topic_id, operations))
                    continue
                error = self._ensure_topic(name, allow)
                if error == ec.NONE:
                    entries.append(self._topic_metadata(cls, name, operations))
                else:
                    entries.append(cls.MetadataResponseTopic(error_code=error, name=name, partitions=[]))
        broker = cls.MetadataResponseBroker(node_id=self._ctx.node_id, host=self._ctx.host, port=self._ctx.port,
                                            rack=None)
        # v8-10 carry the cluster's operations too (librdkafka's describe_cluster asks there)
        return req.response(throttle_time_ms=0, brokers=[broker], cluster_id=self._ctx.meta.cluster_id,
                            controller_id=self._ctx.node_id, topics=entries,
                            authorized_operations=set(CLUSTER_OPERATIONS) if asked else None)

    def _topic_by_id(self, cls: Any, version: int, topic_id: uuid.UUID, operations: frozenset[int] | None) -> Any:
        """The topic with `topic_id`, or UNKNOWN_TOPIC_ID; before v12 ids are refused (Kafka's
        KafkaApis: INVALID_REQUEST, names may not be null there)."""
        name = self._ctx.topics.name_of(topic_id) if topic_id != ZERO_UUID else None
        if version >= 12 and name is not None:
            return self._topic_metadata(cls, name, operations)
        error = ec.UNKNOWN_TOPIC_ID if version >= 12 else ec.INVALID_REQUEST
        return cls.MetadataResponseTopic(error_code=error, name=None, topic_id=topic_id, partitions=[])

    def _ensure_topic(self, name: str | None, auto_create: bool) -> int:
        try:
            validate_topic(name)
        except InvalidTopicError:
            return ec.INVALID_TOPIC_EXCEPTION
        if name in self._ctx.topics:
            return ec.NONE
        if not auto_create or self._ctx.topics.is_internal(name):
            return ec.UNKNOWN_TOPIC_OR_PARTITION
        try:
            self._ctx.topics.create(name, self._ctx.config.num_partitions)
        except LogstoreError as exc:
            return _error_of(exc)
        return ec.NONE

    async def update_features(self, req: Request) -> Any:
        """UpdateFeatures: the active controller finalizes a cluster's feature levels."""
        if self._ctx.cluster is not None:
            return await self._ctx.cluster.forward(req)
        return feature_updates.standalone(req)

    # ------------------------------------------------------------------ topics

    async def elect_leaders(self, req: Request) -> Any:
        """ElectLeaders: the active controller holds a cluster's elections; a single node
        leads every partition already."""
        if self._ctx.cluster is not None:
            return await self._ctx.cluster.forward(req)
        return elect_leaders.standalone(req, lambda t, p: self._ctx.partition(t, p) is not None)

    async def create_topics(self, req: Request) -> Any:
        if self._ctx.cluster is not None:  # the active controller creates a cluster's topics
            return await self._ctx.cluster.forward(req)
        body = req.body
        cls = req.spec.response
        results = []
        duplicated = _duplicated(t.name for t in body.topics)
        for topic in body.topics:
            count = self._ctx.config.num_partitions if topic.num_partitions == -1 else topic.num_partitions
            configs = {c.name: c.value for c in topic.configs}
            error, message = ec.NONE, None
            if topic.name in duplicated:  # Kafka's KafkaApis: none of them is created
                error, message = ec.INVALID_REQUEST, "found multiple entries for this topic"
            elif None in configs.values():
                error, message = ec.INVALID_CONFIG, "null value not supported for topic configs"
            elif len(configs) < len(topic.configs):
                error, message = ec.INVALID_REQUEST, "duplicate config names"
            elif topic.assignments and (topic.num_partitions, topic.replication_factor) != (-1, -1):
                error, message = ec.INVALID_REQUEST, ("a manual replica assignment needs num_partitions and "
                                                      "replication_factor of -1")
            elif topic.replication_factor not in (-1, 1):
                error, message = ec.INVALID_REPLICATION_FACTOR, "a single node keeps one replica"
            else:
                try:
                    if topic.assignments:
                        count = assigned_partitions(((a.partition_index, a.broker_ids) for a in topic.assignments),
                                                    live={self._ctx.node_id})
                    self._ctx.topics.create(topic.name, count, configs, validate_only=True)  # every check first
                    if not body.validate_only:
                        self._ctx.topics.create(topic.name, min(count, OPEN_CHUNK), configs)
                        await self._grow(topic.name, count)
                except LogstoreError as exc:
                    error, message = _error_of(exc), str(exc)
            result = cls.CreatableTopicResult(name=topic.name, error_code=error, error_message=message,
                                              topic_id=self._ctx.topics.topic_id(topic.name))
            if error == ec.NONE:
                result.num_partitions, result.replication_factor = count, 1
                result.configs = [cls.CreatableTopicResult.CreatableTopicConfigs(
                    name=e.name, value=e.value, read_only=False, config_source=e.source, is_sensitive=False)
                    for e in self._describe(topic.name, configs)]
            results.append(result)
        return req.response(throttle_time_ms=0, topics=results)

    async def _grow(self, topic: str, count: int) -> None:
        """Open `topic`'s partitions up to `count`, OPEN_CHUNK at a time, serving other requests
        in between: a partition costs milliseconds of file creation and fsync, so thousands
        opened at once would stall every connection for seconds."""
        topics = self._ctx.topics
        while (current := topics.partition_count(topic)) < count:
            await asyncio.sleep(0)
            topics.add_partitions(topic, min(count, current + OPEN_CHUNK))

    async def delete_topics(self, req: Request) -> Any:
        cls = req.spec.response
        results = []
        duplicated = _duplicated(req.body.topic_names)
        for name in req.body.topic_names:
            error, message = ec.NONE, None
            if name in duplicated:  # Kafka's KafkaApis: none of them is deleted
                results.append(cls.DeletableTopicResult(name=name, error_code=ec.INVALID_REQUEST,
                                                        error_message="duplicate topic name"))
                continue
            try:
                validate_topic(name)
                if self._ctx.topics.is_internal(name):
                    raise InvalidTopicError(f"cannot delete internal topic {name}")
                self._ctx.topics.delete(name)
            except LogstoreError as exc:
                error, message = _error_of(exc), str(exc)
            results.append(cls.DeletableTopicResult(name=name, error_code=error, error_message=message))
        return req.response(throttle_time_ms=0, responses=results)

    async def create_partitions(self, req: Request) -> Any:
        body = req.body
        cls = req.spec.response
        results = []
        for topic in body.topics:
            error, message = ec.NONE, None
            try:
                validate_topic(topic.name)
                self._ctx.topics.add_partitions(topic.name, topic.count, validate_only=True)
                if not body.validate_only:
                    await self._grow(topic.name, topic.count)
            except LogstoreError as exc:
                error, message = _error_of(exc), str(exc)
            results.append(cls.CreatePartitionsTopicResult(name=topic.name, error_code=error,
                                                           error_message=message))
        return req.response(throttle_time_ms=0, results=results)

    # ------------------------------------------------------------------ configs

    def _describe(self, topic: str, overrides: dict[str, str] | None = None) -> list[ConfigEntry]:
        """Every topic-level config of `topic` (with `overrides`, else its stored ones)."""
        stored = self._ctx.topics.overrides(topic) if overrides is None else overrides
        return topic_entries(self._ctx.manager.default_config, stored)

    async def describe_configs(self, req: Request) -> Any:
        body = req.body
        cls = req.spec.response
        result_cls = cls.DescribeConfigsResult.DescribeConfigsResourceResult
        synonym_cls = result_cls.DescribeConfigsSynonym
        with_docs = req.version >= 3 and body.include_documentation
        results = []
        for resource in body.resources:
            error, message, entries = ec.NONE, None, []
            name = resource.resource_name
            if resource.resource_type == TOPIC_RESOURCE:
                if name in self._ctx.topics:
                    entries = self._describe(name)
                else:
                    error, message = ec.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name}"
            elif resource.resource_type == BROKER_RESOURCE:
                if name == str(self._ctx.node_id):
                    entries = broker_entries(self._ctx.config, self._ctx.manager.default_config)
                elif name:  # "" is the cluster-wide dynamic default: none is set
                    error, message = ec.INVALID_REQUEST, f"unexpected broker id {name}, this is {self._ctx.node_id}"
            else:
                error, message = ec.INVALID_REQUEST, f"unsupported resource type {resource.resource_type}"
            keys = resource.configuration_keys
            configs = [result_cls(
                name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                is_default=e.source == SOURCE_DEFAULT, is_sensitive=False, config_type=e.type,
                documentation=e.documentation if with_docs else None,
                synonyms=[synonym_cls(name=s.name, value=s.value, source=s.source) for s in e.synonyms]
                if body.include_synonyms else [])
                for e in entries if keys is None or e.name in keys]
            results.append(cls.DescribeConfigsResult(error_code=error, error_message=message,
                                                     resource_type=resource.resource_type,
                                                     resource_name=name, configs=configs))
        return req.response(throttle_time_ms=0, results=results)

    async def alter_configs(self, req: Request) -> Any:
        """AlterConfigs: each topic's configs become exactly the ones given (the rest revert to
        the broker's defaults), as the API Kafka kept for KafkaJS and older admin clients."""
        def new_overrides(resource: Any) -> dict[str, str]:
            given = {c.name: c.value for c in resource.configs}
            if None in given.values():
                raise InvalidRequestError("null value not supported for configs")
            unknown = sorted(set(given) - _TOPIC_KEY_NAMES)
            if unknown:
                raise InvalidConfigError(f"{', '.join(unknown)}: unknown topic config")
            return given

        return self._alter(req, new_overrides)

    async def incremental_alter_configs(self, req: Request) -> Any:
        def new_overrides(resource: Any) -> dict[str, str]:
            if any(op.config_operation not in OPERATIONS for op in resource.configs):
                raise InvalidRequestError("unknown config operation")
            name = resource.resource_name
            overrides = self._ctx.topics.overrides(name) if name in self._ctx.topics else {}
            for op in resource.configs:
                _apply_op(overrides, op.name, op.config_operation, op.value)
            return overrides

        return self._alter(req, new_overrides)

    def _alter(self, req: Request, new_overrides: Callable[[Any], dict[str, str]]) -> Any:
        """Both AlterConfigs APIs: the checks Kafka's KafkaApis makes on every resource, then each
        topic's stored overrides replaced by `new_overrides(resource)`."""
        body = req.body
        cls = req.spec.response
        responses = []
        duplicated = _duplicated((r.resource_type, r.resource_name) for r in body.resources)
        for resource in body.resources:
            error, message = ec.NONE, None
            try:
                if (resource.resource_type, resource.resource_name) in duplicated:
                    raise InvalidRequestError("duplicate resource")  # Kafka's KafkaApis: none is altered
                if len({c.name for c in resource.configs}) < len(resource.configs):
                    raise InvalidRequestError("duplicate config keys")
                overrides = new_overrides(resource)
                if resource.resource_type != TOPIC_RESOURCE:
                    raise InvalidConfigError(f"only topic configs can be altered, not type {resource.resource_type}")
                self._ctx.topics.alter_config(resource.resource_name, overrides, validate_only=body.validate_only)
            except LogstoreError as exc:
                error, message = _error_of(exc), str(exc)
            responses.append(cls.AlterConfigsResourceResponse(
                error_code=error, error_message=message, resource_type=resource.resource_type,
                resource_name=resource.resource_name))
        return req.response(throttle_time_ms=0, responses=responses)


def _apply_op(overrides: dict[str, str], name: str, op: int, value: str | None) -> None:
    """Apply one IncrementalAlterConfigs operation to `overrides` (InvalidConfigError if bad)."""
    if name not in _TOPIC_KEY_NAMES:
        raise InvalidConfigError(f"{name}: unknown topic config")
    if op == OP_SET:
        overrides[name] = "" if value is None else value
    elif op == OP_DELETE:
        overrides.pop(name, None)
    elif op in (OP_APPEND, OP_SUBTRACT) and name in _LIST_KEYS:
        current = overrides.get(name)
        items = current.split(",") if current else list(LogConfig()[name])
        given = [v for v in (value or "").split(",") if v]
        if op == OP_APPEND:
            items += [v for v in given if v not in items]
        else:
            items = [v for v in items if v not in given]
        overrides[name] = ",".join(items)
    else:
        raise InvalidConfigError(f"{name}: operation {op} is not valid for this config")

"""What a Fetch asks, whatever its version: topics by name (v4-12) or by topic id (v13+, KIP-516,
translated to names here so sessions and reads stay by name), and who asks: ReplicaId (v4-14)
or ReplicaState's replica id and broker epoch (v15+, KIP-903), -1 for a consumer."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, NamedTuple

from logstore.clean_shutdown import NO_BROKER_EPOCH
from logstore.kafka_uuid import ZERO_UUID
from logstore.server import error_codes as ec
from logstore.server.protocol import Request

TOPIC_ID_VERSION, REPLICA_STATE_VERSION = 13, 15


class FetchAsked(NamedTuple):
    """A Fetch's partitions by topic name, its sender, and the topic ids no topic has."""

    replica_id: int
    replica_epoch: int
    wanted: list[tuple[str, int, int, int]]  # topic, partition, fetch offset, max bytes
    epochs: dict[tuple[str, int], tuple[int, int]]  # current leader epoch, last fetched epoch
    forgotten: list[tuple[str, int]]
    unknown: dict[uuid.UUID, list[int]]  # topic id -> partitions asked of it


def read_fetch(req: Request, name_of: Callable[[uuid.UUID], str | None]) -> FetchAsked:
    """The request's fields by topic name; `name_of` maps a topic id to its name (None: unknown)."""
    body = req.body
    by_id = req.version >= TOPIC_ID_VERSION
    if req.version >= REPLICA_STATE_VERSION:
        state = body.replica_state
        replica, epoch = (-1, NO_BROKER_EPOCH) if state is None else (state.replica_id, state.replica_epoch)
    else:
        replica, epoch = body.replica_id, NO_BROKER_EPOCH
    wanted, epochs, unknown = [], {}, {}
    for t in body.topics:
        name = name_of(t.topic_id) if by_id else t.topic
        if name is None:  # a zero id reaches us as None, and is answered as the zero id
            unknown.setdefault(t.topic_id or ZERO_UUID, []).extend(p.partition for p in t.partitions)
            continue
        for p in t.partitions:
            wanted.append((name, p.partition, p.fetch_offset, p.partition_max_bytes))
            epochs[(name, p.partition)] = (getattr(p, "current_leader_epoch", -1), getattr(p, "last_fetched_epoch", -1))
    forgotten = []
    for t in body.forgotten_topics_data:
        name = name_of(t.topic_id) if by_id else t.topic
        if name is not None:
            forgotten += [(name, p) for p in t.partitions]
    return FetchAsked(replica, epoch, wanted, epochs, forgotten, unknown)


def by_topic_id(req: Request, topics: list, unknown: dict[uuid.UUID, list[int]],
                topic_id: Callable[[str], uuid.UUID]) -> list:
    """The response's topics as v13+ names them (by id), with UNKNOWN_TOPIC_ID for unknown ids."""
    if req.version < TOPIC_ID_VERSION:
        return topics
    cls = req.spec.response.FetchableTopicResponse
    for topic in topics:
        topic.topic_id = topic_id(topic.topic)
    for missing, partitions in unknown.items():
        topics.append(cls(topic="", topic_id=missing, partitions=[
            error_entry(req.spec.response, partition, ec.UNKNOWN_TOPIC_ID) for partition in partitions]))
    return topics


def error_entry(cls: Any, partition: int, error: int) -> Any:
    """A partition's answer carrying only `error` (offsets unknown, no records)."""
    return cls.FetchableTopicResponse.PartitionData(
        partition_index=partition, error_code=error, high_watermark=-1, last_stable_offset=-1, log_start_offset=-1,
        aborted_transactions=None, preferred_read_replica=-1, records=b"")

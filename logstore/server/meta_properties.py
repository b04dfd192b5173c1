"""The node's identity at start-up: the data directory's `meta.properties` (its format lives in
logstore.meta_properties), read and checked against the configured node id, or created."""

from __future__ import annotations

from pathlib import Path

from logstore.errors import CorruptMetadataFileError, InvalidConfigError
from logstore.kafka_uuid import random_uuid
from logstore.meta_properties import (
    KRAFT_VERSION,
    META_PROPERTIES,
    MetaProperties,
    read_meta_properties,
    write_meta_properties,
)


def load_or_create(data_dir: Path, node_id: int, cluster_id: str | None = None) -> MetaProperties:
    """Read `meta.properties`, or write a new one with `cluster_id` (as `kafka-storage format
    --cluster-id` does; a fresh one when None).

    Raises InvalidConfigError if the file names another node id than `node_id` or another
    cluster id than a given `cluster_id` (Kafka refuses to start on another node's or cluster's
    directory), is not a KRaft (version 1) file or does not parse.
    """
    path = data_dir / META_PROPERTIES
    try:
        meta = read_meta_properties(data_dir)
    except CorruptMetadataFileError as exc:
        raise InvalidConfigError(str(exc)) from None
    if meta is None:
        meta = MetaProperties(KRAFT_VERSION, node_id, cluster_id or random_uuid(), random_uuid())
        write_meta_properties(data_dir, meta)
        return meta
    if meta.version != KRAFT_VERSION:
        raise InvalidConfigError(f"{path}: version {meta.version}, not a KRaft node's (version 1)")
    if meta.node_id != node_id:
        raise InvalidConfigError(
            f"{path}: the stored node.id {meta.node_id} does not match the configured node.id {node_id}")
    if cluster_id is not None and meta.cluster_id != cluster_id:
        raise InvalidConfigError(f"{path}: the stored cluster.id {meta.cluster_id} does not match the cluster's "
                                 f"{cluster_id}")
    return meta._replace(directory_id=meta.directory_id or random_uuid())

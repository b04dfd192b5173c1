"""`meta.properties`: the node id and cluster id of a data directory, kept as Kafka's KRaft
brokers keep them (version 1, `cluster.id`, `node.id`, `directory.id`)."""

from __future__ import annotations

import base64
import time
import uuid
from pathlib import Path
from typing import NamedTuple

from logstore.checkpoint import atomic_write
from logstore.config import parse_properties
from logstore.errors import InvalidConfigError

META_PROPERTIES = "meta.properties"


def random_uuid() -> str:
    """A Kafka Uuid string: 16 random bytes, URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class MetaProperties(NamedTuple):
    """The identity of a data directory."""

    cluster_id: str
    node_id: int
    directory_id: str


def load_or_create(data_dir: Path, node_id: int) -> MetaProperties:
    """Read `meta.properties`, or write a new one with a fresh cluster id.

    Raises InvalidConfigError if the file names another node id than `node_id` (Kafka refuses
    to start on another node's directory) or lacks the keys.
    """
    path = data_dir / META_PROPERTIES
    if path.exists():
        props = parse_properties(path.read_text(encoding="utf-8"))
        try:
            meta = MetaProperties(props["cluster.id"], int(props["node.id"]),
                                  props.get("directory.id", random_uuid()))
        except (KeyError, ValueError) as exc:
            raise InvalidConfigError(f"{path}: missing or bad key {exc}") from None
        if meta.node_id != node_id:
            raise InvalidConfigError(
                f"{path}: the stored node.id {meta.node_id} does not match the configured node.id {node_id}")
        return meta
    meta = MetaProperties(random_uuid(), node_id, random_uuid())
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
    text = (f"#\n#{stamp}\nnode.id={meta.node_id}\ndirectory.id={meta.directory_id}\n"
            f"version=1\ncluster.id={meta.cluster_id}\n")
    atomic_write(path, text.encode())
    return meta

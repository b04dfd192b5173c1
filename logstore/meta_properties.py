"""`meta.properties`: the identity of a data directory, as Kafka's MetaProperties keeps it
(docs/FORMAT.md "meta.properties"). Version 0 (ZooKeeper brokers) holds `broker.id`; version 1
(KRaft) holds `node.id`, `cluster.id` and usually `directory.id`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import NamedTuple

from logstore.checkpoint import atomic_write
from logstore.config import parse_properties
from logstore.errors import CorruptMetadataFileError

META_PROPERTIES = "meta.properties"
#: The keys each version requires; the first is the node's number.
REQUIRED_KEYS = {"0": ("broker.id",), "1": ("node.id", "cluster.id")}
KRAFT_VERSION = 1


class MetaProperties(NamedTuple):
    """The identity of a data directory (cluster_id and directory_id are None where the file
    does not hold them)."""

    version: int
    node_id: int
    cluster_id: str | None
    directory_id: str | None


def parse_meta_properties(data: bytes, path: object = None) -> MetaProperties:
    """The identity in `meta.properties` bytes; raises CorruptMetadataFileError for an unknown
    version, a missing required key or a node id that is not a number."""
    props = parse_properties(data.decode("utf-8", errors="replace"))
    version = props.get("version")
    required = REQUIRED_KEYS.get(version or "")
    if required is None:
        raise CorruptMetadataFileError(f"version {version!r} is not 0 or 1", path=path)
    missing = [key for key in required if not props.get(key)]
    if missing:
        raise CorruptMetadataFileError(f"version {version} without {', '.join(missing)}", path=path)
    node = props[required[0]]
    if not node.lstrip("-").isdigit():
        raise CorruptMetadataFileError(f"{required[0]} {node!r} is not a number", path=path)
    return MetaProperties(int(version), int(node), props.get("cluster.id") or None,
                          props.get("directory.id") or None)


def read_meta_properties(data_dir: Path) -> MetaProperties | None:
    """The identity stored in `data_dir`, or None when it has no `meta.properties`; raises
    CorruptMetadataFileError for one that does not parse."""
    path = data_dir / META_PROPERTIES
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return parse_meta_properties(data, path)


def write_meta_properties(data_dir: Path, meta: MetaProperties) -> None:
    """Store `meta` (version 1) in `data_dir` as Kafka writes it: a dated comment, then the keys;
    crash-safely (atomic_write)."""
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
    text = (f"#\n#{stamp}\nnode.id={meta.node_id}\ndirectory.id={meta.directory_id}\n"
            f"version={KRAFT_VERSION}\ncluster.id={meta.cluster_id}\n")
    atomic_write(data_dir / META_PROPERTIES, text.encode())

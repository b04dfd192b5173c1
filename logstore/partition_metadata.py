"""`partition.metadata`: the topic id of a partition directory, as Kafka's PartitionMetadataFile
writes it (docs/FORMAT.md "partition.metadata"): the lines `version: 0` and `topic_id: <uuid>`."""

from __future__ import annotations

import uuid
from pathlib import Path

from logstore.checkpoint import atomic_write
from logstore.errors import CorruptMetadataFileError
from logstore.kafka_uuid import kafka_uuid, parse_kafka_uuid

PARTITION_METADATA = "partition.metadata"
VERSION = "0"
SEPARATOR = ": "


def parse_partition_metadata(data: bytes, path: object = None) -> uuid.UUID:
    """The topic id in `partition.metadata` bytes; raises CorruptMetadataFileError (naming the
    line) for another version or a topic id that is not a Kafka Uuid."""
    lines = data.decode("utf-8", errors="replace").splitlines()
    fields = {}
    line_of = {}
    for number, line in enumerate(lines, 1):
        key, _, value = line.partition(SEPARATOR)
        fields[key], line_of[key] = value, number
    if fields.get("version") != VERSION:
        raise CorruptMetadataFileError(f"version {fields.get('version')!r} is not {VERSION}", path=path,
                                       line=line_of.get("version"))
    topic_id = fields.get("topic_id", "")
    try:
        return parse_kafka_uuid(topic_id)
    except ValueError:
        raise CorruptMetadataFileError(f"topic_id {topic_id!r} is not a base64 topic id", path=path,
                                       line=line_of.get("topic_id")) from None


def read_partition_metadata(directory: Path) -> uuid.UUID | None:
    """The topic id stored in `directory`, or None when it has no `partition.metadata`; raises
    CorruptMetadataFileError for one that does not parse, OSError for one that cannot be read."""
    path = directory / PARTITION_METADATA
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return parse_partition_metadata(data, path)


def write_partition_metadata(directory: Path, topic_id: uuid.UUID) -> None:
    """Store `topic_id` in `directory`, crash-safely (atomic_write)."""
    text = f"version{SEPARATOR}{VERSION}\ntopic_id{SEPARATOR}{kafka_uuid(topic_id)}\n"
    atomic_write(directory / PARTITION_METADATA, text.encode())

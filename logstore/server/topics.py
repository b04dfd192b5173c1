"""The topics of the node: partition counts, topic ids (Kafka's `partition.metadata` file in
each partition directory) and configs, over a LogManager. Internal topics are created here
with the configs Kafka gives them (compacted).

A restarted node learns its partitions without opening their logs (they open on first use) and
writes the `partition.metadata` files it finds missing on a background thread, as Kafka flushes
them after the log is created: 10,000 crash-safe writes took up to 40 s of a first start.

Partitions cost no file descriptor while unused: the segments' descriptors come from the
process's pool (logstore.descriptor_pool), which the node sizes to half its descriptor limit
(`reserve_descriptors`), so connections keep the other half however many partitions it holds."""

from __future__ import annotations

import os
import resource
import threading
import uuid
from collections.abc import Collection, Mapping
from pathlib import Path

from logstore.config import LogConfig
from logstore.descriptor_pool import capacity_for, process_pool
from logstore.errors import CorruptMetadataFileError, LogstoreError
from logstore.internal_topics.coordinator_schemas import OFFSETS_TOPIC, TRANSACTION_TOPIC
from logstore.log import Log
from logstore.log_files import partition_dir_name
from logstore.manager import LogManager, refuse_reserved
from logstore.partition_metadata import (
    PARTITION_METADATA,
    read_partition_metadata,
    write_partition_metadata,
)
from logstore.topic_configs import INTERNAL_TOPIC_CONFIGS, stored_topic_configs

INTERNAL_TOPICS = (OFFSETS_TOPIC, TRANSACTION_TOPIC)
MAX_PARTITIONS = 10_000  # per topic; bounds what one CreateTopics or CreatePartitions may open
# The share of the descriptor limit the segments of the node's partitions may hold (the rest is
# for connections, checkpoints and the interpreter: a node out of descriptors accepts no connection).
SEGMENT_SHARE = 2


class TopicExistsError(LogstoreError):
    """CreateTopics for a topic that exists."""


class UnknownTopicError(LogstoreError):
    """A topic or partition the node does not have."""


class InvalidPartitionsError(LogstoreError):
    """A partition count out of range or not above the current one."""


def segment_descriptor_budget() -> int:
    """How many descriptors the node's segments may hold at once: half the process's limit."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return capacity_for(soft) if soft == resource.RLIM_INFINITY else max(soft // SEGMENT_SHARE, 1)


def reserve_descriptors() -> None:
    """Size the process's descriptor pool to the node's segment budget."""
    process_pool().resize(segment_descriptor_budget())


def _stored_topic_id(directory: Path) -> uuid.UUID | None:
    """The partition's stored topic id; None when absent or unreadable (a fresh one is chosen)."""
    try:
        return read_partition_metadata(directory)
    except (OSError, CorruptMetadataFileError):
        return None


class Topics:
    """Topic -> (topic id, partition count, config overrides), kept beside the manager's logs."""

    def __init__(self, manager: LogManager, *, hosts_all: bool = True):
        """`hosts_all=False` on a cluster's broker, which holds only the partitions placed on it:
        a partition missing on disk is not created (the cluster's metadata says what lives here)."""
        self._manager = manager
        self._partitions: dict[str, int] = {}
        self._ids: dict[str, uuid.UUID] = {}
        # Held around every write of partition.metadata and every topic deletion, so the
        # background writer never writes a stale id into a partition created anew.
        self._lock = threading.Lock()
        self._stop = threading.Event()
        found = manager.partitions()  # no log opens here: they open on first use
        first: dict[str, int] = {}  # each topic's first partition on disk
        for topic, partition in found:
            self._partitions[topic] = max(self._partitions.get(topic, 0), partition + 1)
            first.setdefault(topic, partition)
            if topic not in self._ids:
                topic_id = _stored_topic_id(self._dir_of(topic, partition))
                if topic_id is not None:
                    self._ids[topic] = topic_id
        present = set(found)
        for topic, count in self._partitions.items():
            if topic not in self._ids:
                # Stored in one partition before serving, so a crash before the background
                # writes cannot give the topic another id at the next start.
                self._ids[topic] = uuid.uuid4()
                write_partition_metadata(self._dir_of(topic, first[topic]), self._ids[topic])
            gaps = [p for p in range(count) if (topic, p) not in present] if hosts_all else []
            overrides = self.overrides(topic) if gaps else {}
            for partition in gaps:
                log = manager.get_or_create(topic, partition, overrides or None)
                write_partition_metadata(log.dir, self._ids[topic])
        self._writer = threading.Thread(target=self._write_missing_ids, args=(found,), daemon=True,
                                        name="logstore-partition-metadata")
        self._writer.start()

    def _write_missing_ids(self, partitions: list[tuple[str, int]]) -> None:
        """Write the topic id into each of `partitions` lacking its partition.metadata, until
        `close()`; a partition deleted meanwhile is skipped."""
        for topic, partition in partitions:
            if self._stop.is_set():
                return
            directory = self._dir_of(topic, partition)
            with self._lock:
                topic_id = self._ids.get(topic)
                if topic_id is None or os.path.exists(os.path.join(directory, PARTITION_METADATA)):
                    continue
                try:
                    write_partition_metadata(directory, topic_id)
                except FileNotFoundError:
                    continue  # its topic was deleted

    def close(self) -> None:
        """Stop writing missing partition.metadata files (a restart writes the rest)."""
        self._stop.set()
        self._writer.join()

    def _dir_of(self, topic: str, partition: int) -> Path:
        return self._manager.data_dir / partition_dir_name(topic, partition)

    def names(self) -> list[str]:
        """Every topic, sorted."""
        return sorted(self._partitions)

    def __contains__(self, topic: object) -> bool:
        return topic in self._partitions

    def partition_count(self, topic: str) -> int:
        """Partitions of `topic` (UnknownTopicError if it does not exist)."""
        try:
            return self._partitions[topic]
        except KeyError:
            raise UnknownTopicError(f"unknown topic {topic!r}") from None

    def topic_id(self, topic: str) -> uuid.UUID:
        """The topic's id (the zero uuid for an unknown topic)."""
        return self._ids.get(topic, uuid.UUID(int=0))

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with id `topic_id`, None when no topic has it."""
        return next((name for name, known in self._ids.items() if known == topic_id), None)

    def is_internal(self, topic: str) -> bool:
        """Whether `topic` is one of Kafka's internal topics."""
        return topic in INTERNAL_TOPICS

    def log(self, topic: str, partition: int) -> Log | None:
        """The log of a partition that exists, else None."""
        if not 0 <= partition < self._partitions.get(topic, 0):
            return None
        return self._manager.get(topic, partition)

    def overrides(self, topic: str) -> dict[str, str]:
        """The topic's config overrides (internal topics: Kafka's fixed ones, then stored ones)."""
        stored = stored_topic_configs(self._manager.data_dir, topic) or {}
        return {**INTERNAL_TOPIC_CONFIGS.get(topic, {}), **stored}

    def config(self, topic: str) -> LogConfig:
        """The effective config of `topic`."""
        return self._manager.default_config.with_overrides(self.overrides(topic))

    def create(self, topic: str, partitions: int, configs: Mapping[str, str] | None = None,
               *, validate_only: bool = False) -> None:
        """Create `topic` with `partitions` partitions and config overrides.

        Raises InvalidTopicError (ReservedTopicError for KRaft's metadata log), TopicExistsError,
        InvalidPartitionsError or InvalidConfigError.
        """
        refuse_reserved(topic)
        if topic in self._partitions:
            raise TopicExistsError(f"topic {topic!r} already exists")
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise InvalidPartitionsError(f"number of partitions must be in [1, {MAX_PARTITIONS}], got {partitions}")
        overrides = {**INTERNAL_TOPIC_CONFIGS.get(topic, {}), **dict(configs or {})}
        self._manager.default_config.with_overrides(overrides)  # InvalidConfigError before any file
        if validate_only:
            return
        self._ids[topic] = uuid.uuid4()
        self._open_partitions(topic, 0, partitions, overrides)

    def _open_partitions(self, topic: str, start: int, end: int,
                         overrides: Mapping[str, str] | None = None) -> None:
        """Open partitions [start, end); the manager stores the topic's configs with the first."""
        overrides = self.overrides(topic) if overrides is None else overrides
        for partition in range(start, end):
            log = self._manager.get_or_create(topic, partition, overrides)
            with self._lock:
                write_partition_metadata(log.dir, self._ids[topic])
            self._partitions[topic] = partition + 1

    def adopt(self, topic: str, topic_id: uuid.UUID, hosted: Collection[int], count: int,
              configs: Mapping[str, str]) -> None:
        """Take on what a cluster's metadata places on this node: `topic` (id `topic_id`) has
        `count` partitions, of which `hosted` are opened here; the others have no log here."""
        self._ids[topic] = topic_id
        overrides = {**INTERNAL_TOPIC_CONFIGS.get(topic, {}), **configs}
        for partition in hosted:
            if self._manager.get(topic, partition) is None:
                log = self._manager.get_or_create(topic, partition, overrides)
                with self._lock:
                    write_partition_metadata(log.dir, topic_id)
        self._partitions[topic] = max(self._partitions.get(topic, 0), count)

    def add_partitions(self, topic: str, count: int, *, validate_only: bool = False) -> None:
        """Grow `topic` to `count` partitions (InvalidPartitionsError unless it grows)."""
        current = self.partition_count(topic)
        if not current < count <= MAX_PARTITIONS:
            raise InvalidPartitionsError(
                f"topic {topic!r} has {current} partitions; the new count must be above it and at most "
                f"{MAX_PARTITIONS}, got {count}")
        if not validate_only:
            self._open_partitions(topic, current, count)

    def delete(self, topic: str) -> None:
        """Delete every partition of `topic` (renamed `-delete`, removed later by the manager)."""
        self.partition_count(topic)
        with self._lock:
            self._manager.delete_topic(topic)  # drops the stored configs too
            del self._partitions[topic]
            self._ids.pop(topic, None)

    def alter_config(self, topic: str, overrides: Mapping[str, str], *, validate_only: bool = False) -> None:
        """Replace the stored overrides of `topic` and apply them to its open logs
        (InvalidConfigError, before anything changes, for a bad key or value)."""
        self.partition_count(topic)
        overrides = {**INTERNAL_TOPIC_CONFIGS.get(topic, {}), **overrides}
        self._manager.default_config.with_overrides(overrides)  # InvalidConfigError first
        if not validate_only:
            self._manager.set_topic_config(topic, overrides)

    def coordinator_partition_count(self, topic: str, configured: int) -> int:
        """Partitions of a coordinator topic: as found on disk, else `configured` (as Kafka,
        `offsets.topic.num.partitions` and its twin size the topic only when it is created,
        since every group or transactional id is stored by a hash modulo this count)."""
        return self._partitions.get(topic, configured)

    def ensure_internal(self, topic: str, partitions: int) -> None:
        """Create an internal topic on first use."""
        if topic not in self._partitions:
            self._ids[topic] = uuid.uuid4()
            self._open_partitions(topic, 0, partitions, INTERNAL_TOPIC_CONFIGS.get(topic, {}))


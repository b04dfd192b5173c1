"""Names of the files and directories of a Kafka log (Kafka's LogFileUtils): segment-file
suffixes, the 20-digit base-offset prefix, and `<topic>-<partition>` directory names.

Every module that builds or parses such a name uses this one; docs/FORMAT.md "Segment files".
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from logstore.errors import InvalidTopicError
from logstore.records.header import INT32_MAX

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
# Suffixes appended after one of the above while a file changes state.
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
# Every live file named by an offset: a segment's files and the producer snapshots.
OFFSET_FILE_SUFFIXES = (LOG_SUFFIX, *INDEX_SUFFIXES, SNAPSHOT_SUFFIX)
OFFSET_DIGITS = 20
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
# KRaft metadata snapshots in __cluster_metadata-0: `<end offset>-<epoch>.checkpoint`.
CHECKPOINT_SUFFIX = ".checkpoint"
BOOTSTRAP_SNAPSHOT = "bootstrap.checkpoint"
EPOCH_DIGITS = 10
# Partition directories that are not live logs: being deleted, a future replica, a stray.
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"

MAX_TOPIC_LENGTH = 249
MAX_DIR_NAME_LENGTH = 255  # what file systems allow one path component
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
_KRAFT_SNAPSHOT_NAME = re.compile(rf"^([0-9]{{{OFFSET_DIGITS}}})-([0-9]{{{EPOCH_DIGITS}}})\{CHECKPOINT_SUFFIX}$")
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")


def segment_file_name(base_offset: int, suffix: str, file_suffix: str = "") -> str:
    """`00000000000000000105.log` style name: base offset as 20 digits, then the suffixes."""
    return f"{base_offset:0{OFFSET_DIGITS}d}{suffix}{file_suffix}"


def offset_prefix(name: str) -> int | None:
    """The offset in a file name's digits before its first dot, however many (Kafka's
    offsetFromFileName, as its tools and snapshot listing read names), or None."""
    digits = name.split(".", 1)[0]
    if not (digits.isascii() and digits.isdigit()):
        return None  # isdigit alone passes digits int() cannot read, such as "²"
    return int(digits)


def offset_from_file_name(name: str) -> int | None:
    """The base offset a segment-style file name starts with, or None if it has no 20-digit prefix."""
    digits = name[:OFFSET_DIGITS]  # slices, not a split: an open parses thousands of names
    if name[OFFSET_DIGITS : OFFSET_DIGITS + 1] not in ("", ".") or len(digits) != OFFSET_DIGITS:
        return None
    return int(digits) if digits.isascii() and digits.isdigit() else None


def parse_offset_file_name(name: str) -> tuple[int, str] | None:
    """(offset, suffix) of a live file named by an offset (`00000000000000000105.index` ->
    (105, ".index"), suffix one of OFFSET_FILE_SUFFIXES), else None."""
    offset = offset_from_file_name(name)
    suffix = name[OFFSET_DIGITS:]
    return (offset, suffix) if offset is not None and suffix in OFFSET_FILE_SUFFIXES else None


def sibling_file_name(name: str, suffix: str) -> str:
    """The name of the same segment's file with `suffix`: `name` up to its first dot, then `suffix`."""
    return name.split(".", 1)[0] + suffix


def segment_log_offset(name: str) -> int | None:
    """The base offset of a live segment's `.log` name (exactly 20 digits then `.log`), else None."""
    parsed = parse_offset_file_name(name)
    return parsed[0] if parsed is not None and parsed[1] == LOG_SUFFIX else None


def is_segment_log_name(name: str) -> bool:
    """True for a live segment's `.log` name: exactly 20 digits then `.log`."""
    return segment_log_offset(name) is not None


def segment_log_offsets(names: Iterable[str]) -> list[int]:
    """The base offsets of the live segments among the file `names` (their `.log` files), ascending."""
    offsets = (segment_log_offset(name) for name in names)
    return sorted(offset for offset in offsets if offset is not None)


def validate_topic(topic: str) -> None:
    """Raise InvalidTopicError unless `topic` is a name Kafka accepts (so it cannot escape a directory)."""
    if not isinstance(topic, str) or not topic:
        raise InvalidTopicError(f"topic name must be a non-empty string, got {topic!r}")
    if topic in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {topic!r}")
    if len(topic) > MAX_TOPIC_LENGTH:
        raise InvalidTopicError(f"topic name is longer than {MAX_TOPIC_LENGTH} characters: {topic!r}")
    if not _LEGAL_TOPIC.match(topic):
        raise InvalidTopicError(
            f"topic name {topic!r} is illegal: only ASCII letters, digits, '.', '_' and '-' are allowed"
        )


def partition_dir_name(topic: str, partition: int) -> str:
    """The directory name of a partition: `<topic>-<partition>`."""
    return f"{topic}-{partition}"


def delete_dir_name(topic: str, partition: int, unique_id: str) -> str:
    """The name a deleted partition's directory is renamed to, `<topic>-<partition>.<id>-delete`,
    with the topic cut short so the name fits in MAX_DIR_NAME_LENGTH (Kafka's
    LocalLog.logDeleteDirName: a 249-character topic would otherwise fail the rename)."""
    suffix = f".{unique_id}{DELETE_DIR_SUFFIX}"
    prefix = max(0, min(len(topic), MAX_DIR_NAME_LENGTH - len(suffix) - 1 - len(str(partition))))
    return f"{topic[:prefix]}-{partition}{suffix}"


def parse_partition_dir(name: str) -> tuple[str, int]:
    """Split a `<topic>-<partition>` directory name; InvalidTopicError if it is not one."""
    match = _PARTITION_DIR.match(name)
    if match is None:
        raise InvalidTopicError(f"{name!r} is not a partition directory name (<topic>-<partition>)")
    topic = match.group("topic")
    validate_topic(topic)
    partition = int(match.group("partition"))
    if partition > INT32_MAX:  # partition ids are int32
        raise InvalidTopicError(f"{name!r}: partition {partition} is larger than {INT32_MAX}")
    return topic, partition


def is_partition_dir_name(name: str) -> bool:
    """True when `parse_partition_dir` accepts `name` (Kafka's `-delete`/`-future`/`-stray` names fail)."""
    try:
        parse_partition_dir(name)
    except InvalidTopicError:
        return False
    return True


def parse_kraft_snapshot_name(filename: str) -> tuple[int, int] | None:
    """(end offset, epoch) of a KRaft snapshot file name "<20 digits>-<10 digits>.checkpoint", or
    None for any other name (bootstrap.checkpoint among them)."""
    match = _KRAFT_SNAPSHOT_NAME.match(filename)
    return (int(match.group(1)), int(match.group(2))) if match else None


def kraft_snapshot_file_name(end_offset: int, epoch: int) -> str:
    """The file name Kafka gives the KRaft snapshot that ends before ``end_offset`` at ``epoch``."""
    return f"{end_offset:0{OFFSET_DIGITS}d}-{epoch:0{EPOCH_DIGITS}d}{CHECKPOINT_SUFFIX}"

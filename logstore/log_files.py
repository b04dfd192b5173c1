"""Names of the files and directories of a Kafka log (Kafka's LogFileUtils): segment-file
suffixes, the 20-digit base-offset prefix, and `<topic>-<partition>` directory names.

Every module that builds or parses such a name uses this one; FORMAT.md "Segment files".
"""

from __future__ import annotations

import re

from logstore.errors import InvalidTopicError

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
OFFSET_DIGITS = 20
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"

MAX_TOPIC_LENGTH = 249
INT32_MAX = 2**31 - 1  # partition ids are int32
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")


def segment_file_name(base_offset: int, suffix: str, file_suffix: str = "") -> str:
    """`00000000000000000105.log` style name: base offset as 20 digits, then the suffixes."""
    return f"{base_offset:0{OFFSET_DIGITS}d}{suffix}{file_suffix}"


def offset_from_file_name(name: str) -> int | None:
    """The base offset a segment-style file name starts with, or None if it has no 20-digit prefix."""
    digits = name.split(".", 1)[0]
    return int(digits) if len(digits) == OFFSET_DIGITS and digits.isdigit() else None


def is_segment_log_name(name: str) -> bool:
    """True for a live segment's `.log` name: exactly 20 digits then `.log`."""
    base = offset_from_file_name(name)
    return base is not None and name == segment_file_name(base, LOG_SUFFIX)


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


def parse_partition_dir(name: str) -> tuple[str, int]:
    """Split a `<topic>-<partition>` directory name; InvalidTopicError if it is not one."""
    match = _PARTITION_DIR.match(name)
    if match is None:
        raise InvalidTopicError(f"{name!r} is not a partition directory name (<topic>-<partition>)")
    topic = match.group("topic")
    validate_topic(topic)
    partition = int(match.group("partition"))
    if partition > INT32_MAX:
        raise InvalidTopicError(f"{name!r}: partition {partition} is larger than {INT32_MAX}")
    return topic, partition

"""Topic configs kept on disk, so a reopened data directory runs each topic's own policies.

Kafka keeps topic configs in its metadata, outside the log directory; logstore keeps them in
one JSON file in the data directory root, `logstore-topic-configs.json`:

    {"version": 1, "topics": {"orders": {"cleanup.policy": "compact"}, "clicks": {}}}

Each topic maps to its overrides (Kafka names, string values); `{}` means "Kafka's defaults,
chosen on purpose". A topic absent from the file has no known configs: retention and cleaning
refuse to act on it (UnknownTopicConfigError) until configs are given. Kafka's broker reads only
directories in a log directory root, so it ignores this file. Every write replaces the file
crash-safely (temp file, fsync, rename, directory fsync): a crash leaves the old or the new file.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from logstore.checkpoint import atomic_write
from logstore.config import CONFIG_KEYS, LogConfig
from logstore.errors import InvalidConfigError
from logstore.internal_topics.coordinator_schemas import OFFSETS_TOPIC, TRANSACTION_TOPIC
from logstore.log_files import LOG_SUFFIX, parse_partition_dir

TOPIC_CONFIGS_FILE = "logstore-topic-configs.json"
TOPIC_CONFIGS_VERSION = 1

# Where a Log's config came from (Log.config_origin); None: nothing stored or given.
ORIGIN_GIVEN = "given"  # passed by the caller
ORIGIN_STORED = "stored"  # read from the data directory's topic configs file
ORIGIN_NEW = "new"  # Kafka's defaults for a log created empty without configs

# The configs Kafka's coordinators create their internal topics with (GroupCoordinator,
# TransactionStateManager): what a broker's copy of them runs with when nothing else is known.
INTERNAL_TOPIC_CONFIGS = {
    OFFSETS_TOPIC: {"cleanup.policy": "compact", "compression.type": "producer",
                    "segment.bytes": "104857600"},
    TRANSACTION_TOPIC: {"cleanup.policy": "compact", "min.insync.replicas": "1",
                        "segment.bytes": "104857600"},
}

_NAMES = frozenset(k.name for k in CONFIG_KEYS)
# Longest names first, so `x.log.cleaner.threads` splits as topic `x`, not `x.log`.
_NAMES_BY_LENGTH = sorted(_NAMES, key=len, reverse=True)
_write_lock = threading.Lock()  # one read-modify-write of the file at a time in this process


def topic_configs_path(data_dir: str | os.PathLike[str]) -> Path:
    """The topic configs file of a data directory."""
    return Path(data_dir) / TOPIC_CONFIGS_FILE


def read_topic_configs(data_dir: str | os.PathLike[str]) -> dict[str, dict[str, str]]:
    """Every topic's stored overrides (empty when the file is missing); InvalidConfigError
    naming the file when it does not parse or holds invalid configs."""
    path = topic_configs_path(data_dir)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError as exc:
        raise InvalidConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidConfigError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(document, dict) or document.get("version") != TOPIC_CONFIGS_VERSION:
        raise InvalidConfigError(f"{path}: expected an object with version {TOPIC_CONFIGS_VERSION}")
    topics = document.get("topics")
    if not isinstance(topics, dict) or not all(
            isinstance(v, dict) and all(isinstance(x, str) for x in v.values()) for v in topics.values()):
        raise InvalidConfigError(f"{path}: 'topics' must map each topic to an object of string values")
    for topic, values in topics.items():
        try:
            LogConfig(values)
        except InvalidConfigError as exc:
            raise InvalidConfigError(f"{path}: topic {topic!r}: {exc}") from None
    return topics


def stored_topic_configs(data_dir: str | os.PathLike[str], topic: str) -> dict[str, str] | None:
    """The overrides stored for `topic` in `data_dir` ({} = Kafka's defaults), or None when
    nothing is stored for it."""
    return read_topic_configs(data_dir).get(topic)


def config_values(config: LogConfig | Mapping[str, Any]) -> dict[str, str]:
    """The overrides of `config` as Kafka-style strings (validated); for a LogConfig, only the
    keys set explicitly."""
    parsed = config if isinstance(config, LogConfig) else LogConfig(config)
    values = {}
    for name in sorted(parsed.overrides):
        value = parsed[name]
        if isinstance(value, list):
            value = ",".join(value)
        elif isinstance(value, bool):
            value = str(value).lower()
        values[name] = str(value)
    return values


def store_topic_configs(data_dir: str | os.PathLike[str], topic: str,
                        config: LogConfig | Mapping[str, Any] | None) -> None:
    """Record `topic`'s overrides (None removes the topic) in `data_dir`, crash-safely.
    Unchanged contents are not rewritten."""
    with _write_lock:
        topics = read_topic_configs(data_dir)
        if config is None:
            if topics.pop(topic, None) is None:
                return
        else:
            values = config_values(config)
            if topics.get(topic) == values:
                return
            topics[topic] = values
        document = {"version": TOPIC_CONFIGS_VERSION, "topics": dict(sorted(topics.items()))}
        text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
        atomic_write(topic_configs_path(data_dir), text.encode("utf-8"))


def has_data(directory: str | os.PathLike[str]) -> bool:
    """True when the partition directory holds a non-empty segment file (live, or in a swap)."""
    try:
        entries = os.scandir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return False
    with entries:  # stops at the first: a log may hold thousands of files
        return any(LOG_SUFFIX in entry.name and entry.is_file() and entry.stat().st_size > 0 for entry in entries)


def resolve_log_config(directory: str | os.PathLike[str],
                       config: LogConfig | Mapping[str, Any] | None) -> tuple[LogConfig, str | None]:
    """The config a Log opened at `directory` runs with, and where it came from: `config` when
    given, else its topic's configs stored in the parent directory, else Kafka's defaults
    (origin ORIGIN_NEW for a directory without data, None - unknown - for one with data)."""
    if config is not None:
        return LogConfig.coerce(config), ORIGIN_GIVEN
    directory = Path(directory)
    topic, _ = parse_partition_dir(directory.name)
    stored = stored_topic_configs(directory.parent, topic)
    if stored is not None:
        return LogConfig(stored), ORIGIN_STORED
    return LogConfig(), None if has_data(directory) else ORIGIN_NEW


def split_topic_key(key: str) -> tuple[str | None, str]:
    """`retention.ms` -> (None, 'retention.ms'); `orders.retention.ms` -> ('orders', 'retention.ms').
    A key that is neither is returned as (None, key), for LogConfig to refuse by name."""
    if key in _NAMES:
        return None, key
    for name in _NAMES_BY_LENGTH:
        if key.endswith("." + name) and len(key) > len(name) + 1:
            return key[: -len(name) - 1], name
    return None, key

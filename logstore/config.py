"""LogConfig: Kafka's topic-level log configs (and the broker-level ones the engine uses).

Names, types, defaults and ranges follow Apache Kafka 4.0 (`TopicConfig`, `LogConfig`,
`ServerLogConfigs`, `CleanerConfig`). Deviation: `segment.bytes` accepts values down to 14 bytes
(Kafka 3.x's bound) instead of 4.0's 1 MiB, so small-segment tests and Kafka's own samples fit.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

from logstore.errors import InvalidConfigError
from logstore.records.compression import Codec, codec_by_name

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
DOUBLE_MAX = 1.7976931348623157e308

CLEANUP_POLICY_DELETE = "delete"
CLEANUP_POLICY_COMPACT = "compact"
TIMESTAMP_TYPE_CREATE = "CreateTime"
TIMESTAMP_TYPE_LOG_APPEND = "LogAppendTime"
COMPRESSION_TYPE_PRODUCER = "producer"
COMPRESSION_TYPE_UNCOMPRESSED = "uncompressed"
COMPRESSION_TYPES = (COMPRESSION_TYPE_UNCOMPRESSED, "zstd", "lz4", "snappy", "gzip",
                     COMPRESSION_TYPE_PRODUCER)


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One config: its Kafka name, type, default and valid range or choices."""

    name: str
    type: str  # int, long, double, boolean, string, list
    default: Any
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] | None = None
    doc: str = ""

    @property
    def attr(self) -> str:
        """The snake_case attribute name (`segment.bytes` -> `segment_bytes`)."""
        return self.name.replace(".", "_").replace("-", "_")


def _k(name: str, type_: str, default: Any, doc: str, **kw: Any) -> ConfigKey:
    return ConfigKey(name, type_, default, doc=doc, **kw)


_DAY_MS = 24 * 60 * 60 * 1000

CONFIG_KEYS: tuple[ConfigKey, ...] = (
    # Topic-level (Kafka's TopicConfig names and LogConfig defaults).
    _k("segment.bytes", "int", 1024 * 1024 * 1024, "Roll a segment before its .log passes this size.", min=14, max=INT_MAX),
    _k("segment.ms", "long", 7 * _DAY_MS, "Roll a segment this long after its first record's timestamp.", min=1),
    _k("segment.jitter.ms", "long", 0, "Maximum random jitter subtracted from segment.ms.", min=0),
    _k("segment.index.bytes", "int", 10 * 1024 * 1024, "Maximum size of the offset and time indexes.", min=4, max=INT_MAX),
    _k("index.interval.bytes", "int", 4096, "Bytes appended between offset-index entries.", min=0, max=INT_MAX),
    _k("max.message.bytes", "int", 1024 * 1024 + 12, "Largest record batch the log accepts.", min=0, max=INT_MAX),
    _k("flush.messages", "long", LONG_MAX, "Flush after this many messages.", min=1),
    _k("flush.ms", "long", LONG_MAX, "Flush when the oldest unflushed message is this old.", min=0),
    _k("retention.ms", "long", 7 * _DAY_MS, "Delete segments older than this (-1: never).", min=-1),
    _k("retention.bytes", "long", -1, "Delete old segments while the log is larger than this (-1: never)."),
    _k("cleanup.policy", "list", ["delete"], "delete and/or compact.", choices=(CLEANUP_POLICY_COMPACT, CLEANUP_POLICY_DELETE)),
    _k("min.cleanable.dirty.ratio", "double", 0.5, "Dirty ratio at which a log becomes cleanable.", min=0.0, max=1.0),
    _k("min.compaction.lag.ms", "long", 0, "Minimum age of a record before compaction.", min=0),
    _k("max.compaction.lag.ms", "long", LONG_MAX, "Maximum age of an uncompacted record.", min=1),
    _k("delete.retention.ms", "long", _DAY_MS, "How long tombstones survive compaction.", min=0),
    _k("file.delete.delay.ms", "long", 60000, "Delay before a .deleted file is removed.", min=0),
    _k("compression.type", "string", "producer", "Final compression of appended batches.", choices=COMPRESSION_TYPES),
    _k("compression.gzip.level", "int", -1, "gzip level (-1 default, 1..9).", min=-1, max=9),
    _k("compression.lz4.level", "int", 9, "lz4 level.", min=1, max=17),
    _k("compression.zstd.level", "int", 3, "zstd level.", min=-131072, max=22),
    _k("message.timestamp.type", "string", TIMESTAMP_TYPE_CREATE, "CreateTime or LogAppendTime.",
       choices=(TIMESTAMP_TYPE_CREATE, TIMESTAMP_TYPE_LOG_APPEND)),
    _k("message.timestamp.before.max.ms", "long", LONG_MAX, "How far a CreateTime may be behind the broker clock.", min=0),
    _k("message.timestamp.after.max.ms", "long", 3600000, "How far a CreateTime may be ahead of the broker clock.", min=0),
    _k("min.insync.replicas", "int", 1, "Replicas that must acknowledge an acks=all write.", min=1, max=INT_MAX),
    _k("unclean.leader.election.enable", "boolean", False, "Allow out-of-sync replicas to lead."),
    _k("preallocate", "boolean", False, "Preallocate a new segment's .log file."),
    # Broker-level settings the engine's background work uses (Kafka's `log.` names).
    _k("log.initial.task.delay.ms", "long", 30000,
       "Delay before the first retention, flush, checkpoint and file-deletion run after start.", min=0),
    _k("log.retention.check.interval.ms", "long", 300000, "How often retention runs.", min=1),
    _k("log.flush.scheduler.interval.ms", "long", LONG_MAX, "How often the flusher checks flush.ms."),
    _k("log.flush.offset.checkpoint.interval.ms", "int", 60000, "How often recovery points are checkpointed.", min=0, max=INT_MAX),
    _k("log.flush.start.offset.checkpoint.interval.ms", "int", 60000, "How often log start offsets are checkpointed.", min=0, max=INT_MAX),
    _k("log.cleaner.enable", "boolean", True, "Run the log cleaner for compacted logs."),
    _k("log.cleaner.threads", "int", 1, "Number of cleaner threads.", min=0, max=INT_MAX),
    _k("log.cleaner.dedupe.buffer.size", "long", 128 * 1024 * 1024, "Memory for the cleaner's offset map.", min=0),
    _k("log.cleaner.io.buffer.size", "int", 512 * 1024, "Cleaner I/O buffer size.", min=0, max=INT_MAX),
    _k("log.cleaner.io.buffer.load.factor", "double", 0.9, "Offset map load factor."),
    _k("log.cleaner.io.max.bytes.per.second", "double", DOUBLE_MAX, "Cleaner I/O throttle."),
    _k("log.cleaner.backoff.ms", "long", 15000, "Cleaner sleep when nothing is cleanable.", min=0),
    _k("replica.lag.time.max.ms", "long", 30000, "A follower lagging longer than this leaves the ISR."),
    _k("producer.id.expiration.ms", "int", 86400000, "Forget an idle producer id after this long.", min=1, max=INT_MAX),
    _k("producer.id.expiration.check.interval.ms", "int", 600000, "How often idle producer ids are expired.",
       min=1, max=INT_MAX),
)

_BY_NAME: dict[str, ConfigKey] = {k.name: k for k in CONFIG_KEYS}
_BY_ATTR: dict[str, ConfigKey] = {k.attr: k for k in CONFIG_KEYS}


_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")


def java_integer(text: str) -> int:
    """Parse integer text as Java's Long.parseLong does: ASCII digits, an optional sign (ValueError
    otherwise; Python's int() would also take '1_000', spaces and non-ASCII digits)."""
    if not _JAVA_INTEGER.fullmatch(text):
        raise ValueError(f"not an integer: {text!r}")
    return int(text)


def property_int(props: Mapping[str, str], key: str, default: int, lo: int = 0) -> int:
    """The integer a `.properties` mapping gives `key` (`default` when absent); InvalidConfigError
    naming the key when it is not an integer or is below `lo`."""
    raw = props.get(key)
    if raw is None:
        return default
    try:
        value = java_integer(raw.strip())
    except ValueError:
        raise InvalidConfigError(f"{key}: expected an integer, got {raw!r}") from None
    if value < lo:
        raise InvalidConfigError(f"{key}: must be at least {lo}, got {value}")
    return value


def _parse(key: ConfigKey, raw: Any) -> Any:
    """Convert `raw` (native value or string) to the key's type and check its range."""
    name = key.name
    if key.type in ("int", "long"):
        if isinstance(raw, bool):
            raise InvalidConfigError(f"{name}: expected an integer, got boolean {raw!r}")
        if isinstance(raw, str):
            try:
                value = java_integer(raw.strip())
            except ValueError:
                raise InvalidConfigError(f"{name}: expected an integer, got {raw!r}") from None
        elif isinstance(raw, int):
            value = raw
        elif isinstance(raw, float) and raw.is_integer():
            value = int(raw)
        else:
            raise InvalidConfigError(f"{name}: expected an integer, got {raw!r}")
        lo, hi = (INT_MIN, INT_MAX) if key.type == "int" else (LONG_MIN, LONG_MAX)
        if not lo <= value <= hi:
            raise InvalidConfigError(f"{name}: {value} does not fit a {key.type}")
    elif key.type == "double":
        if isinstance(raw, bool) or not isinstance(raw, int | float | str):
            raise InvalidConfigError(f"{name}: expected a number, got {raw!r}")
        try:
            value = float(raw.strip() if isinstance(raw, str) else raw)
        except (ValueError, OverflowError):
            raise InvalidConfigError(f"{name}: expected a number, got {raw!r}") from None
        if math.isnan(value):  # NaN passes every range check below
            raise InvalidConfigError(f"{name}: expected a number, got {raw!r}")
    elif key.type == "boolean":
        if isinstance(raw, bool):
            value = raw
        elif isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
            value = raw.strip().lower() == "true"
        else:
            raise InvalidConfigError(f"{name}: expected true or false, got {raw!r}")
    elif key.type == "string":
        if not isinstance(raw, str):
            raise InvalidConfigError(f"{name}: expected a string, got {raw!r}")
        value = raw.strip()
    else:  # list
        if isinstance(raw, str):
            value = [item.strip() for item in raw.split(",") if item.strip()]
        elif isinstance(raw, list | tuple) and all(isinstance(i, str) for i in raw):
            value = [item.strip() for item in raw]
        else:
            raise InvalidConfigError(f"{name}: expected a comma-separated list, got {raw!r}")
    if key.min is not None and value < key.min:
        raise InvalidConfigError(f"{name}: {value} is below the minimum {key.min}")
    if key.max is not None and value > key.max:
        raise InvalidConfigError(f"{name}: {value} is above the maximum {key.max}")
    if key.choices is not None:
        items = value if isinstance(value, list) else [value]
        bad = [item for item in items if item not in key.choices]
        if bad:
            raise InvalidConfigError(f"{name}: {bad[0]!r} is not one of {', '.join(key.choices)}")
    return value


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java `.properties` text (comments, `=`/`:`/space separators, `\\` continuations)."""
    result: dict[str, str] = {}
    logical = ""
    for raw_line in text.splitlines():
        line = raw_line.lstrip() if not logical else raw_line.strip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        logical += line
        key, value = _split_property(logical)
        result[key] = value
        logical = ""
    if logical:
        key, value = _split_property(logical)
        result[key] = value
    return result


def _split_property(line: str) -> tuple[str, str]:
    for i, ch in enumerate(line):
        if ch in "=: \t":
            key, rest = line[:i], line[i:].lstrip(" \t")
            if rest[:1] in ("=", ":"):
                rest = rest[1:]
            return key, rest.strip()
    return line, ""


class LogConfig(Mapping[str, Any]):
    """Typed, validated, immutable log config; read as `config.segment_bytes` or `config["segment.bytes"]`."""

    def __init__(self, values: Mapping[str, Any] | None = None, /, **kwargs: Any):
        """Build from Kafka key names (dict) and/or snake_case keyword arguments.

        Raises InvalidConfigError naming the key for unknown keys, bad types and out-of-range values.
        """
        given: dict[str, Any] = {}
        for name, raw in (values or {}).items():
            if not isinstance(name, str) or name not in _BY_NAME:
                raise InvalidConfigError(f"{name}: unknown config key")
            given[name] = raw
        for attr, raw in kwargs.items():
            if attr not in _BY_ATTR:
                raise InvalidConfigError(f"{attr}: unknown config key")
            given[_BY_ATTR[attr].name] = raw
        parsed = {name: _parse(_BY_NAME[name], raw) for name, raw in given.items()}
        values = {k.name: parsed.get(k.name, k.default) for k in CONFIG_KEYS}
        # Plain instance attributes: config reads sit on the append path.
        self.__dict__.update({k.attr: values[k.name] for k in CONFIG_KEYS})
        self.__dict__["_values"] = values
        self.__dict__["_overrides"] = frozenset(parsed)

    @classmethod
    def from_properties(cls, path: str | PathLike[str]) -> LogConfig:
        """Read a UTF-8 Java `.properties` file of Kafka config keys (InvalidConfigError if it is not)."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
        return cls(parse_properties(text))

    @classmethod
    def coerce(cls, config: LogConfig | Mapping[str, Any] | None) -> LogConfig:
        """Accept a LogConfig, a dict of Kafka keys, or None (all defaults)."""
        if isinstance(config, LogConfig):
            return config
        return cls(config)

    def with_overrides(self, values: Mapping[str, Any] | None = None, /, **kwargs: Any) -> LogConfig:
        """A new config with these keys (Kafka names or snake_case keywords) replaced."""
        merged = {name: self._values[name] for name in self._overrides}
        merged.update(values or {})
        for attr, raw in kwargs.items():
            if attr not in _BY_ATTR:
                raise InvalidConfigError(f"{attr}: unknown config key")
            merged[_BY_ATTR[attr].name] = raw
        return LogConfig(merged)

    @property
    def overrides(self) -> frozenset[str]:
        """The keys set explicitly (the rest hold Kafka's defaults)."""
        return self._overrides

    @property
    def compact(self) -> bool:
        """True when `cleanup.policy` contains `compact`."""
        return CLEANUP_POLICY_COMPACT in self._values["cleanup.policy"]

    @property
    def delete(self) -> bool:
        """True when `cleanup.policy` contains `delete`."""
        return CLEANUP_POLICY_DELETE in self._values["cleanup.policy"]

    @property
    def compression_codec(self) -> Codec | None:
        """The codec `compression.type` makes the log write, or None for `producer` (keep the
        producer's codec)."""
        name = self._values["compression.type"]
        if name == COMPRESSION_TYPE_PRODUCER:
            return None
        return codec_by_name("none" if name == COMPRESSION_TYPE_UNCOMPRESSED else name)

    def compression_level(self, codec: str) -> int | None:
        """The level `compression.<codec>.level` sets for ``codec``, None for a codec without
        levels."""
        level_config = codec_by_name(codec).level_config
        return None if level_config is None else self._values[level_config]

    def to_properties(self) -> str:
        """The explicitly set keys as `.properties` text."""
        lines = []
        for name in sorted(self._overrides):
            value = self._values[name]
            if isinstance(value, list):
                value = ",".join(value)
            elif isinstance(value, bool):
                value = str(value).lower()
            lines.append(f"{name}={value}")
        return "\n".join(lines) + ("\n" if lines else "")

    def __setattr__(self, attr: str, value: Any) -> None:
        raise AttributeError(f"LogConfig is immutable; use with_overrides(...) to change {attr}")

    def __getitem__(self, name: str) -> Any:
        if name not in self._values:
            raise KeyError(name)
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LogConfig) and self._values == other._values

    def __hash__(self) -> int:
        return hash(tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in self._values.items()))

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={self._values[n]!r}" for n in sorted(self._overrides))
        return f"LogConfig({shown})"

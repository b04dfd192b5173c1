"""The broker's settings: a `server.properties` file read as Kafka reads it, split into the
broker-level keys the server uses and the `log.*` defaults handed to the LogManager."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from logstore.config import CONFIG_KEYS, LogConfig, java_integer, parse_properties, property_int
from logstore.errors import InvalidConfigError
from logstore.server.kraft.quorum_config import QuorumConfig

# Kafka's broker-level names of topic configs (ServerLogConfigs): the broker default of each.
BROKER_TO_TOPIC = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.roll.jitter.ms": "segment.jitter.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "message.max.bytes": "max.message.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.cleanup.policy": "cleanup.policy",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "compression.type": "compression.type",
    "log.message.timestamp.type": "message.timestamp.type",
    "min.insync.replicas": "min.insync.replicas",
    "log.preallocate": "preallocate",
}
_UNIT_MS = {"log.retention.hours": 3_600_000, "log.retention.minutes": 60_000, "log.roll.hours": 3_600_000}
_ENGINE_KEYS = {k.name for k in CONFIG_KEYS if k.name.startswith(("log.", "producer.", "replica."))}


def _bool(props: Mapping[str, str], key: str, default: bool) -> bool:
    raw = props.get(key)
    if raw is None:
        return default
    if raw.strip().lower() not in ("true", "false"):
        raise InvalidConfigError(f"{key}: expected true or false, got {raw!r}")
    return raw.strip().lower() == "true"


def _assignors(raw: str) -> tuple[str, ...]:
    """`group.consumer.assignors`: the server-side assignors by name, the first the default."""
    names = tuple(name.strip() for name in raw.split(",") if name.strip())
    unknown = [n for n in names if n not in ("uniform", "range")]
    if not names or unknown:
        raise InvalidConfigError(f"group.consumer.assignors: expected names of uniform and range, got {raw!r}")
    return names


@dataclass(frozen=True)
class BrokerConfig:
    """Broker-level settings (Kafka's names and defaults, bounded request sizes added)."""

    node_id: int = 1
    num_partitions: int = 1
    auto_create_topics_enable: bool = True
    offsets_topic_num_partitions: int = 50
    transaction_state_log_num_partitions: int = 50
    # a cluster's coordinator topics are created with these (the controller refuses more than its brokers)
    offsets_topic_replication_factor: int = 3
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_min_isr: int = 2  # __transaction_state's min.insync.replicas in a cluster
    socket_request_max_bytes: int = 104_857_600
    queued_max_request_bytes: int = 512 * 1024 * 1024
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = 2**31 - 1
    # KIP-848 consumer groups: the members' session and heartbeat interval are the broker's
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_consumer_max_size: int = 2**31 - 1
    group_consumer_assignors: tuple[str, ...] = ("uniform", "range")
    transaction_max_timeout_ms: int = 900_000
    offsets_retention_minutes: int = 7 * 24 * 60
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    offsets_commit_timeout_ms: int = 5000  # how long a coordinator write waits for the ISR (cluster)
    listeners: str | None = None
    log_defaults: Mapping[str, Any] = field(default_factory=dict)
    quorum: QuorumConfig | None = None  # None: a standalone node (no process.roles)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> BrokerConfig:
        """Read Kafka's broker keys; `log.*` and broker-level topic defaults become LogConfig keys."""
        log_defaults: dict[str, Any] = {}
        for key, raw in props.items():
            if key in BROKER_TO_TOPIC:
                log_defaults[BROKER_TO_TOPIC[key]] = raw
            elif key in _ENGINE_KEYS:
                log_defaults[key] = raw
        for key, unit in _UNIT_MS.items():
            topic_key = "retention.ms" if "retention" in key else "segment.ms"
            if key in props and topic_key not in log_defaults:
                log_defaults[topic_key] = property_int(props, key, 0, lo=-1) * unit
        LogConfig(log_defaults)  # validate now: one error naming the key
        node_id = property_int(props, "node.id", property_int(props, "broker.id", 1))
        listeners = props.get("listeners")
        return cls(
            node_id=node_id,
            num_partitions=property_int(props, "num.partitions", 1, lo=1),
            auto_create_topics_enable=_bool(props, "auto.create.topics.enable", True),
            offsets_topic_num_partitions=property_int(props, "offsets.topic.num.partitions", 50, lo=1),
            transaction_state_log_num_partitions=property_int(props, "transaction.state.log.num.partitions", 50, lo=1),
            offsets_topic_replication_factor=property_int(props, "offsets.topic.replication.factor", 3, lo=1),
            transaction_state_log_replication_factor=property_int(
                props, "transaction.state.log.replication.factor", 3, lo=1),
            transaction_state_log_min_isr=property_int(props, "transaction.state.log.min.isr", 2, lo=1),
            socket_request_max_bytes=property_int(props, "socket.request.max.bytes", 104_857_600, lo=1024),
            queued_max_request_bytes=property_int(props, "queued.max.request.bytes", 512 * 1024 * 1024, lo=-1),
            group_initial_rebalance_delay_ms=property_int(props, "group.initial.rebalance.delay.ms", 3000),
            group_min_session_timeout_ms=property_int(props, "group.min.session.timeout.ms", 6000),
            group_max_session_timeout_ms=property_int(props, "group.max.session.timeout.ms", 1_800_000),
            group_max_size=property_int(props, "group.max.size", 2**31 - 1, lo=1),
            group_consumer_session_timeout_ms=property_int(props, "group.consumer.session.timeout.ms", 45_000, lo=1),
            group_consumer_heartbeat_interval_ms=property_int(props, "group.consumer.heartbeat.interval.ms", 5_000, lo=1),
            group_consumer_max_size=property_int(props, "group.consumer.max.size", 2**31 - 1, lo=1),
            group_consumer_assignors=_assignors(props.get("group.consumer.assignors", "uniform,range")),
            transaction_max_timeout_ms=property_int(props, "transaction.max.timeout.ms", 900_000, lo=1),
            offsets_retention_minutes=property_int(props, "offsets.retention.minutes", 7 * 24 * 60, lo=1),
            offsets_retention_check_interval_ms=property_int(props, "offsets.retention.check.interval.ms", 600_000,
                                                     lo=1),
            offset_metadata_max_bytes=property_int(props, "offset.metadata.max.bytes", 4096),
            offsets_commit_timeout_ms=property_int(props, "offsets.commit.timeout.ms", 5000, lo=1),
            listeners=listeners.strip() if listeners else None,
            log_defaults=log_defaults,
            quorum=QuorumConfig.from_properties(props, node_id),
        )

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> BrokerConfig:
        """From a `server.properties` file (optional) and `overrides` (Kafka key names)."""
        props: dict[str, str] = {}
        if path is not None:
            try:
                props.update(parse_properties(Path(path).read_text(encoding="utf-8")))
            except UnicodeDecodeError as exc:
                raise InvalidConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
        props.update({k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (overrides or {}).items()})
        return cls.from_properties(props)

    def listen_address(self) -> tuple[str, int] | None:
        """Host and port of the first `listeners` entry (`PLAINTEXT://host:port`), if set; in
        a cluster, of the first listener that is not the controller's (None on a controller-only node)."""
        if self.quorum is not None:
            first = next(iter(self.quorum.broker_listeners), None)
            return None if first is None else (first.host, first.port)
        if not self.listeners:
            return None
        first = self.listeners.split(",")[0].strip()
        return parse_listen(first.split("://", 1)[-1])


def parse_listen(text: str) -> tuple[str, int]:
    """`host:port` (IPv6 in brackets) as (host, port); InvalidConfigError if malformed."""
    host, sep, port = text.rpartition(":")
    if not sep:
        raise InvalidConfigError(f"listen address must be HOST:PORT, got {text!r}")
    host = host.strip("[]") or "0.0.0.0"
    try:
        number = java_integer(port)
    except ValueError:
        raise InvalidConfigError(f"listen port must be a number, got {port!r}") from None
    if not 0 <= number <= 65535:
        raise InvalidConfigError(f"listen port must be in [0, 65535], got {number}")
    return host, number

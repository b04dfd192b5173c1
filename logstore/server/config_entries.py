"""What DescribeConfigs tells about a topic or the broker: each config's value, where it comes
from, its type, its documentation and, highest precedence first, its synonyms (a topic config's
broker-level name: `retention.ms` is `log.retention.ms` on the broker), as Kafka describes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from logstore.config import CONFIG_KEYS, ConfigKey, LogConfig
from logstore.server.broker_config import BROKER_TO_TOPIC, BrokerConfig

# DescribeConfigsResponse's ConfigSource and ConfigType codes (Kafka's DescribeConfigsResponse)
SOURCE_DYNAMIC_TOPIC, SOURCE_STATIC_BROKER, SOURCE_DEFAULT = 1, 4, 5
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_SHORT, TYPE_LONG, TYPE_DOUBLE, TYPE_LIST = 1, 2, 3, 4, 5, 6, 7
_TYPES = {"boolean": TYPE_BOOLEAN, "string": TYPE_STRING, "int": TYPE_INT, "long": TYPE_LONG,
          "double": TYPE_DOUBLE, "list": TYPE_LIST}

TOPIC_KEYS = tuple(k for k in CONFIG_KEYS if not k.name.startswith(("log.", "producer.", "replica.")))
# The broker-level name of each topic config (Kafka's LogConfig synonyms); unlisted ones keep their name.
TOPIC_TO_BROKER = {topic: broker for broker, topic in BROKER_TO_TOPIC.items()} | {
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
}
# The broker's own settings (BrokerConfig fields, Kafka's names): type and what each does.
BROKER_SETTINGS: dict[str, tuple[int, str]] = {
    "node.id": (TYPE_INT, "The id of this node."),
    "num.partitions": (TYPE_INT, "Partitions of an auto-created topic or of a CreateTopics without a count."),
    "auto.create.topics.enable": (TYPE_BOOLEAN, "Create a topic when Metadata asks for an unknown one."),
    "offsets.topic.num.partitions": (TYPE_INT, "Partitions of __consumer_offsets."),
    "transaction.state.log.num.partitions": (TYPE_INT, "Partitions of __transaction_state."),
    "offsets.topic.replication.factor": (TYPE_SHORT, "Replicas of __consumer_offsets in a cluster."),
    "transaction.state.log.replication.factor": (TYPE_SHORT, "Replicas of __transaction_state in a cluster."),
    "transaction.state.log.min.isr": (TYPE_INT, "min.insync.replicas of __transaction_state in a cluster."),
    "socket.request.max.bytes": (TYPE_INT, "Largest request a connection may send; larger ones close it."),
    "queued.max.request.bytes": (TYPE_LONG, "Bytes of requests read but not yet answered, across connections."),
    "group.initial.rebalance.delay.ms": (TYPE_INT, "How long a new group waits for more members."),
    "group.min.session.timeout.ms": (TYPE_INT, "Smallest session timeout a member may ask for."),
    "group.max.session.timeout.ms": (TYPE_INT, "Largest session timeout a member may ask for."),
    "group.max.size": (TYPE_INT, "Most members a group may have."),
    "group.consumer.session.timeout.ms": (TYPE_INT, "Session timeout of consumer group (KIP-848) members."),
    "group.consumer.heartbeat.interval.ms": (TYPE_INT, "How often consumer group (KIP-848) members heartbeat."),
    "group.consumer.max.size": (TYPE_INT, "Most members a consumer group (KIP-848) may have."),
    "group.consumer.assignors": (TYPE_LIST, "Server-side assignors of consumer groups; the first is the default."),
    "transaction.max.timeout.ms": (TYPE_INT, "Largest transaction timeout a producer may ask for."),
    "offsets.retention.minutes": (TYPE_INT, "How long committed offsets of an empty group are kept."),
    "offsets.retention.check.interval.ms": (TYPE_LONG, "How often expired offsets are looked for."),
    "offset.metadata.max.bytes": (TYPE_INT, "Largest metadata string of a committed offset."),
    "offsets.commit.timeout.ms": (TYPE_INT, "How long a coordinator write waits for the in-sync replicas."),
    "listeners": (TYPE_STRING, "The address the server listens on."),
}
# A KRaft node's settings (BrokerConfig.quorum; unset on a standalone node): type, doc, default.
QUORUM_SETTINGS: dict[str, tuple[int, str, str | None]] = {
    "process.roles": (TYPE_LIST, "The node's roles in a KRaft cluster: broker, controller or both.", None),
    "controller.quorum.voters": (TYPE_LIST, "The controller quorum's voters, ID@HOST:PORT.", ""),
    "controller.quorum.bootstrap.servers": (TYPE_LIST, "Where brokers find the controller quorum.", ""),
    "controller.listener.names": (TYPE_LIST, "The listeners the controller serves on.", None),
    "broker.heartbeat.interval.ms": (TYPE_INT, "How often a broker heartbeats to the controller.", "2000"),
    "broker.session.timeout.ms": (TYPE_INT, "How long a broker lives without heartbeats before it is fenced.",
                                  "9000"),
    "metadata.log.max.record.bytes.between.snapshots": (TYPE_LONG, "Metadata log bytes between snapshots.",
                                                        "20971520"),
}


class Synonym(NamedTuple):
    """Another name a config's value may come from, with its value there and its source."""

    name: str
    value: str | None
    source: int


class ConfigEntry(NamedTuple):
    """One described config."""

    name: str
    value: str | None
    source: int
    type: int
    documentation: str
    read_only: bool
    synonyms: tuple[Synonym, ...] = ()


def config_text(value: Any) -> str:
    """A config value as Kafka prints it (lists comma-joined, booleans lower case)."""
    if isinstance(value, list | tuple):
        return ",".join(value)
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def topic_entries(broker_defaults: LogConfig, overrides: Mapping[str, str]) -> list[ConfigEntry]:
    """Every topic-level config of a topic with `overrides` over the broker's defaults."""
    config = broker_defaults.with_overrides(overrides)
    pristine = LogConfig()
    entries = []
    for key in TOPIC_KEYS:
        broker_name = TOPIC_TO_BROKER.get(key.name, key.name)
        synonyms = []
        if key.name in overrides:
            synonyms.append(Synonym(key.name, config_text(config[key.name]), SOURCE_DYNAMIC_TOPIC))
        if key.name in broker_defaults.overrides:
            synonyms.append(Synonym(broker_name, config_text(broker_defaults[key.name]), SOURCE_STATIC_BROKER))
        synonyms.append(Synonym(broker_name, config_text(pristine[key.name]), SOURCE_DEFAULT))
        entries.append(ConfigEntry(key.name, config_text(config[key.name]), synonyms[0].source,
                                   _type(key), key.doc, False, tuple(synonyms)))
    return entries


def broker_entries(config: BrokerConfig, log_defaults: LogConfig) -> list[ConfigEntry]:
    """Every config of the broker by its broker-level name: its own settings, the topic
    defaults (`log.retention.ms`, ...) and the engine's `log.*` settings. Read-only: they
    change only with a restart."""
    pristine_broker = BrokerConfig()
    pristine_log = LogConfig()
    entries = []
    for name, (kind, doc) in BROKER_SETTINGS.items():
        attr = name.replace(".", "_")
        value, default = getattr(config, attr), getattr(pristine_broker, attr)
        text = None if value is None else config_text(value)
        source = SOURCE_DEFAULT if value == default else SOURCE_STATIC_BROKER
        entries.append(_broker_entry(name, text, source, kind, doc, None if default is None else config_text(default)))
    quorum = config.quorum.settings() if config.quorum is not None else {}
    for name, (kind, doc, default) in QUORUM_SETTINGS.items():
        value = quorum.get(name, default)
        source = SOURCE_DEFAULT if value == default else SOURCE_STATIC_BROKER
        entries.append(_broker_entry(name, value, source, kind, doc, default))
    for key in CONFIG_KEYS:
        name = TOPIC_TO_BROKER.get(key.name, key.name)
        source = SOURCE_STATIC_BROKER if key.name in log_defaults.overrides else SOURCE_DEFAULT
        entries.append(_broker_entry(name, config_text(log_defaults[key.name]), source, _type(key), key.doc,
                                     config_text(pristine_log[key.name])))
    return entries


def _broker_entry(name: str, value: str | None, source: int, kind: int, doc: str, default: str | None) -> ConfigEntry:
    synonyms = [Synonym(name, value, source)]
    if source != SOURCE_DEFAULT:
        synonyms.append(Synonym(name, default, SOURCE_DEFAULT))
    return ConfigEntry(name, value, source, kind, doc, True, tuple(synonyms))


def _type(key: ConfigKey) -> int:
    return _TYPES[key.type]


"""Per-topic log configs for audits, from a ``.properties`` file or a dict of Kafka names.

A key that is a Kafka config name (``retention.ms``) applies to every topic. A key of the form
``<topic>.<config name>`` (``orders.cleanup.policy=compact``) applies to that topic only and
wins over the global value; in a dict, ``{"orders": {"cleanup.policy": "compact"}}`` says the
same. Anything else is an unknown key and raises InvalidConfigError.
"""

from __future__ import annotations

from collections.abc import Mapping
from os import PathLike
from pathlib import Path
from typing import Any

from logstore.config import LogConfig, parse_properties
from logstore.errors import InvalidConfigError
from logstore.topic_configs import split_topic_key


class TopicConfigs:
    """A LogConfig per topic: global Kafka keys plus per-topic overrides (validated eagerly)."""

    __slots__ = ("_global", "_per_topic", "_cache")

    def __init__(
        self,
        global_values: Mapping[str, Any] | None = None,
        per_topic: Mapping[str, Mapping[str, Any]] | None = None,
    ):
        """Raises InvalidConfigError for unknown keys or bad values (global or per topic)."""
        self._global = dict(global_values or {})
        self._per_topic = {topic: dict(values) for topic, values in (per_topic or {}).items()}
        self._cache: dict[str, LogConfig] = {}
        LogConfig(self._global)
        for topic in self._per_topic:
            self.for_topic(topic)

    @classmethod
    def load(
        cls, source: TopicConfigs | Mapping[str, Any] | str | PathLike[str] | None
    ) -> TopicConfigs:
        """Accept TopicConfigs, a dict (flat or nested per topic), a `.properties` path, or None."""
        if isinstance(source, TopicConfigs):
            return source
        if source is None:
            return cls()
        if isinstance(source, str | PathLike):
            path = Path(source)
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise InvalidConfigError(f"{path}: cannot read config file ({exc})") from None
            return cls.from_mapping(parse_properties(text))
        if isinstance(source, Mapping):
            return cls.from_mapping(source)
        raise InvalidConfigError(f"unsupported config source {source!r}")

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> TopicConfigs:
        """Split flat keys into global and ``<topic>.<name>`` ones; nested dicts are per topic."""
        global_values: dict[str, Any] = {}
        per_topic: dict[str, dict[str, Any]] = {}
        for key, value in values.items():
            if isinstance(value, Mapping):
                per_topic.setdefault(key, {}).update(value)
            else:
                topic, name = split_topic_key(key)  # an unknown key stays global; LogConfig refuses it
                if topic is None:
                    global_values[key] = value
                else:
                    per_topic.setdefault(topic, {})[name] = value
        return cls(global_values, per_topic)

    def for_topic(self, topic: str) -> LogConfig:
        """The effective LogConfig of ``topic`` (Kafka defaults, then global, then topic keys)."""
        config = self._cache.get(topic)
        if config is None:
            config = LogConfig({**self._global, **self._per_topic.get(topic, {})})
            self._cache[topic] = config
        return config

    def as_dict(self) -> dict[str, Any]:
        """A plain nested dict (global keys, plus one dict per topic) that ``load`` accepts."""
        return {**self._global, **{t: dict(v) for t, v in self._per_topic.items()}}

    def __reduce__(self) -> tuple[Any, ...]:
        return (TopicConfigs, (self._global, self._per_topic))

"""Per-topic config overrides, persisted until the LogManager keeps them itself.

Interim: one JSON file in the data directory, written atomically. This is the only place
the server stores topic configs, so swapping it for the manager's own store is one module.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from logstore.checkpoint import atomic_write
from logstore.errors import InvalidConfigError

CONFIG_FILE = "topic-configs.json"


class TopicConfigStore:
    """{topic: {Kafka config key: string value}} overrides, saved on every change."""

    def __init__(self, data_dir: Path):
        self._path = data_dir / CONFIG_FILE
        self._configs: dict[str, dict[str, str]] = {}
        if self._path.exists():
            try:
                loaded = json.loads(self._path.read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError) as exc:
                raise InvalidConfigError(f"{self._path}: not a topic config file ({exc})") from None
            self._configs = {str(t): {str(k): str(v) for k, v in c.items()} for t, c in loaded.items()}

    def get(self, topic: str) -> dict[str, str]:
        """The overrides of `topic` (empty when none)."""
        return dict(self._configs.get(topic, {}))

    def set(self, topic: str, overrides: Mapping[str, str]) -> None:
        """Replace the overrides of `topic`."""
        self._configs[topic] = dict(overrides)
        self._save()

    def delete(self, topic: str) -> None:
        """Forget `topic`'s overrides."""
        if self._configs.pop(topic, None) is not None:
            self._save()

    def _save(self) -> None:
        atomic_write(self._path, json.dumps(self._configs, sort_keys=True, indent=1).encode())

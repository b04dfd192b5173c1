"""`logstore serve`: Kafka's wire protocol over the engine, so real Kafka clients produce,
consume, commit and transact on a Kafka-format data directory. Needs the server extra
(`pip install 'logstore[server]'`); KafkaServer is imported on first use, so the pytest plugin
in this package loads without it."""

from __future__ import annotations

from typing import Any

from logstore.server.broker_config import BrokerConfig

__all__ = ["BrokerConfig", "KafkaServer"]


def __getattr__(name: str) -> Any:
    if name == "KafkaServer":
        from logstore.server.server import KafkaServer

        return KafkaServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

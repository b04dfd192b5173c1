"""`logstore serve`: Kafka's wire protocol over the engine, so real Kafka clients produce,
consume, commit and transact on a Kafka-format data directory. Needs the server extra
(`pip install 'logstore[server]'`); KafkaServer and KafkaCluster (several nodes, with fault
injection) are imported on first use, so the pytest plugin
in this package loads without it."""

from __future__ import annotations

from typing import Any

from logstore.server.broker_config import BrokerConfig

__all__ = ["BrokerConfig", "KafkaCluster", "KafkaServer"]


def __getattr__(name: str) -> Any:
    if name == "KafkaServer":
        from logstore.server.server import KafkaServer

        return KafkaServer
    if name == "KafkaCluster":
        from logstore.server.cluster import KafkaCluster

        return KafkaCluster
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

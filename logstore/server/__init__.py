"""`logstore serve`: Kafka's wire protocol over the engine, so real Kafka clients produce,
consume, commit and transact on a Kafka-format data directory."""

from logstore.server.broker_config import BrokerConfig
from logstore.server.server import KafkaServer

__all__ = ["BrokerConfig", "KafkaServer"]

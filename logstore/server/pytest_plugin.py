"""pytest plugin: a real Kafka broker for tests, no JVM or Docker.

`kafka_broker` is a running `KafkaServer` on an ephemeral port over a temporary data
directory (function scope by default; `kafka_broker_scope = session` in the ini file shares
one per session). `kafka_broker_session` is always session-scoped. Registered through the
`pytest11` entry point, so installing logstore is enough; the server (and its extra,
`logstore[server]`) is imported only when a fixture is used.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from logstore.server.server import KafkaServer

# Quick to start and to rebalance: tests want groups to form at once.
TEST_BROKER_CONFIG = {
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.num.partitions": 1,
    "transaction.state.log.num.partitions": 1,
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("kafka_broker_scope", "scope of the kafka_broker fixture (function or session)",
                  default="function")


def _scope(fixture_name: str, config: pytest.Config) -> str:
    return config.getini("kafka_broker_scope")


def _serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaServer]:
    from logstore.server.server import KafkaServer  # MissingExtraError without logstore[server]

    with KafkaServer(tmp_path_factory.mktemp("kafka-broker"), port=0, config=TEST_BROKER_CONFIG) as server:
        yield server


@pytest.fixture(scope=_scope)
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaServer]:
    """A running broker; `kafka_broker.bootstrap_servers` is the address for any Kafka client."""
    yield from _serve(tmp_path_factory)


@pytest.fixture(scope="session")
def kafka_broker_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaServer]:
    """One broker for the whole session."""
    yield from _serve(tmp_path_factory)

"""pytest plugin: a real Kafka broker for tests, no JVM or Docker.

`kafka_broker` is a running `KafkaServer` on an ephemeral port over a temporary data
directory (function scope by default; `kafka_broker_scope = session` in the ini file shares
one per session). `@pytest.mark.kafka_broker_config({...})` on a test or module sets broker
configs for it. `kafka_broker_session` is always session-scoped. `kafka_cluster` is a running
KafkaCluster (3 nodes in this process unless `@pytest.mark.kafka_cluster(nodes=..., processes=...,
config={...})` or an indirect parameter of those keyword arguments says otherwise), with its
fault-injection API. Registered through the
`pytest11` entry point, so installing logstore is enough; the server (and its extra,
`logstore[server]`) is imported only when a fixture is used.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from logstore.server.cluster import KafkaCluster
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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kafka_broker_config(configs): broker configs (a dict) "
                                       "for the kafka_broker fixture, over TEST_BROKER_CONFIG")
    config.addinivalue_line("markers", "kafka_cluster(**options): KafkaCluster options (nodes, processes, "
                                       "config, node_configs) for the kafka_cluster fixture")


def _scope(fixture_name: str, config: pytest.Config) -> str:
    return config.getini("kafka_broker_scope")


@contextmanager
def serve_broker(data_dir: str | os.PathLike[str],
                 config: Mapping[str, Any] | None = None) -> Iterator[KafkaServer]:
    """A broker on an ephemeral port over `data_dir`, with `config` over TEST_BROKER_CONFIG;
    stopped on exit."""
    from logstore.server.server import KafkaServer  # MissingExtraError without logstore[server]

    with KafkaServer(data_dir, port=0, config={**TEST_BROKER_CONFIG, **(config or {})}) as server:
        yield server


def marked_broker_config(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The configs of the `kafka_broker_config` mark closest to the requesting test or module."""
    marker = request.node.get_closest_marker("kafka_broker_config")
    return dict(marker.args[0]) if marker else {}


@pytest.fixture(scope=_scope)
def kafka_broker(request: pytest.FixtureRequest,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaServer]:
    """A running broker; `kafka_broker.bootstrap_servers` is the address for any Kafka client."""
    with serve_broker(tmp_path_factory.mktemp("kafka-broker"), marked_broker_config(request)) as server:
        yield server


@pytest.fixture(scope="session")
def kafka_broker_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaServer]:
    """One broker for the whole session."""
    with serve_broker(tmp_path_factory.mktemp("kafka-broker")) as server:
        yield server


def cluster_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The KafkaCluster options for a `kafka_cluster` fixture: the closest `kafka_cluster` mark,
    then an indirect parameter (a dict) over it; `config` goes over TEST_BROKER_CONFIG."""
    marker = request.node.get_closest_marker("kafka_cluster")
    options = {**(marker.kwargs if marker else {}), **getattr(request, "param", {})}
    options["config"] = {**TEST_BROKER_CONFIG, **options.get("config", {})}
    return options


@pytest.fixture
def kafka_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """A running KRaft cluster of `logstore serve` nodes (node 1 the controller and a broker);
    `kafka_cluster.bootstrap_servers` lists its brokers, `kafka_cluster.node(n)` stops, kills,
    power-cuts and restarts one."""
    from logstore.server.cluster import KafkaCluster

    with KafkaCluster(data_dir=tmp_path_factory.mktemp("kafka-cluster"), **cluster_options(request)) as cluster:
        yield cluster

"""Shared pytest fixtures: Kafka's sample copied, a manual clock, brokers, a wire client and a
local Spark session. Helpers that are plain functions live in `tests.support` (directory
digests in `files`, paths in `paths`, the starting time in `clock`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from logstore.clock import ManualClock
from logstore.server import KafkaServer
from logstore.server.pytest_plugin import marked_broker_config, serve_broker
from tests.support.clock import NOW
from tests.support.kafka_dirs import kafka_sample
from tests.support.wire import WireClient


@pytest.fixture(scope="session")
def spark():
    """One local Spark session (``local[2]``) for the whole test session; stopped at the end."""
    from spark_tools.session import spark_session

    session = spark_session("local[2]", app_name="logstore-tests")
    yield session
    session.stop()


@pytest.fixture
def clock() -> ManualClock:
    """A manual clock at NOW; tests move it with `advance`."""
    return ManualClock(NOW)


@pytest.fixture
def kafka_logdir(tmp_path: Path) -> Path:
    """A writable copy of Kafka's sample log directory (the `plain-0` partition and the root
    checkpoints) at `tmp_path / "logdir"`."""
    return kafka_sample(tmp_path / "logdir").parent


@pytest.fixture
def kafka_partition(kafka_logdir: Path) -> Path:
    """The `plain-0` partition directory of a writable copy of Kafka's sample."""
    return kafka_logdir / "plain-0"


@pytest.fixture
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KafkaServer]:
    """A fresh broker per test over `tmp_path / "data"` (the kafka_broker plugin's broker);
    `@pytest.mark.kafka_broker_config({...})` on the test or module sets its configs."""
    with serve_broker(tmp_path / "data", marked_broker_config(request)) as broker:
        yield broker


@pytest.fixture(scope="module")
def module_server(request: pytest.FixtureRequest,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaServer]:
    """One broker shared by the tests of a module; configured by the module's
    `pytestmark = pytest.mark.kafka_broker_config({...})`."""
    with serve_broker(tmp_path_factory.mktemp("broker") / "data", marked_broker_config(request)) as broker:
        yield broker


@pytest.fixture
def wire() -> Iterator[Callable[..., WireClient]]:
    """Opens raw-socket clients: `wire(broker)` (keyword arguments go to WireClient); all are
    closed after the test."""
    opened: list[WireClient] = []

    def connect(broker: KafkaServer, **options) -> WireClient:
        opened.append(WireClient(broker.port, **options))
        return opened[-1]

    yield connect
    for client in opened:
        client.close()

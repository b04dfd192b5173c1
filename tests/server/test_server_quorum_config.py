"""`server.properties`' KRaft keys: process.roles, node.id, the quorum voters or bootstrap
servers, listeners and controller.listener.names, read and checked as Kafka checks them."""

from __future__ import annotations

import pytest

from logstore.cli import main as logstore_main
from logstore.config import LogConfig
from logstore.errors import InvalidConfigError
from logstore.server import BrokerConfig
from logstore.server.config_entries import broker_entries

COMBINED = {"process.roles": "broker,controller", "node.id": "1", "controller.quorum.voters": "1@localhost:9093",
            "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093", "controller.listener.names": "CONTROLLER"}
BROKER_ONLY = {"process.roles": "broker", "node.id": "2", "controller.quorum.bootstrap.servers": "localhost:9093",
               "listeners": "PLAINTEXT://127.0.0.1:9094", "controller.listener.names": "CONTROLLER"}


def test_a_combined_node_reads_its_roles_voters_and_listeners():
    quorum = BrokerConfig.load(None, {**COMBINED, "broker.session.timeout.ms": "4000"}).quorum
    assert quorum.is_broker and quorum.is_controller
    assert quorum.voters == {1: ("localhost", 9093)}
    assert (quorum.controller_listener.name, quorum.controller_listener.port) == ("CONTROLLER", 9093)
    assert [e.name for e in quorum.broker_listeners] == ["PLAINTEXT"]
    assert quorum.session_timeout_ms == 4000 and quorum.heartbeat_interval_ms == 2000


def test_a_broker_only_node_finds_the_controller_through_the_bootstrap_servers():
    config = BrokerConfig.load(None, BROKER_ONLY)
    assert not config.quorum.is_controller and config.quorum.controller_address == ("localhost", 9093)
    assert config.listen_address() == ("127.0.0.1", 9094)


def test_without_process_roles_the_node_stays_standalone():
    assert BrokerConfig.load(None, {"node.id": "1"}).quorum is None


@pytest.mark.parametrize("change, message", [
    ({"controller.quorum.voters": "1@localhost:9093,2@localhost:9095"}, "single-voter quorum"),
    ({"process.roles": "broker,zookeeper"}, "process.roles"),
    ({"node.id": "5"}, "not in controller.quorum.voters"),
    ({"controller.listener.names": ""}, "controller.listener.names must be set"),
    ({"controller.listener.names": "OTHER",
      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"}, "OTHER is not among listeners"),
    ({"controller.listener.names": "OTHER"}, "CONTROLLER maps to security protocol None"),
    ({"controller.quorum.voters": "one@localhost:9093"}, "ID@HOST:PORT"),
    ({"controller.quorum.voters": ""}, "must name the controller"),
    ({"listeners": "CONTROLLER://:9093"}, "a listener for clients"),
    ({"listeners": "SSL://:9092,CONTROLLER://:9093"}, "PLAINTEXT only"),
])
def test_what_kafka_refuses_is_refused_naming_the_key(change, message):
    with pytest.raises(InvalidConfigError, match=message):
        BrokerConfig.load(None, {**COMBINED, **change})


def test_a_broker_only_node_may_not_listen_on_the_controller_listener():
    with pytest.raises(InvalidConfigError, match="must not name a listener"):
        BrokerConfig.load(None, {**BROKER_ONLY, "listeners": "PLAINTEXT://:9094,CONTROLLER://:9093"})


def test_quorum_keys_without_process_roles_are_not_ignored():
    with pytest.raises(InvalidConfigError, match="process.roles is not"):
        BrokerConfig.load(None, {"controller.quorum.voters": "1@localhost:9093"})


def test_serve_refuses_a_quorum_it_cannot_run_as_a_usage_error(tmp_path, capsys):
    properties = tmp_path / "server.properties"
    properties.write_text("".join(f"{k}={v}\n" for k, v in {
        **COMBINED, "controller.quorum.voters": "1@localhost:9093,2@localhost:9095"}.items()))
    assert logstore_main(["serve", str(tmp_path / "data"), "--config-file", str(properties)]) == 2
    assert "single-voter quorum" in capsys.readouterr().err
    assert not (tmp_path / "data").exists()


def test_describe_configs_shows_the_quorum_settings():
    entries = {e.name: e.value for e in broker_entries(BrokerConfig.load(None, COMBINED), LogConfig())}
    assert entries["process.roles"] == "broker,controller"
    assert entries["controller.quorum.voters"] == "1@localhost:9093"
    standalone = {e.name: e.value for e in broker_entries(BrokerConfig.load(None, {}), LogConfig())}
    assert standalone["process.roles"] is None

"""Broker settings from server.properties and the `logstore serve` command line."""

from __future__ import annotations

import pytest

from logstore.cli import main as logstore_main
from logstore.errors import InvalidConfigError
from logstore.server import BrokerConfig
from logstore.server.broker_config import parse_listen


def test_server_properties_split_into_broker_keys_and_log_defaults(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("# a broker\nnode.id=7\nnum.partitions=3\nauto.create.topics.enable=false\n"
                    "log.segment.bytes=1048576\nlog.retention.hours=2\nlisteners=PLAINTEXT://0.0.0.0:19092\n"
                    "log.dirs=/ignored\nsome.unknown.key=1\noffsets.retention.minutes=60\n")
    config = BrokerConfig.load(path)
    assert (config.node_id, config.num_partitions, config.auto_create_topics_enable) == (7, 3, False)
    assert config.log_defaults == {"segment.bytes": "1048576", "retention.ms": 7_200_000}
    assert config.listen_address() == ("0.0.0.0", 19092)
    assert (config.offsets_retention_minutes, config.offsets_retention_check_interval_ms) == (60, 600_000)


@pytest.mark.parametrize("props", [{"num.partitions": "0"}, {"log.segment.bytes": "x"},
                                   {"auto.create.topics.enable": "maybe"},
                                   {"offsets.retention.minutes": "0"}])
def test_bad_values_name_their_key(props):
    with pytest.raises(InvalidConfigError, match=next(iter(props)).split(".")[-1]):
        BrokerConfig.load(None, props)


@pytest.mark.parametrize("text, expected", [("127.0.0.1:9092", ("127.0.0.1", 9092)), ("[::1]:0", ("::1", 0)),
                                            (":9093", ("0.0.0.0", 9093))])
def test_listen_addresses(text, expected):
    assert parse_listen(text) == expected


@pytest.mark.parametrize("args", [["--listen", "nohost"], ["--listen", "h:99999"]])
def test_serve_rejects_a_bad_listen_address_as_a_usage_error(tmp_path, args, capsys):
    assert logstore_main(["serve", str(tmp_path), *args]) == 2
    assert "listen" in capsys.readouterr().err


def test_serve_of_a_file_is_one_line_naming_it(tmp_path, capsys):
    path = tmp_path / "data"
    path.write_text("not a directory")
    assert logstore_main(["serve", str(path)]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a file" in err and str(path) in err
    assert path.read_text() == "not a directory"

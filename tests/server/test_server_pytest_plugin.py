"""The `kafka_broker` and `kafka_cluster` pytest fixtures, run as a user's test suite would load
them: README's examples as written, a fresh broker per test, one broker per session when the
ini says so, and a cluster shaped by its mark."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT

USER_TESTS = '''
from confluent_kafka import Consumer, Producer, TopicPartition

def test_roundtrip(kafka_broker):
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    producer.produce("greetings", value=b"hello")
    producer.flush(10)
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": "g"})
    consumer.assign([TopicPartition("greetings", 0, 0)])
    message = None
    for _ in range(50):
        message = consumer.poll(0.2)
        if message is not None:
            break
    consumer.close()
    assert message.value() == b"hello"

def test_fresh_broker_per_test(kafka_broker):
    assert "greetings" not in kafka_broker.context.topics

def test_session_broker(kafka_broker_session):
    assert kafka_broker_session.port > 0
'''

SHARED_TESTS = '''
ports = []

def test_first(kafka_broker):
    ports.append(kafka_broker.port)

def test_second(kafka_broker):
    assert ports == [kafka_broker.port]
'''


def readme_example(heading: str = "the `kafka_broker` fixture") -> str:
    """The Python example of the README section under `heading`, as a user would copy it."""
    section = (ROOT / "README.md").read_text().split(heading, 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def run_user_tests(directory: Path, *files: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    installed = any(e.value == "logstore.server.pytest_plugin" for e in entry_points(group="pytest11"))
    load = [] if installed else ["-p", "logstore.server.pytest_plugin"]  # a checkout not yet reinstalled
    return subprocess.run([sys.executable, "-m", "pytest", "-q", *load, "-p", "no:cacheprovider", *files],
                          cwd=directory, env=env, capture_output=True, text=True, timeout=120)


def test_the_plugin_is_registered_through_the_pytest11_entry_point():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["pytest11"]["logstore"] == "logstore.server.pytest_plugin"


@pytest.mark.slow
def test_the_fixtures_serve_a_users_tests_and_the_readme_examples(tmp_path):
    (tmp_path / "test_user.py").write_text(USER_TESTS)
    (tmp_path / "test_readme.py").write_text(readme_example())
    (tmp_path / "test_readme_cluster.py").write_text(readme_example("`kafka_cluster` and fault injection"))
    result = run_user_tests(tmp_path, "test_user.py", "test_readme.py", "test_readme_cluster.py")
    assert "6 passed" in result.stdout, result.stdout + result.stderr


@pytest.mark.slow
def test_the_ini_file_makes_kafka_broker_one_broker_per_session(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\nkafka_broker_scope = session\n")
    (tmp_path / "test_shared.py").write_text(SHARED_TESTS)
    result = run_user_tests(tmp_path, "test_shared.py")
    assert "2 passed" in result.stdout, result.stdout + result.stderr


@pytest.mark.kafka_broker_config({"num.partitions": 3, "offsets.topic.num.partitions": 2})
def test_the_kafka_broker_config_mark_sets_the_brokers_configs_over_the_test_defaults(kafka_broker):
    assert kafka_broker.config.num_partitions == 3
    assert kafka_broker.config.offsets_topic_num_partitions == 2
    assert kafka_broker.config.transaction_state_log_num_partitions == 1  # TEST_BROKER_CONFIG's


def test_the_kafka_broker_without_a_mark_has_the_test_defaults(kafka_broker):
    assert kafka_broker.config.num_partitions == 1
    assert kafka_broker.config.offsets_topic_num_partitions == 1


@pytest.mark.kafka_cluster(nodes=2, config={"num.partitions": 3})
def test_the_kafka_cluster_mark_shapes_the_cluster_over_the_test_defaults(kafka_cluster):
    assert sorted(kafka_cluster.nodes) == [1, 2]
    assert len(kafka_cluster.bootstrap_servers.split(",")) == 2
    config = kafka_cluster.node(2).server.config
    assert (config.num_partitions, config.offsets_topic_num_partitions) == (3, 1)  # TEST_BROKER_CONFIG's

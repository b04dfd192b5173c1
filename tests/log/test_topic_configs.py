"""Topic configs persist in the data directory (logstore.topic_configs): LogManager stores them
when a topic is created or changed and applies them on reopen, Log.open finds them, and a log
whose configs are unknown is neither trimmed by retention nor cleaned."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from compaction import Cleaner, LogCleaner
from logstore.clock import ManualClock
from logstore.errors import InvalidConfigError, UnknownTopicConfigError
from logstore.log import Log
from logstore.manager import LogManager
from logstore.topic_configs import (
    ORIGIN_GIVEN,
    ORIGIN_NEW,
    ORIGIN_STORED,
    TOPIC_CONFIGS_FILE,
    read_topic_configs,
    store_topic_configs,
    stored_topic_configs,
)
from retention import apply_retention, plan_for_log
from tests.support.clock import NOW as T0
from tests.support.paths import KAFKA_LOGDIR, REPO_ROOT

YEAR_MS = 365 * 24 * 3_600_000
KAFKA_PLAIN = KAFKA_LOGDIR


def kafka_copy(tmp_path: Path) -> Path:
    target = tmp_path / "kafka"
    shutil.copytree(KAFKA_PLAIN, target)
    return target


def segment_bytes(directory: Path) -> dict[str, bytes]:
    """The segment files (a writable open may grow the active segment's indexes, as Kafka's does)."""
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if ".log" in p.name}


def test_stored_configs_round_trip_and_an_unknown_topic_reads_as_none(tmp_path):
    assert stored_topic_configs(tmp_path, "orders") is None
    store_topic_configs(tmp_path, "orders", {"cleanup.policy": "compact,delete", "retention.ms": 5})
    store_topic_configs(tmp_path, "clicks", {})
    assert stored_topic_configs(tmp_path, "orders") == {"cleanup.policy": "compact,delete", "retention.ms": "5"}
    assert stored_topic_configs(tmp_path, "clicks") == {}  # the defaults, chosen on purpose
    assert stored_topic_configs(tmp_path, "users") is None
    store_topic_configs(tmp_path, "clicks", None)
    assert read_topic_configs(tmp_path) == {"orders": {"cleanup.policy": "compact,delete", "retention.ms": "5"}}


def test_bad_configs_are_refused_before_anything_is_written(tmp_path):
    with pytest.raises(InvalidConfigError, match="retention.mss"):
        store_topic_configs(tmp_path, "orders", {"retention.mss": 5})
    assert not (tmp_path / TOPIC_CONFIGS_FILE).exists()
    (tmp_path / TOPIC_CONFIGS_FILE).write_text('{"version": 1, "topics": {"x": {"segment.bytes": "-1"}}}')
    with pytest.raises(InvalidConfigError, match=TOPIC_CONFIGS_FILE):
        read_topic_configs(tmp_path)


def test_a_crash_mid_write_leaves_the_old_configs(tmp_path, monkeypatch):
    store_topic_configs(tmp_path, "orders", {"cleanup.policy": "compact"})
    before = (tmp_path / TOPIC_CONFIGS_FILE).read_bytes()

    def crash(*_args):
        raise OSError("power lost before the rename")

    monkeypatch.setattr("logstore.checkpoint.os.replace", crash)
    with pytest.raises(OSError, match="power lost"):
        store_topic_configs(tmp_path, "orders", {"cleanup.policy": "delete"})
    assert (tmp_path / TOPIC_CONFIGS_FILE).read_bytes() == before
    assert stored_topic_configs(tmp_path, "orders") == {"cleanup.policy": "compact"}


def fill(log: Log, clock: ManualClock, count: int = 60) -> None:
    for i in range(count):
        log.append([(b"k%d" % (i % 5), b"v" * 40)])
        clock.advance(1000)


def test_a_compacted_topic_reopened_without_configs_keeps_its_data_and_its_policy(tmp_path):
    clock = ManualClock(T0)
    with LogManager(tmp_path, clock=clock) as manager:
        log = manager.get_or_create("users", 0, {"cleanup.policy": "compact", "segment.bytes": 400})
        fill(log, clock)
        segments = [s.base_offset for s in log.segments]
    assert len(segments) > 3
    assert stored_topic_configs(tmp_path, "users") == {"cleanup.policy": "compact", "segment.bytes": "400"}

    with LogManager(tmp_path, clock=clock, retention=apply_retention) as manager:
        log = manager.get("users", 0)
        assert log.config.compact and not log.config.delete and log.config.segment_bytes == 400
        assert log.config_origin == ORIGIN_STORED
        clock.advance(10 * YEAR_MS)  # past retention.ms, delete.retention.ms, every default
        assert "kafka-log-retention" in manager.run_pending()
        assert [s.base_offset for s in log.segments] == segments
        assert log.log_start_offset == 0 and log.log_end_offset == 60
    assert not [p for p in (tmp_path / "users-0").iterdir() if p.name.endswith(".deleted")]


def test_config_changes_are_stored_and_apply_to_every_partition(tmp_path):
    with LogManager(tmp_path) as manager:
        p0 = manager.get_or_create("orders", 0)
        assert stored_topic_configs(tmp_path, "orders") == {}
        p1 = manager.get_or_create("orders", 1)
        manager.set_topic_config("orders", {"retention.ms": 1000})
        assert p0.config.retention_ms == p1.config.retention_ms == 1000
        manager.get_or_create("orders", 0, {"retention.bytes": 10})
        assert p1.config.retention_bytes == 10 and p1.config.retention_ms == 7 * 24 * 3_600_000  # replaced
    assert stored_topic_configs(tmp_path, "orders") == {"retention.bytes": "10"}
    with LogManager(tmp_path) as manager:
        assert manager.get_or_create("orders", 2).config.retention_bytes == 10  # a new partition too
        manager.delete("orders", 0)
        manager.delete("orders", 1)
        assert stored_topic_configs(tmp_path, "orders") is not None
        manager.delete("orders", 2)
        assert stored_topic_configs(tmp_path, "orders") is None  # the topic is gone from here


def test_a_standalone_log_finds_its_topic_configs_in_the_parent(tmp_path):
    store_topic_configs(tmp_path, "users", {"cleanup.policy": "compact"})
    with Log.open(tmp_path / "users-3") as log:
        assert log.config.compact and log.config_origin == ORIGIN_STORED
    with Log.open(tmp_path / "users-3", {"cleanup.policy": "delete"}) as log:
        assert log.config.delete and log.config_origin == ORIGIN_GIVEN  # given configs win
    with Log.open(tmp_path / "other-0") as log:
        assert log.config_origin == ORIGIN_NEW  # created empty: its configs are the defaults


def test_a_copied_kafka_directory_is_neither_trimmed_nor_cleaned_until_configs_are_given(tmp_path):
    data_dir = kafka_copy(tmp_path)
    clock = ManualClock(T0 + 10 * YEAR_MS)
    before = segment_bytes(data_dir / "plain-0")
    with LogManager(data_dir, clock=clock, retention=apply_retention, cleaner=LogCleaner) as manager:
        assert manager.topics_without_configs() == ["plain"]
        log = manager.get("plain", 0)
        assert log.config_origin is None
        clock.advance(YEAR_MS)
        manager.run_pending()
        assert segment_bytes(data_dir / "plain-0") == before
        with pytest.raises(UnknownTopicConfigError, match="'plain'") as refused:
            apply_retention(log)
        assert "\n" not in str(refused.value)
        with pytest.raises(UnknownTopicConfigError, match="cleaning"):
            Cleaner(log.config).clean(log)
        assert plan_for_log(log).deletions  # a dry run still says what the defaults would do
        assert Cleaner(log.config).clean(log, dry_run=True).dry_run
        assert segment_bytes(data_dir / "plain-0") == before

        manager.set_topic_config("plain", {"retention.ms": -1})
        assert manager.topics_without_configs() == []
        assert not apply_retention(log)  # configs given: retention runs, and keeps everything
    assert json.loads((data_dir / TOPIC_CONFIGS_FILE).read_text())["topics"] == {"plain": {"retention.ms": "-1"}}


def test_a_standalone_open_of_a_copied_partition_refuses_retention(tmp_path):
    data_dir = kafka_copy(tmp_path)
    with Log.open(data_dir / "plain-0") as log:
        assert log.config_origin is None
        with pytest.raises(UnknownTopicConfigError):
            apply_retention(log, now_ms=T0 + 10 * YEAR_MS)
        log.config = {"retention.ms": -1}  # configs given
        assert log.config_origin == ORIGIN_GIVEN
        assert not apply_retention(log, now_ms=T0 + 10 * YEAR_MS)


WRITER = """
import sys
from logstore.topic_configs import store_topic_configs
i = 0
while True:
    store_topic_configs(sys.argv[1], "orders", {"retention.ms": 1000 + i % 2, "segment.bytes": 100000})
    if i == 0:
        print("writing", flush=True)
    i += 1
"""


@pytest.mark.slow
def test_a_writer_killed_at_any_moment_leaves_the_old_or_the_new_configs(tmp_path):
    import os
    import random
    import signal
    import subprocess
    import sys
    import time

    store_topic_configs(tmp_path, "orders", {"retention.ms": 1000, "segment.bytes": 100000})
    rng = random.Random(5)
    for _ in range(8):
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)],
                                  cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
        assert writer.stdout.readline() == "writing\n"  # rewriting the file in a loop from here
        time.sleep(rng.random() * 0.2)
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
        writer.stdout.close()
        assert stored_topic_configs(tmp_path, "orders") in (
            {"retention.ms": "1000", "segment.bytes": "100000"},
            {"retention.ms": "1001", "segment.bytes": "100000"})


def test_a_config_the_open_refuses_is_not_stored(tmp_path):
    with LogManager(tmp_path) as manager, pytest.raises(InvalidConfigError, match="segment.index.bytes"):
        manager.get_or_create("orders", 0, {"segment.index.bytes": 4})
    assert stored_topic_configs(tmp_path, "orders") is None
    assert not (tmp_path / "orders-0").exists()

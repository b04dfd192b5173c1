"""spark_tools.layout and topic_configs: finding segment files and per-topic configs."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import pytest

from logstore.checkpoint import write_offsets_checkpoint
from logstore.errors import InvalidConfigError, LogstoreError
from spark_tools.layout import list_partitions, resolve_paths
from spark_tools.topic_configs import TopicConfigs
from tests.support.paths import KAFKA_LOGDIR

SAMPLES = KAFKA_LOGDIR


def _touch(path: Path, data: bytes = b"") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_data_directory_lists_live_segments_and_checkpoints(tmp_path):
    shutil.copytree(SAMPLES, tmp_path / "logdir")
    parts = list_partitions(tmp_path / "logdir")
    assert [(p.topic, p.partition, len(p.segments)) for p in parts] == [("plain", 0, 7)]
    assert [s.base_offset for s in parts[0].segments] == [0, 105, 211, 318, 426, 531, 633]
    assert parts[0].log_start_offset == 0 and parts[0].high_watermark == 720
    assert parts[0].cleaner_checkpoint is None


def test_partition_dir_and_single_file_paths(tmp_path):
    for name in ("00000000000000000000.log", "00000000000000000007.log",
                 "00000000000000000007.log.deleted", "00000000000000000009.cleaned",
                 "00000000000000000007.index"):
        _touch(tmp_path / "my.topic-12" / name)
    write_offsets_checkpoint(tmp_path / "cleaner-offset-checkpoint", {("my.topic", 12): 7})
    (part,) = list_partitions(tmp_path / "my.topic-12")
    assert (part.topic, part.partition) == ("my.topic", 12)
    assert [s.base_offset for s in part.segments] == [0, 7]
    assert part.cleaner_checkpoint == 7
    (single,) = list_partitions(str(tmp_path / "my.topic-12" / "00000000000000000007.log"))
    assert [s.base_offset for s in single.segments] == [7]


def test_data_directory_skips_kafka_delete_and_future_directories(tmp_path):
    _touch(tmp_path / "t-0" / "00000000000000000000.log")
    _touch(tmp_path / "t-1.9f8e7d6c5b4a39281706f5e4d3c2b1a0-delete" / "00000000000000000000.log")
    _touch(tmp_path / "t-2.0a1b2c3d4e5f60718293a4b5c6d7e8f9-future" / "00000000000000000000.log")
    assert [(p.topic, p.partition) for p in list_partitions(tmp_path)] == [("t", 0)]


def test_topic_names_kafka_refuses_are_not_partitions(tmp_path):
    _touch(tmp_path / "t-0" / "00000000000000000000.log")
    _touch(tmp_path / "bad topic-0" / "00000000000000000000.log")
    assert [(p.topic, p.partition) for p in list_partitions(tmp_path)] == [("t", 0)]
    with pytest.raises(LogstoreError, match="is illegal"):
        list_partitions(tmp_path / "bad topic-0")


def test_missing_or_empty_paths_are_errors(tmp_path):
    with pytest.raises(LogstoreError, match="no such file"):
        list_partitions(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(LogstoreError, match="no segment files"):
        list_partitions(tmp_path / "empty")
    _touch(tmp_path / "loose" / "00000000000000000000.log")
    with pytest.raises(LogstoreError, match="<topic>-<partition>"):
        list_partitions(tmp_path / "loose")


def test_uris_resolve_to_one_filesystem(tmp_path):
    fs, inner = resolve_paths([tmp_path.as_uri(), str(tmp_path)])
    assert fs.type_name == "local" and inner == [str(tmp_path), str(tmp_path)]


def test_topic_configs_global_per_topic_and_nested():
    configs = TopicConfigs.load({
        "retention.ms": "1000",
        "orders.cleanup.policy": "compact",
        "a.b.log.cleaner.threads": 2,
        "clicks": {"retention.bytes": 5},
    })
    assert configs.for_topic("orders").compact and configs.for_topic("orders").retention_ms == 1000
    assert configs.for_topic("a.b")["log.cleaner.threads"] == 2
    assert configs.for_topic("clicks").retention_bytes == 5
    assert configs.for_topic("other").retention_ms == 1000
    assert pickle.loads(pickle.dumps(configs)).as_dict() == configs.as_dict()


def test_topic_configs_from_properties_file(tmp_path):
    path = tmp_path / "audit.properties"
    path.write_text("# comment\nretention.bytes=100\nlogs.retention.ms = 5\n")
    configs = TopicConfigs.load(path)
    assert configs.for_topic("logs").retention_ms == 5
    assert configs.for_topic("logs").retention_bytes == 100


def test_topic_configs_reject_unknown_keys_and_bad_values(tmp_path):
    with pytest.raises(InvalidConfigError, match="unknown config key"):
        TopicConfigs.load({"colour": "blue"})
    with pytest.raises(InvalidConfigError, match="retention.ms"):
        TopicConfigs.load({"t.retention.ms": "soon"})
    with pytest.raises(InvalidConfigError, match="cannot read"):
        TopicConfigs.load(tmp_path / "missing.properties")

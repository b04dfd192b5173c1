"""The config options of the CLI (`--config KEY=VALUE`, `--config-file`, `--assume-defaults`)
and stored topic configs: `retention` and `compact` refuse a copied Kafka directory that has no
configs, change no file doing so, and use the configs LogManager stored."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from logstore.cli import main
from logstore.clock import ManualClock
from logstore.manager import LogManager
from logstore.topic_configs import stored_topic_configs
from tests.support.files import directory_digest
from tests.support.paths import KAFKA_LOGDIR

SAMPLE = KAFKA_LOGDIR
FAR_FUTURE = 1_700_000_000_000 + 10 * 365 * 86_400_000  # past every retention default


@pytest.fixture
def kafka_dir(tmp_path) -> Path:
    shutil.copytree(SAMPLE, tmp_path / "logdir")
    return tmp_path / "logdir"


@pytest.mark.parametrize("command", [["retention", "--now", str(FAR_FUTURE)], ["compact"],
                                     ["compact", "--now", str(FAR_FUTURE)]])
@pytest.mark.parametrize("target", ["", "plain-0"])
def test_writing_commands_refuse_a_copied_directory_without_configs(kafka_dir, command, target, capsys):
    before = directory_digest(kafka_dir)
    assert main([*command, str(kafka_dir / target)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("logstore: error: topic 'plain' has no stored configs")
    assert "--assume-defaults" in err and "--config" in err
    assert directory_digest(kafka_dir) == before


def test_dry_runs_still_run_and_say_which_configs_they_assumed(kafka_dir, capsys):
    before = directory_digest(kafka_dir)
    assert main(["retention", "--dry-run", "--now", str(FAR_FUTURE), str(kafka_dir)]) == 0
    out = capsys.readouterr().out
    assert "would delete 7 segment(s)" in out
    assert "configs: Kafka's defaults, assumed: none stored or given" in out
    assert main(["compact", "--dry-run", "--json", str(kafka_dir)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["configs"] == ("Kafka's defaults with cleanup.policy=compact, assumed: "
                                 "none stored or given")
    assert directory_digest(kafka_dir) == before


def test_assume_defaults_or_given_configs_let_retention_run(kafka_dir, capsys):
    assert main(["retention", "--now", str(FAR_FUTURE), "--config", "retention.ms=-1", str(kafka_dir)]) == 0
    assert "deleted 0 segment(s)" in capsys.readouterr().out
    assert main(["retention", "--now", str(FAR_FUTURE), "--assume-defaults", str(kafka_dir)]) == 0
    out = capsys.readouterr().out
    assert "deleted 7 segment(s)" in out and "(--assume-defaults)" in out


def test_a_config_file_with_per_topic_keys(kafka_dir, tmp_path, capsys):
    props = tmp_path / "topics.properties"
    props.write_text("other.retention.ms=1\nplain.retention.ms=-1\nplain.retention.bytes=-1\n")
    assert main(["retention", "--now", str(FAR_FUTURE), "--config-file", str(props), str(kafka_dir)]) == 0
    assert "deleted 0 segment(s)" in capsys.readouterr().out
    # --config wins over the file
    assert main(["retention", "--dry-run", "--now", str(FAR_FUTURE), "--config-file", str(props),
                 "--config", "plain.retention.ms=1000", str(kafka_dir)]) == 0
    assert "would delete 7 segment(s)" in capsys.readouterr().out
    assert main(["retention", "--config-file", str(tmp_path / "missing"), str(kafka_dir)]) == 2
    assert "cannot read --config-file" in capsys.readouterr().err
    props.write_text("plain.segment.bytes=0\n")
    assert main(["retention", "--config-file", str(props), str(kafka_dir)]) == 2
    assert "plain.segment.bytes: 0 is below" in capsys.readouterr().err


def test_stored_configs_keep_a_compacted_topic_from_time_retention(tmp_path, capsys):
    clock = ManualClock(1_700_000_000_000)
    with LogManager(tmp_path, clock=clock) as manager:
        log = manager.get_or_create("users", 0, {"cleanup.policy": "compact", "segment.bytes": 300})
        for i in range(40):
            log.append([(b"k%d" % (i % 4), b"v" * 30)])
        segments = len(log.segments)
    assert main(["retention", "--now", str(FAR_FUTURE), str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "deleted 0 segment(s)" in out and "configs: stored" in out
    assert main(["compact", "--now", str(FAR_FUTURE), str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "removed 35 of 39 records" in out and "configs: stored" in out
    assert segments > 1


def test_compact_skips_a_topic_stored_as_delete_only(tmp_path, capsys):
    with LogManager(tmp_path) as manager:
        manager.get_or_create("clicks", 0).append([(b"k", b"v")])
    assert main(["compact", str(tmp_path)]) == 0
    assert "clicks-0: skipped, not a compacted topic (cleanup.policy=delete" in capsys.readouterr().out


def test_produce_stores_the_configs_of_a_topic_it_creates(tmp_path, capsys, monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO('{"key": "a", "value": "1"}\n'))
    assert main(["produce", str(tmp_path), "orders-0", "--config", "cleanup.policy=compact"]) == 0
    assert stored_topic_configs(tmp_path, "orders") == {"cleanup.policy": "compact"}
    monkeypatch.setattr("sys.stdin", io.StringIO('{"key": "a", "value": "2"}\n'))
    assert main(["produce", str(tmp_path), "orders-0", "--config", "segment.bytes=100000"]) == 0
    assert stored_topic_configs(tmp_path, "orders") == {"cleanup.policy": "compact"}  # not changed
    capsys.readouterr()

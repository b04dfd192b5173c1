"""`logstore retention DIR [--now MS] [--dry-run] [--json] [--config K=V]` on a copy of Kafka's sample."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from logstore.cli import main
from tests.support.files import directory_digest
from tests.support.paths import KAFKA_LOGDIR

SAMPLE = KAFKA_LOGDIR
# Largest timestamps of the sample's segments 0 and 105 (from its .timeindex files).
TS_0, TS_105 = 1700000103000, 1700000210000


@pytest.fixture
def data_dir(tmp_path) -> Path:
    shutil.copytree(SAMPLE, tmp_path / "logdir")
    return tmp_path / "logdir"


def test_dry_run_prints_the_plan_as_a_table_and_changes_nothing(data_dir, capsys):
    before = directory_digest(data_dir)
    now = TS_105 + 1  # retention.ms=1000: segment 0 is older than that, 105 is not
    assert main(["retention", "--dry-run", "--now", str(now), "--config", "retention.ms=1000", str(data_dir)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("plain-0: would delete 1 segment(s), 16268 of 110372 bytes; log start offset 0 -> 105")
    assert out[1].split() == ["base", "offset", "next", "offset", "size", "largest", "timestamp", "reason"]
    assert out[2].split() == ["0", "105", "16268", "2023-11-14T22:15:03.000Z", "retention.ms"]
    assert len(out) == 3
    assert directory_digest(data_dir) == before


def test_json_lists_every_deletion_with_its_reason(data_dir, capsys):
    args = ["retention", "--dry-run", "--json", "--now", str(TS_0),
            "--config", "retention.bytes=60000", str(data_dir / "plain-0")]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["dryRun"] is True
    assert report["newLogStartOffset"] == 318
    assert report["bytesReclaimed"] == 16268 + 16106 + 16350
    assert [(d["baseOffset"], d["reason"]) for d in report["deletions"]] == [
        (0, "retention.bytes"), (105, "retention.bytes"), (211, "retention.bytes")]
    assert report["rollActiveFirst"] is False


def test_without_dry_run_segments_are_renamed_deleted(data_dir, capsys):
    args = ["retention", "--now", str(TS_105 + 1), "--config", "retention.ms=1000", str(data_dir / "plain-0")]
    assert main(args) == 0
    assert capsys.readouterr().out.startswith("plain-0: deleted 1 segment(s)")
    names = sorted(p.name for p in (data_dir / "plain-0").iterdir())
    assert "00000000000000000000.log.deleted" in names
    assert "00000000000000000000.log" not in names
    assert (data_dir / "log-start-offset-checkpoint").read_text().splitlines()[2] == "plain 0 105"
    # Nothing left to do on a second run.
    assert main(args) == 0
    assert "deleted 0 segment(s)" in capsys.readouterr().out


def test_nothing_to_delete_prints_only_the_summary(data_dir, capsys):
    assert main(["retention", "--dry-run", "--now", str(TS_0), str(data_dir)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [out[0]] and "would delete 0 segment(s)" in out[0]


@pytest.mark.parametrize("args", [["--config", "retention.ms"], ["--config", "retention.hours=1"],
                                  ["--now", "-5"]])
def test_bad_options_are_usage_errors(data_dir, args, capsys):
    assert main(["retention", "--dry-run", *args, str(data_dir)]) == 2


def test_directory_without_partitions_is_not_a_log_error(tmp_path, capsys):
    assert main(["retention", "--dry-run", str(tmp_path)]) == 3
    assert "is not a log directory" in capsys.readouterr().err


def test_missing_directory_is_an_error(tmp_path, capsys):
    assert main(["retention", "--dry-run", str(tmp_path / "nope-0")]) == 3
    assert "nope-0" in capsys.readouterr().err

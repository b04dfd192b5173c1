"""`logstore compact DIR [--dry-run]`."""

from __future__ import annotations

import json

from logstore import Log
from logstore.cli import main
from logstore.clock import ManualClock


def _make(path):
    log = Log.open(path, {"cleanup.policy": "compact", "segment.bytes": 1024}, clock=ManualClock(10**12))
    for i in range(100):
        log.append([(b"k%d" % (i % 5), b"v%d" % i)])
    log.roll()
    log.close()


def _files(path):
    return {p.name: p.read_bytes() for p in path.iterdir() if p.is_file() and p.name != ".lock"}


def test_dry_run_reports_and_changes_nothing(tmp_path, capsys):
    part = tmp_path / "users-0"
    _make(part)
    before = _files(part)
    assert main(["compact", "--dry-run", "--json", str(part)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["partition"] == "users-0" and out["dryRun"] is True
    assert out["recordsRemoved"] == 95 and out["removedByReason"]["duplicate"] == 95
    assert _files(part) == before
    assert not (tmp_path / "cleaner-offset-checkpoint").exists()


def test_compact_cleans_every_partition_of_a_data_directory(tmp_path, capsys):
    _make(tmp_path / "a-0")
    _make(tmp_path / "b-3")
    assert main(["compact", "--assume-defaults", str(tmp_path)]) == 0  # no stored configs here
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == ["a-0", "b-3"]
    assert "removed 95 of 100 records" in out[0]
    log = Log.open(tmp_path / "a-0", {"cleanup.policy": "compact"})
    assert [r.value for r in log.records()] == [b"v95", b"v96", b"v97", b"v98", b"v99"]
    log.close()
    assert (tmp_path / "cleaner-offset-checkpoint").read_text().splitlines()[2:] == ["a 0 100", "b 3 100"]


def test_bad_config_is_a_usage_error(tmp_path, capsys):
    _make(tmp_path / "a-0")
    assert main(["compact", "--config", "nonsense", str(tmp_path / "a-0")]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err
    assert main(["compact", str(tmp_path / "missing")]) == 3

"""What an operator meets around the commands: `--version`, an option typo answered with its
subcommand's usage, `verify` of directories that only look like partitions, progress bars that
stay off a terminal the command writes its lines to."""

from __future__ import annotations

import sys

import pytest

from logstore.cli import main
from logstore.cli._common import Progress


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip().split()[0] == "logstore"


@pytest.mark.parametrize("command", ["retention", "compact", "verify", "audit"])
def test_an_option_typo_shows_the_subcommands_usage(command, capsys):
    assert main([command, "--dryrun", "x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: logstore {command} ")
    assert f"logstore {command}: error: unrecognized arguments: --dryrun" in err


def test_verify_of_directories_that_only_look_like_partitions_is_nothing_to_verify(tmp_path, capsys):
    (tmp_path / "rc-0").mkdir()
    (tmp_path / "rc-0" / "notes.txt").write_text("not a log")
    assert main(["verify", str(tmp_path)]) == 3
    assert capsys.readouterr().err == f"logstore: error: nothing to verify in {tmp_path}: no log, index or checkpoint files\n"


@pytest.mark.parametrize("stdout_tty, bar", [(True, False), (False, True)])
def test_a_progress_bar_that_would_overwrite_output_lines_stays_off(monkeypatch, stdout_tty, bar):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: stdout_tty)
    with Progress(total=1, desc="recover", quiet_when_stdout_tty=True) as progress:
        assert (progress._bar is not None) == bar


def test_config_options_have_one_meaning_in_every_command():
    import argparse

    from logstore.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    seen = []
    for name, command in commands.items():
        options = {option: action for action in command._actions for option in action.option_strings}
        if "--config" in options:
            assert options["--config"].metavar == "KEY=VALUE" and isinstance(options["--config"], argparse._AppendAction), name
            seen.append(name)
        if "--config-file" in options:
            assert options["--config-file"].metavar == "FILE", name
    assert {"produce", "retention", "compact", "audit", "recover"} <= set(seen)

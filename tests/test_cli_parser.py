"""The top-level parser: `--version`, and an option typo answered with its subcommand's usage."""

from __future__ import annotations

import pytest

from logstore.cli import main


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip().split()[0] == "logstore"


@pytest.mark.parametrize("command", ["retention", "compact", "verify", "audit"])
def test_an_option_typo_shows_the_subcommands_usage(command, capsys):
    assert main([command, "--dryrun", "x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: logstore {command} ")
    assert f"logstore {command}: error: unrecognized arguments: --dryrun" in err

"""What every subcommand shares: exit codes, the usage error, output helpers and progress bars."""

from __future__ import annotations

import argparse
import json
import sys
from enum import IntEnum
from typing import Any, TextIO


class ExitCode(IntEnum):
    """The documented exit codes of every `logstore` subcommand."""

    OK = 0  # done, nothing wrong found
    PROBLEMS = 1  # done, and the data has problems (corruption, mismatches, a torn tail)
    USAGE = 2  # bad command line or option values (argparse uses 2 as well)
    ERROR = 3  # could not do the job: missing or unreadable file, not a log, I/O error, lock held
    BROKEN_PIPE = 141  # stdout was closed early (`| head`), as a SIGPIPE death would report
    INTERRUPTED = 130  # Ctrl-C


class UsageError(Exception):
    """A command line that parses but asks for something impossible (exit code 2)."""


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Help text keeps the examples' line breaks and shows defaults."""


def add_command(
    subparsers: argparse._SubParsersAction, name: str, *, help: str, description: str, example: str
) -> argparse.ArgumentParser:
    """Create a subcommand parser with the common options (`--debug`) and an example epilog."""
    parser = subparsers.add_parser(
        name,
        help=help,
        description=description,
        epilog=f"example:\n  {example}\n\nexit codes: 0 ok, 1 problems found, 2 usage error, 3 error",
        formatter_class=Formatter,
    )
    parser.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show a traceback on errors"
    )
    return parser


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {value}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    value = non_negative_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be >= 1: 0")
    return value


def int32(text: str) -> int:
    """argparse type: an integer in [0, 2**31 - 1] (Kafka's int options)."""
    value = non_negative_int(text)
    if value > 2**31 - 1:
        raise argparse.ArgumentTypeError(f"must be <= 2147483647: {value}")
    return value


def write_json(out: TextIO, obj: Any) -> None:
    """One compact JSON object per line (JSON Lines)."""
    out.write(json.dumps(obj, separators=(",", ":"), ensure_ascii=False))
    out.write("\n")


class Progress:
    """A tqdm bar on stderr when stderr is a terminal; otherwise every call does nothing.

    With `quiet_when_stdout_tty`, no bar either when stdout is a terminal too (it would
    interleave with the command's own output).
    """

    def __init__(self, *, total: int | None, desc: str, unit: str = "it", unit_scale: bool = False,
                 quiet_when_stdout_tty: bool = False):
        self._bar = None
        if sys.stderr.isatty() and not (quiet_when_stdout_tty and sys.stdout.isatty()):
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=desc, unit=unit, unit_scale=unit_scale,
                             file=sys.stderr, leave=False)

    def update(self, n: int = 1) -> None:
        """Advance the bar by `n`."""
        if self._bar is not None:
            self._bar.update(n)

    def close(self) -> None:
        """Remove the bar from the terminal."""
        if self._bar is not None:
            self._bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

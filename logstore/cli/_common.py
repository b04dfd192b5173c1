"""What every subcommand shares: exit codes, the usage error, output helpers and progress bars."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from logstore.config import LogConfig
    from logstore.errors import CorruptRecordError


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
    from logstore.config import INT_MAX

    return _at_most(non_negative_int(text), INT_MAX)


def int64(text: str) -> int:
    """argparse type: an integer in [0, 2**63 - 1] (offsets, timestamps in ms)."""
    from logstore.config import LONG_MAX

    return _at_most(non_negative_int(text), LONG_MAX)


def _at_most(value: int, high: int) -> int:
    if value > high:
        raise argparse.ArgumentTypeError(f"must be <= {high}: {value}")
    return value


def add_partition_arguments(parser: argparse.ArgumentParser) -> None:
    """The `DIR TOPIC-PARTITION` positionals of a command that works on one partition."""
    parser.add_argument("data_dir", metavar="DIR", help="data directory (holds <topic>-<partition>)")
    parser.add_argument("topic_partition", metavar="TOPIC-PARTITION", help="e.g. orders-0")


def partition_path(args: argparse.Namespace) -> Path:
    """DIR/TOPIC-PARTITION of `add_partition_arguments`; UsageError when it is not `<topic>-<n>`."""
    from logstore.errors import InvalidTopicError
    from logstore.log_files import parse_partition_dir, partition_dir_name

    try:
        topic, partition = parse_partition_dir(args.topic_partition)
    except InvalidTopicError as exc:
        raise UsageError(str(exc)) from None
    return Path(args.data_dir) / partition_dir_name(topic, partition)


def parse_config_options(items: list[str], defaults: dict[str, str] | None = None) -> LogConfig:
    """`--config KEY=VALUE` strings over `defaults` -> LogConfig; UsageError naming a bad one."""
    from logstore.config import LogConfig
    from logstore.errors import InvalidConfigError

    configs = dict(defaults or {})
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--config expects KEY=VALUE, got {item!r}")
        configs[key.strip()] = value.strip()
    try:
        return LogConfig(configs)
    except InvalidConfigError as exc:
        raise UsageError(f"--config {exc}") from None


def partition_dirs(paths: list[str]) -> list[Path]:
    """Partition directories named by `paths`, or found one level below a data directory.

    Raises FileNotFoundError / NotADirectoryError, or LogstoreError for a directory that is
    neither a `<topic>-<partition>` directory nor holds any.
    """
    from logstore.errors import LogstoreError
    from logstore.log_files import is_partition_dir_name

    def is_partition(path: Path) -> bool:
        return is_partition_dir_name(path.name) and path.is_dir()

    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise FileNotFoundError(2, "No such file or directory", str(path))
        if not path.is_dir():
            raise NotADirectoryError(20, "Not a directory", str(path))
        if is_partition(path.resolve()):
            found.append(path)
            continue
        children = [c for c in sorted(path.iterdir()) if is_partition(c)]
        if not children:
            raise LogstoreError(f"{path} is not a log directory: no partition directories "
                                "(<topic>-<partition>) in it")
        found += children
    return found


def corruption_detail(exc: CorruptRecordError) -> str:
    """The message of `exc` without the `(file, position N)` suffix its constructor adds."""
    where = [str(exc.path)] if exc.path is not None else []
    where += [f"position {exc.position}"] if exc.position is not None else []
    return str(exc).removesuffix(f" ({', '.join(where)})") if where else str(exc)


@contextlib.contextmanager
def naming_file(path: str | os.PathLike[str]) -> Iterator[None]:
    """Re-raise a CorruptRecordError that does not name its file with `path` added."""
    from logstore.errors import CorruptRecordError

    try:
        yield
    except CorruptRecordError as exc:
        if exc.path is not None:
            raise
        raise CorruptRecordError(corruption_detail(exc), path=str(path), position=exc.position) from exc


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

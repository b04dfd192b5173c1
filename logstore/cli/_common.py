"""What every subcommand shares: exit codes, the usage error, output helpers and progress bars."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
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


def add_config_arguments(parser: argparse.ArgumentParser, *, assume_defaults: bool = True) -> None:
    """The config options, one meaning in every command: `--config KEY=VALUE` (repeatable),
    `--config-file FILE` (.properties) and, where data could go, `--assume-defaults`."""
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a config with Kafka's name (retention.ms=86400000), or <topic>.<name>=VALUE "
                             "for one topic; repeatable; wins over --config-file and stored configs")
    parser.add_argument("--config-file", metavar="FILE",
                        help="a .properties file of configs (the keys --config takes)")
    if assume_defaults:
        parser.add_argument("--assume-defaults", action="store_true",
                            help="give topics without stored or given configs Kafka's defaults "
                                 "(without it they are refused)")


@dataclass(frozen=True)
class GivenConfigs:
    """The configs a command line gives: for every topic, per topic, and whether Kafka's
    defaults stand for the configs of topics that have none."""

    every_topic: dict[str, str] = field(default_factory=dict)
    per_topic: dict[str, dict[str, str]] = field(default_factory=dict)
    assume_defaults: bool = False

    def for_topic(self, topic: str) -> dict[str, str]:
        """The given keys that apply to `topic` (its own win)."""
        return {**self.every_topic, **self.per_topic.get(topic, {})}


@dataclass(frozen=True)
class TopicConfig:
    """The config a command uses for one partition, where it came from, and whether anyone
    chose it (stored, given or defaults accepted) rather than it being assumed."""

    config: LogConfig
    source: str
    known: bool


def given_configs(args: argparse.Namespace) -> GivenConfigs:
    """`--config-file` then `--config` items -> GivenConfigs; UsageError naming a bad one."""
    from logstore.config import LogConfig, parse_properties
    from logstore.errors import InvalidConfigError
    from logstore.topic_configs import split_topic_key

    items: list[tuple[str, str, str]] = []  # (option, key, value)
    if getattr(args, "config_file", None):
        try:
            text = Path(args.config_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot read --config-file {args.config_file}: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise UsageError(f"--config-file {args.config_file}: not UTF-8 text (byte {exc.start})") from None
        items += [(f"--config-file {args.config_file}:", k, v) for k, v in parse_properties(text).items()]
    for item in args.config:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--config expects KEY=VALUE, got {item!r}")
        items.append(("--config", key.strip(), value.strip()))
    every: dict[str, str] = {}
    per_topic: dict[str, dict[str, str]] = {}
    for option, key, value in items:
        topic, name = split_topic_key(key)
        try:
            LogConfig({name: value})
        except InvalidConfigError as exc:
            raise UsageError(f"{option} {topic + '.' if topic else ''}{exc}") from None
        (every if topic is None else per_topic.setdefault(topic, {}))[name] = value
    return GivenConfigs(every, per_topic, bool(getattr(args, "assume_defaults", False)))


def topic_config(given: GivenConfigs, partition: Path, assumed: Mapping[str, str] | None = None) -> TopicConfig:
    """The config for `partition`: its topic's stored configs (in the parent directory) with the
    given keys over them; without stored configs, the given keys over `assumed` (Kafka's
    defaults plus what the command assumes), known only when keys were given or defaults accepted."""
    from logstore.config import LogConfig
    from logstore.errors import InvalidConfigError
    from logstore.log_files import parse_partition_dir
    from logstore.topic_configs import stored_topic_configs

    topic, _ = parse_partition_dir(partition.name)
    stored = stored_topic_configs(partition.parent, topic)
    passed = given.for_topic(topic)
    extra = {k: v for k, v in (assumed or {}).items() if k not in passed}
    defaults = "Kafka's defaults" + (" with " + ", ".join(f"{k}={v}" for k, v in extra.items()) if extra else "")
    if stored is not None:
        values, source, known = {**stored, **passed}, "stored" + (" + given" if passed else ""), True
    elif passed:
        values, source, known = {**extra, **passed}, "given" + (f" over {defaults}" if extra else ""), True
    elif given.assume_defaults:
        values, source, known = extra, f"{defaults} (--assume-defaults)", True
    else:
        values, source, known = extra, f"{defaults}, assumed: none stored or given", False
    try:
        return TopicConfig(LogConfig(values), source, known)
    except InvalidConfigError as exc:
        raise UsageError(f"configs of topic {topic!r}: {exc}") from None


def require_known_configs(resolved: list[tuple[Path, TopicConfig]], action: str) -> None:
    """UsageError (one line, naming the topics) when any partition's configs were only assumed."""
    from logstore.log_files import parse_partition_dir
    from logstore.topic_configs import TOPIC_CONFIGS_FILE

    unknown = sorted({parse_partition_dir(path.name)[0] for path, tc in resolved if not tc.known})
    if not unknown:
        return
    names = ", ".join(repr(t) for t in unknown)
    dirs = ", ".join(sorted({str(path.parent) for path, tc in resolved if not tc.known}))
    raise UsageError(f"{'topic' if len(unknown) == 1 else 'topics'} {names} "
                     f"{'has' if len(unknown) == 1 else 'have'} no stored configs ({TOPIC_CONFIGS_FILE} "
                     f"in {dirs}): {action} refused; give them with --config KEY=VALUE or --config-file "
                     "FILE, or accept Kafka's defaults with --assume-defaults")


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
    return exc.detail


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

"""The `logstore` command line: one subcommand per module in this package.

Adding a subcommand is a one-module affair: create `logstore/cli/<name>.py` with

    def register(subparsers) -> None:
        parser = add_command(subparsers, "<name>", help=..., description=..., example=...)
        parser.add_argument(...)
        parser.set_defaults(run=run)

    def run(args) -> int:
        ...  # return an ExitCode

(`add_command` and `ExitCode` live in `logstore.cli._common`). Every public module of the
package that defines `register` is found and registered at start-up, so nothing else needs
editing. Keep heavy imports (numpy, pyarrow, the engine) inside `run`, so `--help` stays fast.

Errors: a subcommand raises; `main` turns any LogstoreError or OSError into one line
`logstore: error: ...` on stderr (the traceback only with `--debug`) and an exit code:

    0    ok
    1    problems found in the data (corruption, index mismatches, a torn tail)
    2    usage error (bad option values, impossible requests)
    3    error: the job could not be done (missing or unreadable file, not a log, I/O error)
    130  interrupted (Ctrl-C)
    141  stdout closed early (e.g. piped into `head`)
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import pkgutil
import sys
import traceback

from logstore.cli._common import ExitCode, Formatter, UsageError
from logstore.errors import (
    CorruptCheckpointError,
    CorruptIndexError,
    CorruptRecordError,
    CorruptSnapshotError,
    LogstoreError,
)

# Errors that mean "the data is damaged" (exit 1) rather than "could not run" (exit 3).
CORRUPTION_ERRORS = (CorruptRecordError, CorruptIndexError, CorruptSnapshotError, CorruptCheckpointError)


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand module of this package registered."""
    parser = argparse.ArgumentParser(
        prog="logstore",
        description="Inspect, verify, recover and use Kafka-compatible log directories.",
        epilog=(
            "example:\n  logstore dump --deep-iteration --print-data-log --files 00000000000000000000.log\n\n"
            "exit codes: 0 ok, 1 problems found, 2 usage error, 3 error, 130 interrupted, "
            "141 broken pipe"
        ),
        formatter_class=Formatter,
    )
    parser.add_argument("--debug", action="store_true", help="show a traceback on errors")
    parser.add_argument("--version", action="version", version=f"logstore {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(subparsers)
    return parser


def _version() -> str:
    """The installed package's version (the source tree's, when run from it uninstalled)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("logstore")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse `argv`; an unknown option is reported with the usage of the subcommand it was
    given to (argparse would show the top-level usage)."""
    args, extras = parser.parse_known_args(argv)
    if extras:
        choices = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
        subparser = choices.get(getattr(args, "command", None), parser)
        subparser.error(f"unrecognized arguments: {' '.join(extras)}")
    return args


def _describe(exc: BaseException) -> str:
    """A one-line message for an error, naming the file for OS errors."""
    if isinstance(exc, OSError) and exc.strerror:
        name = exc.filename if exc.filename is not None else ""
        return f"{exc.strerror}: {name}" if name else exc.strerror
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())


def main(argv: list[str] | None = None) -> int:
    """Run the `logstore` command with `argv` (default: sys.argv[1:]); return the exit code."""
    parser = build_parser()
    try:
        args = _parse(parser, argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return int(exc.code or 0)
    debug = getattr(args, "debug", False)
    try:
        return int(args.run(args))
    except UsageError as exc:
        return _fail(f"{exc}", ExitCode.USAGE, debug)
    except KeyboardInterrupt:
        return _fail("interrupted", ExitCode.INTERRUPTED, debug)
    except BrokenPipeError:
        # Point stdout at /dev/null so the interpreter's final flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return ExitCode.BROKEN_PIPE
    except CORRUPTION_ERRORS as exc:
        return _fail(_describe(exc), ExitCode.PROBLEMS, debug)
    except (LogstoreError, OSError) as exc:
        return _fail(_describe(exc), ExitCode.ERROR, debug)
    except Exception as exc:  # a bug: still one line, the traceback under --debug
        return _fail(f"internal error: {type(exc).__name__}: {_describe(exc)}"
                     " (run with --debug for the traceback)", ExitCode.ERROR, debug)


def _fail(message: str, code: ExitCode, debug: bool) -> int:
    """Print the traceback (under --debug) and the one-line error; return `code`."""
    with contextlib.suppress(OSError):  # stdout may be a closed pipe by now
        sys.stdout.flush()
    if debug:
        traceback.print_exc()
    print(f"logstore: error: {message}", file=sys.stderr)
    return code

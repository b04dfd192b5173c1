"""`logstore recover`: run Kafka's log recovery on a copy (the default) or in place.

Without --in-place the partition directory is copied to a temporary directory, recovered
there with the engine's own code, and the differences are reported as what recovery would
do; the original is never opened for writing. With --in-place the directory itself is
recovered (taking its lock, so not while another process owns it).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from logstore.cli._common import ExitCode, Progress, add_command, partition_dirs, write_json
from logstore.errors import LogstoreError
from logstore.lock import LOCK_FILE_NAME
from logstore.log_files import LOG_SUFFIX, SNAPSHOT_SUFFIX

IGNORED = {LOCK_FILE_NAME}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `logstore recover`."""
    parser = add_command(
        subparsers, "recover",
        help="run log recovery on a copy and report what it would truncate (--in-place to apply)",
        description=(
            "Recover partition directories as Kafka does after an unclean shutdown: validate every\n"
            "batch, truncate a torn or corrupt tail, drop the later segments, rebuild the indexes and\n"
            "the producer state. By default this runs on a temporary copy and only reports the\n"
            "changes; --in-place applies them. Exit 0 when nothing needed recovering, 1 when\n"
            "something did."
        ),
        example="logstore recover /var/lib/kafka/data/orders-0",
    )
    parser.add_argument("paths", nargs="+", metavar="DIR", help="data or partition directories")
    parser.add_argument("--in-place", action="store_true",
                        help="recover the directory itself instead of a copy")
    parser.add_argument("--json", action="store_true", help="one JSON object per change")
    parser.set_defaults(run=run)


@dataclass(frozen=True)
class FileState:
    """Size and content hash of one file."""

    size: int
    sha256: str


def snapshot_dir(path: Path) -> dict[str, FileState]:
    """Name -> state of every regular file in a partition directory."""
    states = {}
    for entry in os.scandir(path):
        if entry.is_file() and entry.name not in IGNORED:
            digest = hashlib.sha256()
            with open(entry.path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):  # noqa: B023 - f is this loop's file
                    digest.update(chunk)
            states[entry.name] = FileState(entry.stat().st_size, digest.hexdigest())
    return states


def changes(before: dict[str, FileState], after: dict[str, FileState]) -> list[dict[str, Any]]:
    """What recovery changed, one dict per file: truncate, delete, rewrite or create."""
    found = []
    for name in sorted(before.keys() | after.keys()):
        old, new = before.get(name), after.get(name)
        if old == new:
            continue
        if new is None:
            found.append({"file": name, "action": "delete", "bytes": old.size})
        elif old is None:
            found.append({"file": name, "action": "create", "bytes": new.size})
        elif name.endswith(LOG_SUFFIX) and new.size < old.size:
            found.append({"file": name, "action": "truncate", "position": new.size,
                          "bytes": old.size - new.size})
        else:
            found.append({"file": name, "action": "rewrite", "bytes": new.size})
    return found


def is_repair(change: dict[str, Any]) -> bool:
    """True for changes that fix damage: not the snapshot Kafka writes at every close, nor the
    empty first segment it creates in an empty partition directory."""
    created = change["action"] == "create"
    return not (created and (change["file"].endswith(SNAPSHOT_SUFFIX) or change["bytes"] == 0))


def recover_partition(path: Path) -> int:
    """Open `path` read-write with full recovery (from offset 0, as after a crash) and close it."""
    from logstore.checkpoint import LOG_START_OFFSET_CHECKPOINT, read_offsets_checkpoint
    from logstore.log import Log
    from logstore.log_files import parse_partition_dir
    from logstore.log_loader import LoadState

    key = parse_partition_dir(path.name)
    start = read_offsets_checkpoint(path.parent / LOG_START_OFFSET_CHECKPOINT).get(key, 0)
    state = LoadState(recovery_point=0, log_start_offset=start, clean_shutdown=False)
    log = Log.open(path, load_state=state)
    recovered = log.recovered_bytes
    log.close()
    return recovered


def copy_partition(source: Path, target_parent: Path) -> Path:
    """Copy the partition directory's regular files (writable, whatever the source's modes)."""
    from logstore.checkpoint import LOG_START_OFFSET_CHECKPOINT

    target = target_parent / source.name
    target.mkdir()
    for entry in os.scandir(source):
        if entry.is_file() and entry.name not in IGNORED:
            shutil.copyfile(entry.path, target / entry.name)
    checkpoint = source.parent / LOG_START_OFFSET_CHECKPOINT
    if checkpoint.is_file():
        shutil.copyfile(checkpoint, target_parent / LOG_START_OFFSET_CHECKPOINT)
    return target


def run(args: argparse.Namespace) -> int:
    """Recover each partition (on a copy unless --in-place) and report the changes."""
    partitions = partition_dirs(args.paths)
    repairs = 0
    verb = {"truncate": "truncated", "delete": "deleted", "rewrite": "rebuilt", "create": "created"}
    would = {"truncate": "would truncate", "delete": "would delete", "rewrite": "would rebuild",
             "create": "would create"}
    with Progress(total=len(partitions), desc="recover", unit="partition", quiet_when_stdout_tty=True) as bar:
        for path in partitions:
            before = snapshot_dir(path)
            if args.in_place:
                recover_partition(path)
                after = snapshot_dir(path)
            else:
                with tempfile.TemporaryDirectory(prefix="logstore-recover-") as tmp:
                    copy = copy_partition(path, Path(tmp))
                    try:
                        recover_partition(copy)
                    except LogstoreError as exc:  # name the user's file, not the temporary copy
                        exc.args = (str(exc).replace(str(copy), str(path)),)
                        raise
                    after = snapshot_dir(copy)
            found = changes(before, after)
            repairs += sum(is_repair(c) for c in found)
            words = verb if args.in_place else would
            for change in found:
                if args.json:
                    write_json(sys.stdout, {"partition": str(path), "applied": args.in_place, **change})
                elif change["action"] == "truncate":
                    sys.stdout.write(f"{path / change['file']}: {words['truncate']} {change['bytes']} "
                                     f"bytes at position {change['position']}\n")
                else:
                    size = "now" if change["action"] in ("rewrite", "create") else "was"
                    sys.stdout.write(f"{path / change['file']}: {words[change['action']]} "
                                     f"({size} {change['bytes']} bytes)\n")
            if not found and not args.json:
                sys.stdout.write(f"{path}: nothing to recover\n")
            bar.update(1)
    sys.stdout.flush()
    return ExitCode.PROBLEMS if repairs else ExitCode.OK

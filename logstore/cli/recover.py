"""`logstore recover`: run Kafka's log recovery on a copy and apply only what needs it.

Every partition is copied to a temporary directory and recovered there with the engine's own
code, from the recovery point in the data directory's checkpoint (as Kafka's LogLoader does)
or, with --full, from the first segment. The differences that repair something are reported:
truncated or deleted segments, indexes a lookup could miss through (an index that merely
differs from ours but answers every lookup correctly is healthy and kept), leftovers of an
interrupted clean, snapshots and epochs past the recovered end. Nothing else changes: producer
snapshots Kafka wrote are kept, so no producer Kafka's recovery keeps is dropped. With
--in-place those repairs are applied to the directory itself, under its lock. Files awaiting
deletion (`.deleted`, a broker stopped during delayed deletion) are no repair: Kafka's loader
removes them on every open, so they are named in a note and removed with --in-place.
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

from logstore.cli._common import (
    ExitCode,
    Progress,
    add_command,
    add_config_arguments,
    given_configs,
    int64,
    partition_dirs,
    topic_config,
    write_json,
)
from logstore.cli.broker_files import note_skipped_dirs
from logstore.errors import LogstoreError
from logstore.lock import LOCK_FILE_NAME
from logstore.log_files import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    parse_offset_file_name,
)

IGNORED = {LOCK_FILE_NAME}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `logstore recover`."""
    parser = add_command(
        subparsers, "recover",
        help="run log recovery on a copy and report what needs repairing (--in-place to apply)",
        description=(
            "Recover partition directories as Kafka does after an unclean shutdown: from the\n"
            "recovery point in recovery-point-offset-checkpoint (every segment with --full),\n"
            "validate every batch, truncate a torn or corrupt tail, drop the later segments, rebuild\n"
            "the indexes a lookup could miss through. Runs on a temporary copy and reports the\n"
            "repairs; --in-place applies them to the directory. An index that differs from ours\n"
            "but answers every lookup is healthy and kept, and Kafka's producer snapshots are kept.\n"
            "Damage below the recovery point, where Kafka's recovery does not look, is named too.\n"
            "Configs (index.interval.bytes, segment.index.bytes, ...): each topic's stored configs\n"
            "with --config-file and --config over them, else Kafka's defaults (recovery deletes no\n"
            "data a config could keep). Files awaiting deletion (*.deleted) are routine: a note\n"
            "names them and --in-place removes them, as Kafka's loader does on open.\n"
            "Exit 0 when nothing needed recovering, 1 when something did."
        ),
        example="logstore recover --config index.interval.bytes=4096 /var/lib/kafka/data/orders-0",
    )
    parser.add_argument("paths", nargs="+", metavar="DIR", help="data or partition directories")
    parser.add_argument("--in-place", action="store_true",
                        help="apply the repairs to the directory itself instead of only reporting them")
    parser.add_argument("--full", action="store_true",
                        help="recover every segment, not only from the checkpointed recovery point")
    add_config_arguments(parser, assume_defaults=False)
    parser.add_argument("--now", type=int64, metavar="MS",
                        help="the clock recovery runs at, in ms (default: the current time)")
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


def index_answers_lookups(index: Path, recovered_log: Path) -> bool:
    """True when the offset or time index `index` answers every lookup into `recovered_log`
    correctly (verify's rules), whatever its entries: then recovery has nothing to fix there."""
    from logstore.cli.verify import (
        NoBar,
        Report,
        verify_log,
        verify_offset_index,
        verify_time_index,
    )

    scan = verify_log(recovered_log, Report(), False, NoBar())
    report = Report()
    check = verify_offset_index if index.name.endswith(INDEX_SUFFIX) else verify_time_index
    check(index, report, scan)
    return not report.problems


def epochs_reach(path: Path, log_end: int) -> bool:
    """True when the leader-epoch checkpoint at `path` does not parse or names a start offset
    at or past `log_end` (recovery truncated the log under it)."""
    from logstore.checkpoint import read_checkpoint
    from logstore.errors import CorruptCheckpointError

    try:
        entries = read_checkpoint(path, (int, int))
    except CorruptCheckpointError:
        return True
    return any(start >= log_end > 0 or start > log_end for _, start in entries)


def is_repair(change: dict[str, Any], original: Path, recovered: Path, log_end: int) -> bool:
    """True for a change that fixes something Kafka's recovery fixes: not an index that already
    answers every lookup, not a snapshot Kafka wrote (or the one written at every close), not
    the empty first segment created in an empty directory."""
    from logstore.epoch import CHECKPOINT_FILE_NAME

    name, action = change["file"], change["action"]
    if name.endswith((CLEANED_SUFFIX, SWAP_SUFFIX)):
        return True  # an interrupted deletion or clean, which Kafka's open finishes
    if name == CHECKPOINT_FILE_NAME:
        return action != "create" and epochs_reach(original / name, log_end)
    parsed = parse_offset_file_name(name)
    if parsed is None:
        return action != "create"
    offset, suffix = parsed
    if suffix == SNAPSHOT_SUFFIX:
        return action == "delete" and offset > log_end
    if action == "create" and change["bytes"] == 0:
        return False
    if suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX) and action == "rewrite":
        log_name = name[: -len(suffix)] + LOG_SUFFIX
        return not index_answers_lookups(original / name, recovered / log_name)
    return True


def recover_partition(path: Path, config: Any, now_ms: int | None, point: int, start: int) -> int:
    """Open `path` read-write, recovering as after a crash from the recovery point `point` with
    the log start offset `start`, and close it; returns its log end offset."""
    from logstore.clock import ManualClock
    from logstore.log import Log
    from logstore.log_loader import LoadState

    state = LoadState(recovery_point=point, log_start_offset=start, clean_shutdown=False)
    clock = ManualClock(now_ms) if now_ms is not None else None
    with Log.open(path, config, clock=clock, load_state=state) as log:
        return log.log_end_offset


def corrupt_snapshots(path: Path) -> set[str]:
    """Names of the producer snapshots of `path` that do not decode (version, size, CRC). Kafka
    deletes a corrupt snapshot when it loads it and rebuilds the state from the log; a snapshot
    holds nothing the log does not, so recovery deletes every corrupt one."""
    from logstore.errors import CorruptSnapshotError
    from logstore.producer_snapshot import decode_snapshot, list_snapshot_files

    corrupt = set()
    for snapshot in list_snapshot_files(path).values():
        try:
            decode_snapshot(snapshot.read_bytes(), snapshot)
        except CorruptSnapshotError:
            corrupt.add(snapshot.name)
    return corrupt


def data_dir_offsets(data_dir: Path) -> dict[str, dict[tuple[str, int], int]]:
    """The recovery points and log start offsets of `data_dir` (checkpoint name -> offsets),
    read as Kafka's LogManager reads them at start-up: a checkpoint that does not parse is
    named in a note on stderr and read as empty (recovery from offset 0, the log starting at
    its first segment). The file itself is left as it is."""
    from logstore.checkpoint import (
        LOG_START_OFFSET_CHECKPOINT,
        RECOVERY_POINT_CHECKPOINT,
        read_offsets_checkpoint,
    )
    from logstore.errors import CorruptCheckpointError

    offsets = {}
    for name, meaning in ((RECOVERY_POINT_CHECKPOINT, "every segment is recovered"),
                          (LOG_START_OFFSET_CHECKPOINT, "each log starts at its first segment")):
        try:
            offsets[name] = read_offsets_checkpoint(data_dir / name)
        except CorruptCheckpointError as exc:
            sys.stdout.flush()
            sys.stderr.write(f"logstore: note: {exc}; read as empty, as Kafka does: {meaning}\n")
            offsets[name] = {}
    return offsets


def damage_below_recovery_point(path: Path, point: int) -> list[dict[str, Any]]:
    """The segments of `path` wholly below the segment holding the checkpointed recovery point
    whose batches do not all validate (Kafka's recovery never looks there), as notes naming
    the first invalid byte; read-only."""
    import bisect

    from logstore.log_files import segment_file_name, segment_log_offsets
    from logstore.read_only_recovery import valid_extent
    from logstore.segment import LogSegment
    from logstore.segment_options import SegmentOptions

    bases = segment_log_offsets(os.listdir(path))
    found = []
    for base in bases[: max(bisect.bisect_right(bases, point) - 1, 0)]:
        segment = LogSegment.open(path, base, SegmentOptions(read_only=True))
        try:
            valid_bytes, _ = valid_extent(segment)
            if valid_bytes < segment.size:
                found.append({"file": segment_file_name(base, LOG_SUFFIX), "action": "damaged",
                              "position": valid_bytes, "recoveryPoint": point})
        finally:
            segment.close_handlers()
    return found


def check_segments_do_not_overlap(path: Path) -> None:
    """CorruptRecordError naming the batch of a segment of `path` that ends at or past the
    next segment's base offset. Recovery checks each segment on its own (as Kafka's does) and
    cannot tell whether the batch or the next file name is wrong, so it keeps both and refuses.
    A segment's scan stops at its first unreadable batch: damage below the recovery point is
    named by `damage_below_recovery_point`, not here."""
    from logstore.errors import CorruptRecordError
    from logstore.log_files import segment_log_offsets
    from logstore.segment import LogSegment
    from logstore.segment_options import SegmentOptions

    bases = segment_log_offsets(os.listdir(path))
    for base, next_base in zip(bases, bases[1:], strict=False):
        segment = LogSegment.open(path, base, SegmentOptions(read_only=True))
        try:
            overlap = next(((position, header.last_offset) for position, header in segment.batch_headers()
                            if header.last_offset >= next_base), None)
        except CorruptRecordError:
            overlap = None
        finally:
            segment.close_handlers()
        if overlap is not None:
            raise CorruptRecordError(
                f"batch ends at offset {overlap[1]}, past the next segment's base offset {next_base}; "
                "recovery cannot tell which of the two is damaged", position=overlap[0], path=str(segment.log_path))


def copy_partition(source: Path, target_parent: Path) -> Path:
    """Copy the partition directory's regular files (writable, whatever the source's modes)."""
    target = target_parent / source.name
    target.mkdir()
    for entry in os.scandir(source):
        if entry.is_file() and entry.name not in IGNORED:
            shutil.copyfile(entry.path, target / entry.name)
    return target


def apply(repairs: list[dict[str, Any]], original: Path, recovered: Path) -> None:
    """Make the repaired files of `original` what recovery made them in `recovered`, under the
    directory's lock: truncate logs in place, replace other files whole (write, fsync, rename),
    then delete; the directory is fsynced last."""
    from logstore.checkpoint import atomic_write, fsync_dir
    from logstore.lock import DirectoryLock

    with DirectoryLock(original):
        for change in repairs:
            target = original / change["file"]
            if change["action"] == "truncate":
                with open(target, "r+b") as f:
                    f.truncate(change["position"])
                    os.fsync(f.fileno())
            elif change["action"] in ("rewrite", "create"):
                atomic_write(target, (recovered / change["file"]).read_bytes())
        for change in repairs:
            if change["action"] == "delete":
                (original / change["file"]).unlink()
        fsync_dir(original)


VERB = {"truncate": "truncated", "delete": "deleted", "rewrite": "rebuilt", "create": "created"}
WOULD = {"truncate": "would truncate", "delete": "would delete", "rewrite": "would rebuild",
         "create": "would create"}


def report(path: Path, repairs: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """One line (or JSON object) per repair, or `nothing to recover`."""
    words = VERB if args.in_place else WOULD
    for change in repairs:
        if args.json:
            applied = args.in_place and change["action"] != "damaged"
            write_json(sys.stdout, {"partition": str(path), "applied": applied, **change})
        elif change["action"] == "damaged":
            sys.stdout.write(f"{path / change['file']}: damaged at position {change['position']}, below the "
                             f"recovery point {change['recoveryPoint']} (Kafka's recovery does not look there; "
                             "--full recovers it)\n")
        elif change["action"] == "truncate":
            sys.stdout.write(f"{path / change['file']}: {words['truncate']} {change['bytes']} "
                             f"bytes at position {change['position']}\n")
        else:
            size = "now" if change["action"] in ("rewrite", "create") else "was"
            sys.stdout.write(f"{path / change['file']}: {words[change['action']]} "
                             f"({size} {change['bytes']} bytes)\n")
    if not repairs and not args.json:
        sys.stdout.write(f"{path}: nothing to recover\n")


def note_pending_deletions(path: Path, pending: list[dict[str, Any]], in_place: bool) -> None:
    """Say on stderr that `path`'s files awaiting deletion go (or would go) as Kafka's loader
    removes them on open: routine after a stop during delayed deletion, not a repair."""
    if pending:
        verb = "removed" if in_place else "would remove"
        sys.stdout.flush()
        sys.stderr.write(f"logstore: note: {path}: {verb} {len(pending)} files awaiting deletion "
                         f"(*{DELETED_SUFFIX}), as Kafka's loader does on open\n")


def run(args: argparse.Namespace) -> int:
    """Recover each partition on a copy, report the repairs and apply them with --in-place. A
    partition that cannot be recovered is one error line on stderr, and the others go on."""
    given = given_configs(args)
    partitions = partition_dirs(args.paths)
    note_skipped_dirs(args.paths)
    repaired = failed = 0
    offsets = {parent: data_dir_offsets(parent) for parent in sorted({p.parent for p in partitions})}
    with Progress(total=len(partitions), desc="recover", unit="partition", quiet_when_stdout_tty=True) as bar:
        for path in partitions:
            try:
                repairs, pending = recover_one(path, given, args, offsets[path.parent])
            except (LogstoreError, OSError) as exc:
                if len(partitions) == 1:
                    raise
                sys.stdout.flush()
                sys.stderr.write(f"logstore: error: {exc}\n")
                failed += 1
            else:
                note_pending_deletions(path, pending, args.in_place)
                report(path, repairs, args)
                repaired += bool(repairs)
            bar.update(1)
    sys.stdout.flush()
    return ExitCode.ERROR if failed else ExitCode.PROBLEMS if repaired else ExitCode.OK


def recover_one(path: Path, given: Any, args: argparse.Namespace,
                offsets: dict[str, dict[tuple[str, int], int]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the repairs recovery makes to one partition, its files awaiting deletion), both applied
    with --in-place; `offsets` are its data directory's checkpoints as `data_dir_offsets` read them."""
    from logstore.checkpoint import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT
    from logstore.log_files import parse_partition_dir

    key = parse_partition_dir(path.name)
    point = offsets[RECOVERY_POINT_CHECKPOINT].get(key, 0)
    start = offsets[LOG_START_OFFSET_CHECKPOINT].get(key, 0)
    with tempfile.TemporaryDirectory(prefix="logstore-recover-") as tmp:
        copy = copy_partition(path, Path(tmp))
        try:
            config = topic_config(given, path).config
            log_end = recover_partition(copy, config, args.now, 0 if args.full else point, start)
            check_segments_do_not_overlap(copy)
        except LogstoreError as exc:  # name the user's file, not the temporary copy
            exc.args = (str(exc).replace(str(copy), str(path)),)
            raise
        found = changes(snapshot_dir(path), snapshot_dir(copy))
        corrupt = corrupt_snapshots(path)
        found += [{"file": name, "action": "delete", "bytes": (path / name).stat().st_size}
                  for name in sorted(corrupt - {c["file"] for c in found})]
        pending = [c for c in found if c["file"].endswith(DELETED_SUFFIX)]
        repairs = [c for c in found if c not in pending
                   and (c["file"] in corrupt or is_repair(c, path, copy, log_end))]
        if args.in_place and (repairs or pending):
            apply(repairs + pending, path, copy)
    return (repairs if args.full else repairs + damage_below_recovery_point(path, point)), pending

"""`logstore verify`: check a data directory, partition directories or single files, read-only.

Checks: every batch's CRC (and with --deep its records), offsets increasing within and
across segments, torn tails, offset and time indexes against the log, transaction
indexes, producer snapshots and checkpoint files. Each problem is one line naming the
file and, where there is one, the byte position. Nothing on disk is opened for writing.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from logstore.cli import broker_files
from logstore.cli._common import ExitCode, Progress, add_command, corruption_detail, write_json
from logstore.cli.dump import (
    EPOCHS,
    INDEX,
    LEADER_EPOCH_CHECKPOINT,
    LOG,
    OFFSET_CHECKPOINTS,
    OFFSETS,
    SNAPSHOT,
    TIMEINDEX,
    TXNINDEX,
    MappedFile,
    base_offset_of,
    file_kind,
    read_bytes,
)
from logstore.lock import LOCK_FILE_NAME
from logstore.log_files import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    is_partition_dir_name,
    parse_offset_file_name,
    segment_file_name,
    segment_log_offsets,
    sibling_file_name,
)
from logstore.topic_configs import TOPIC_CONFIGS_FILE


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `logstore verify`."""
    parser = add_command(
        subparsers, "verify",
        help="check CRCs, offsets, indexes, snapshots and checkpoints (read-only)",
        description=(
            "Verify a data directory, partition directories or single files without changing them:\n"
            "batch CRCs, increasing offsets, torn tails, offset/time/transaction indexes against the\n"
            "log, producer snapshots and checkpoint files. Each problem is printed with its file and\n"
            "byte position. Exit 0 when clean, 1 when problems were found."
        ),
        example="logstore verify /var/lib/kafka/data/orders-0",
    )
    parser.add_argument("paths", nargs="+", metavar="DIR|FILE", help="what to verify")
    parser.add_argument("--deep", action="store_true",
                        help="also decompress and decode every record (slower)")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object per problem, then a summary object")
    parser.set_defaults(run=run)


@dataclass
class Report:
    """Problems found so far and what was looked at."""

    problems: list[dict[str, Any]] = field(default_factory=list)
    files: int = 0
    partitions: int = 0
    batches: int = 0
    notes: list[dict[str, str]] = field(default_factory=list)
    _seen: set[tuple[str, int | None, str]] = field(default_factory=set)
    _last_position: dict[str, int] = field(default_factory=dict)

    def problem(self, path: Path | str, message: str, position: int | None = None) -> None:
        """Record one problem in `path` (at byte `position` when known), once."""
        key = (str(path), position, message)
        if key in self._seen:  # an index check walks its log again
            return
        self._seen.add(key)
        self.problems.append({"file": key[0], "position": position, "message": message})
        if position is not None:
            self._last_position[key[0]] = max(position, self._last_position.get(key[0], position))

    def skip(self, path: Path | str, note: str) -> None:
        """Record that `path` was not checked, and why."""
        self.notes.append({"file": str(path), "note": note})

    def has_problem_from(self, path: Path | str, position: int) -> bool:
        """True when a problem at or after byte `position` of `path` is already recorded."""
        return self._last_position.get(str(path), -1) >= position


def run(args: argparse.Namespace) -> int:
    """Verify every path; print the problems and a summary."""
    from logstore.errors import LogstoreError

    report = Report()
    targets = [classify(Path(p)) for p in args.paths]
    total = sum(size_of(path) for kind, path in targets)
    with Progress(total=total, desc="verify", unit="B", unit_scale=True) as bar:
        for kind, path in targets:
            if kind == "data":
                verify_data_dir(path, report, args.deep, bar)
            elif kind == "partition":
                verify_partition(path, report, args.deep, bar)
            else:
                verify_file(path, report, args.deep, bar)
    if report.files == 0 and not report.problems:  # directories only named like partitions
        raise LogstoreError(f"nothing to verify in {', '.join(args.paths)}: no log, index or checkpoint files")
    out = sys.stdout
    for problem in report.problems:
        if args.json:
            write_json(out, {"type": "problem", **problem})
        else:
            where = f": position {problem['position']}" if problem["position"] is not None else ""
            out.write(f"{problem['file']}{where}: {problem['message']}\n")
    if args.json:
        for note in report.notes:
            write_json(out, {"type": "skipped", **note})
    else:
        out.flush()
        write_notes(report.notes)
    summary = {"type": "summary", "partitions": report.partitions, "files": report.files,
               "batches": report.batches, "problems": len(report.problems), "skipped": len(report.notes)}
    if args.json:
        write_json(out, summary)
    else:
        verdict = "OK" if not report.problems else f"{len(report.problems)} problem(s)"
        skipped = f", skipped {len(report.notes)}" if report.notes else ""
        out.write(f"verified {report.files} files ({report.batches} batches) in "
                  f"{report.partitions} partition(s){skipped}: {verdict}\n")
    out.flush()
    return ExitCode.PROBLEMS if report.problems else ExitCode.OK


def write_notes(notes: list[dict[str, str]]) -> None:
    """One stderr line per skipped file, or per directory and reason when several files of one
    directory are skipped for the same reason (a clean's leftovers come by the dozen)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for note in notes:
        groups.setdefault((os.path.dirname(note["file"]), note["note"]), []).append(note["file"])
    for (directory, reason), files in groups.items():
        what = files[0] if len(files) == 1 else f"{len(files)} files in {directory}"
        sys.stderr.write(f"logstore: note: skipped {what}: {reason}\n")


def classify(path: Path) -> tuple[str, Path]:
    """('data' | 'partition' | 'file', path); FileNotFoundError / NotALogDirectory otherwise."""
    from logstore.errors import LogstoreError

    if not path.exists():
        raise FileNotFoundError(2, "No such file or directory", str(path))
    if path.is_file():
        return "file", path
    names = os.listdir(path)
    if any(parse_offset_file_name(n) for n in names) or (
            is_partition_dir_name(path.name) and set(names) <= {broker_files.PARTITION_METADATA, LOCK_FILE_NAME}):
        return "partition", path
    if any(is_partition_dir_name(n) and (path / n).is_dir() for n in names):
        return "data", path
    raise LogstoreError(f"{path} is not a log directory: no segment files and no <topic>-<partition> "
                        "directories in it")


def size_of(path: Path) -> int:
    """Bytes of the .log files under `path` (for the progress bar)."""
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob(f"*{LOG_SUFFIX}") if p.is_file())


def verify_data_dir(path: Path, report: Report, deep: bool, bar: Progress) -> None:
    """Every partition directory, then the files of the data directory's root Kafka writes;
    other directories and files are skipped with a note."""
    names = sorted(os.listdir(path))
    for name in names:
        if (path / name).is_dir():
            if is_partition_dir_name(name):
                verify_partition(path / name, report, deep, bar)
            else:
                report.skip(path / name, broker_files.dir_note(name))
    for name in names:
        if (path / name).is_dir():
            continue
        if name in OFFSET_CHECKPOINTS:
            verify_offsets_checkpoint(path / name, report)
        elif name in BROKER_FILE_CHECKS:
            verify_broker_file(path / name, report)
        elif name == TOPIC_CONFIGS_FILE:
            report.files += 1
            if (problem := broker_files.check_topic_configs(path / name)) is not None:
                report.problem(path / name, problem)
        elif (note := broker_files.root_file_note(name)) is not None:
            report.skip(path / name, note)


def verify_broker_file(path: Path, report: Report) -> None:
    """meta.properties, partition.metadata, quorum-state or a KRaft snapshot, by its name."""
    report.files += 1
    check = BROKER_FILE_CHECKS.get(path.name) or broker_files.check_kraft_snapshot
    try:
        found = check(read_bytes(str(path)))
    except OSError as exc:
        found = exc.strerror or str(exc)
    if isinstance(found, tuple):
        report.problem(path, *found)
    elif found is not None:
        report.problem(path, found)


BROKER_FILE_CHECKS = {broker_files.META_PROPERTIES: broker_files.check_meta_properties,
                      broker_files.PARTITION_METADATA: broker_files.check_partition_metadata,
                      broker_files.QUORUM_STATE: broker_files.check_quorum_state}


def verify_partition(path: Path, report: Report, deep: bool, bar: Progress) -> None:
    """Segments in offset order, their indexes, snapshots and the leader-epoch checkpoint."""
    report.partitions += 1
    names = sorted(os.listdir(path))
    segments = segment_log_offsets(names)
    previous_end: int | None = None
    for base in segments:
        log_path = path / segment_file_name(base, LOG_SUFFIX)
        if previous_end is not None and base < previous_end:
            report.problem(log_path, f"segment starts at offset {base}, below the previous "
                                     f"segment's next offset {previous_end}")
        scan = verify_log(log_path, report, deep, bar)
        previous_end = scan.next_offset
        for suffix, check in ((INDEX_SUFFIX, verify_offset_index), (TIME_INDEX_SUFFIX, verify_time_index)):
            if (path / segment_file_name(base, suffix)).exists():
                check(path / segment_file_name(base, suffix), report, scan)
        if (path / segment_file_name(base, TXN_INDEX_SUFFIX)).exists():
            verify_txn_index(path / segment_file_name(base, TXN_INDEX_SUFFIX), report)
    live = set(segments)
    for name in names:
        parsed = parse_offset_file_name(name)
        if parsed is None:
            if name in BROKER_FILE_CHECKS or broker_files.is_kraft_snapshot(name):
                verify_broker_file(path / name, report)
            elif (note := broker_files.partition_file_note(name)) is not None:
                report.skip(path / name, note)
            continue
        offset, suffix = parsed
        if suffix == SNAPSHOT_SUFFIX:
            verify_snapshot(path / name, report)
        elif suffix != LOG_SUFFIX and offset not in live:
            report.problem(path / name, "index file without its .log segment (Kafka deletes it on open)")
    if (path / LEADER_EPOCH_CHECKPOINT).exists():
        verify_epoch_checkpoint(path / LEADER_EPOCH_CHECKPOINT, report)


def verify_file(path: Path, report: Report, deep: bool, bar: Progress) -> None:
    """One file, by its name (as `logstore dump` recognises them)."""
    if path.name in BROKER_FILE_CHECKS or broker_files.is_kraft_snapshot(path.name):
        verify_broker_file(path, report)
        return
    kind = file_kind(str(path))
    if kind == LOG:
        verify_log(path, report, deep, bar)
    else:
        FILE_CHECKS[kind](path, report)


def iter_batches_checked(data: Any, path: Path, report: Report) -> Iterator[tuple[int, int]]:
    """Kafka's batch walk over `data`; a corrupt length becomes a problem and ends the walk."""
    from logstore import dump
    from logstore.errors import CorruptRecordError

    try:
        yield from dump.iter_batch_spans(data)
    except CorruptRecordError as exc:
        report.problem(path, corruption_detail(exc), exc.position)


@dataclass
class SegmentScan:
    """What one walk of a `.log` found, for checking its indexes without walking it again."""

    starts: list[int] = field(default_factory=list)  # every batch's position, readable or not
    batches: list[tuple[int, int, int]] = field(default_factory=list)  # (position, last offset, max ts)
    valid_end: int = 0
    next_offset: int = 0

    def holding(self, offset: int) -> int:
        """Index in `batches` of the first batch whose last offset is >= `offset` (the batch a
        fetch of `offset` returns), or len(batches) when none is."""
        return next((i for i, (_, last, _) in enumerate(self.batches) if last >= offset), len(self.batches))


class NoBar:
    """A progress bar that draws nothing (for a log walked only to check an index against)."""

    def update(self, n: int = 1) -> None:
        """Nothing to draw."""


def verify_log(path: Path, report: Report, deep: bool, bar: Progress | NoBar) -> SegmentScan:
    """Batches of one `.log`: CRC, offsets, torn tail. A batch that does not read is one problem,
    and the walk goes on at the next batch its length field gives, as Kafka's dump does."""
    from logstore import dump
    from logstore.errors import CorruptRecordError
    from logstore.records import read_batch

    report.files += 1
    scan = SegmentScan(next_offset=base_offset_of(str(path)))
    with MappedFile(str(path)) as mapped:
        data = mapped.data
        for position, size in iter_batches_checked(data, path, report):
            report.batches += 1
            scan.starts.append(position)
            scan.valid_end = position + size
            bar.update(size)
            try:
                batch = read_batch(data, position)
            except CorruptRecordError as exc:
                report.problem(path, f"unreadable batch header: {corruption_detail(exc)}", position)
                continue
            if not dump.kafka_is_valid(batch):
                report.problem(path, f"batch CRC mismatch: stored {batch.crc}, computed "
                                     f"{batch.compute_crc()}", position)
            elif deep:
                try:
                    batch.records()
                except CorruptRecordError as exc:
                    report.problem(path, f"records do not decode: {corruption_detail(exc)}", position)
            first, last = batch.base_offset, batch.last_offset
            if last < first:
                report.problem(path, f"last offset {last} is below the base offset {first}", position)
            if not scan.batches and last < scan.next_offset:
                # Older Kafka named a segment rolled by a compressed legacy wrapper after the
                # wrapper's (last) offset: the first batch may start below the base offset, but
                # it must end at or above it, or no fetch would find it in this segment.
                report.problem(path, f"batch ends at offset {last}, below the segment's base offset "
                                     f"{scan.next_offset}", position)
            elif scan.batches and first < scan.next_offset:
                report.problem(path, f"offset {first} does not increase (expected >= {scan.next_offset})",
                               position)
            scan.next_offset = max(scan.next_offset, last + 1)
            scan.batches.append((position, last, batch.max_timestamp if batch.magic > 0 else -1))
        end = scan.valid_end
        if len(data) > end and not report.has_problem_from(path, end):
            report.problem(path, f"{len(data) - end} invalid bytes at the end (a torn write; "
                                 "recovery truncates them)", end)
        bar.update(len(data) - end)
    return scan


def read_index(path: Path, report: Report, dtype: Any, read: Any) -> tuple[Any, Any, str | None]:
    """An index file's two columns (as `read` returns them) and its segment's `.log`, if present.

    A size that is not a whole number of `dtype` entries is reported as a problem.
    """

    report.files += 1
    data = read_bytes(str(path))
    if len(data) % dtype.itemsize:
        report.problem(path, f"{len(data)} bytes is not a multiple of the {dtype.itemsize}-byte entry size")
    first, second = read(data, base_offset_of(str(path)))
    log_path = path.parent / sibling_file_name(path.name, LOG_SUFFIX)
    return first, second, str(log_path) if log_path.exists() else None


def scan_of(log_path: str | None, scan: SegmentScan | None, report: Report) -> SegmentScan | None:
    """`scan` when the caller walked the log already, else a walk of `log_path` whose problems
    join `report` (an index checked alone still names the damaged log it was checked against)."""
    if scan is not None or log_path is None:
        return scan
    walked = Report()
    scan = verify_log(Path(log_path), walked, False, NoBar())
    for problem in walked.problems:
        report.problem(problem["file"], problem["message"], problem["position"])
    return scan


def verify_offset_index(path: Path, report: Report, scan: SegmentScan | None = None) -> None:
    """Offset-index entries: increasing, each at a batch boundary, none after the batch that
    holds its offset. Kafka's cleaner and follower appends index an append's last offset at
    the position of its first batch, so an entry is wrong only when a lookup through it could
    miss a batch, not when the batch at its position ends below its offset."""
    from index.offset_index import OFFSET_INDEX_DTYPE
    from logstore import dump

    offsets, positions, log_path = read_index(path, report, OFFSET_INDEX_DTYPE, dump.read_offset_index)
    base = base_offset_of(str(path))
    n = dump.sparse_entry_count(offsets, base)
    scan = scan_of(log_path, scan, report)
    if scan is None:
        return
    boundaries = {*scan.starts, scan.valid_end}
    previous_offset, previous_position = base - 1, -1
    for i in range(n):
        offset, position = int(offsets[i]), int(positions[i])
        where = i * OFFSET_INDEX_DTYPE.itemsize
        if offset <= previous_offset or position <= previous_position:
            report.problem(path, f"entry {i} (offset {offset}, position {position}) does not "
                                 "increase", where)
        previous_offset, previous_position = offset, position
        if position not in boundaries:
            report.problem(path, f"entry {i} points at log position {position}, which is not the "
                                 "start of a batch", where)
            continue
        holder = scan.holding(offset)
        if holder < len(scan.batches) and scan.batches[holder][0] < position:
            report.problem(path, f"entry {i} says offset {offset} is at or after log position {position}, "
                                 f"but the batch holding it starts at position {scan.batches[holder][0]} "
                                 "(a lookup would miss it)", where)


def verify_time_index(path: Path, report: Report, scan: SegmentScan | None = None) -> None:
    """Time-index entries: timestamps increasing, offsets not decreasing, and no batch before
    the one holding an entry's offset with a larger max timestamp than the entry's (a lookup
    for a timestamp between the two would start after that batch and miss it)."""
    from index.time_index import TIME_INDEX_DTYPE
    from logstore import dump

    timestamps, offsets, log_path = read_index(path, report, TIME_INDEX_DTYPE, dump.read_time_index)
    base = base_offset_of(str(path))
    n = dump.sparse_entry_count(offsets, base)
    scan = scan_of(log_path, scan, report)
    if scan is None:
        return
    # largest[k]: the largest max timestamp among batches[:k], and the position of its batch
    largest: list[tuple[int, int]] = [(-1, -1)]
    for position, _, timestamp in scan.batches:
        largest.append(max(largest[-1], (timestamp, position), key=lambda t: t[0]))
    previous_timestamp, previous_offset = -1, base
    for i in range(n):
        timestamp, offset = int(timestamps[i]), int(offsets[i])
        where = i * TIME_INDEX_DTYPE.itemsize
        if timestamp <= previous_timestamp:
            report.problem(path, f"entry {i} timestamp {timestamp} does not increase "
                                 f"(previous {previous_timestamp})", where)
        if offset < previous_offset:
            report.problem(path, f"entry {i} offset {offset} is below "
                                 f"{'the base offset' if i == 0 else 'the previous entry'} {previous_offset}",
                           where)
        previous_timestamp, previous_offset = timestamp, max(offset, previous_offset)
        before, position = largest[scan.holding(offset)]
        if before > timestamp:
            report.problem(path, f"entry {i} (timestamp {timestamp}, offset {offset}): the batch at log "
                                 f"position {position}, before offset {offset}, has the larger max "
                                 f"timestamp {before} (a lookup for a timestamp in ({timestamp}, {before}] "
                                 "would miss it)", where)


def verify_txn_index(path: Path, report: Report) -> None:
    """Aborted-transaction entries: whole, a known version, ordered offsets."""
    from logstore import dump
    from logstore.errors import CorruptRecordError
    from logstore.txn_index import ENTRY_SIZE

    report.files += 1
    data = read_bytes(str(path))
    if len(data) % ENTRY_SIZE:
        report.problem(path, f"{len(data)} bytes is not a multiple of the 34-byte entry size",
                       len(data) - len(data) % ENTRY_SIZE)
    try:
        txns = dump.read_aborted_txns(data, str(path))
    except CorruptRecordError as exc:
        report.problem(path, corruption_detail(exc), exc.position)
        return
    for i, txn in enumerate(txns):
        if not txn.first_offset <= txn.last_offset:
            report.problem(path, f"aborted transaction {i} has first offset {txn.first_offset} after "
                                 f"its last offset {txn.last_offset}", i * ENTRY_SIZE)


def verify_snapshot(path: Path, report: Report) -> None:
    """A producer snapshot decodes with a good version and CRC."""
    from logstore import dump
    from logstore.errors import CorruptSnapshotError

    report.files += 1
    try:
        dump.read_producer_snapshot(read_bytes(str(path)))
    except CorruptSnapshotError as exc:
        report.problem(path, str(exc))


def read_checkpoint_checked(path: Path, report: Report, types: tuple[type, ...]) -> list[tuple]:
    """The entries of a checkpoint file; one that does not parse is a problem and reads as none."""
    from logstore.checkpoint import read_checkpoint
    from logstore.errors import CorruptCheckpointError

    report.files += 1
    try:
        return read_checkpoint(path, types)
    except CorruptCheckpointError as exc:
        report.problem(path, str(exc).removeprefix(str(path)).lstrip(": "))
        return []


def verify_epoch_checkpoint(path: Path, report: Report) -> None:
    """The leader-epoch checkpoint parses; epochs and start offsets increase."""
    entries = read_checkpoint_checked(path, report, (int, int))
    for (e1, o1), (e2, o2) in zip(entries, entries[1:], strict=False):
        if e2 <= e1 or o2 < o1:
            report.problem(path, f"entry (epoch {e2}, start offset {o2}) does not follow "
                                 f"(epoch {e1}, start offset {o1})")


def verify_offsets_checkpoint(path: Path, report: Report) -> None:
    """A data-directory offset checkpoint parses."""
    read_checkpoint_checked(path, report, (str, int, int))


# The check of each kind of file but `.log` (which also takes --deep and the progress bar).
FILE_CHECKS = {INDEX: verify_offset_index, TIMEINDEX: verify_time_index, TXNINDEX: verify_txn_index,
               SNAPSHOT: verify_snapshot, EPOCHS: verify_epoch_checkpoint, OFFSETS: verify_offsets_checkpoint}

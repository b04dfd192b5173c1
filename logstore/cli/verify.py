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

from logstore.cli._common import ExitCode, Progress, add_command, corruption_detail, write_json
from logstore.cli.dump import (
    EPOCHS,
    INDEX,
    LEADER_EPOCH_CHECKPOINT,
    LOG,
    OFFSET_CHECKPOINTS,
    OFFSETS,
    SNAPSHOT,
    SUFFIX_KINDS,
    TIMEINDEX,
    TXNINDEX,
    MappedFile,
    base_offset_of,
    file_kind,
    first_batch_last_offset,
    read_bytes,
)
from logstore.log_files import (
    INDEX_SUFFIXES,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    is_partition_dir_name,
    parse_offset_file_name,
    segment_file_name,
    segment_log_offsets,
    sibling_file_name,
)


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
    summary = {"type": "summary", "partitions": report.partitions, "files": report.files,
               "batches": report.batches, "problems": len(report.problems)}
    if args.json:
        write_json(out, summary)
    else:
        verdict = "OK" if not report.problems else f"{len(report.problems)} problem(s)"
        out.write(f"verified {report.files} files ({report.batches} batches) in "
                  f"{report.partitions} partition(s): {verdict}\n")
    out.flush()
    return ExitCode.PROBLEMS if report.problems else ExitCode.OK


def classify(path: Path) -> tuple[str, Path]:
    """('data' | 'partition' | 'file', path); FileNotFoundError / NotALogDirectory otherwise."""
    from logstore.errors import LogstoreError

    if not path.exists():
        raise FileNotFoundError(2, "No such file or directory", str(path))
    if path.is_file():
        return "file", path
    names = os.listdir(path)
    if any(parse_offset_file_name(n) for n in names) or (is_partition_dir_name(path.name) and not names):
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
    """Every partition directory, then the data directory's offset checkpoints."""
    for name in sorted(os.listdir(path)):
        if is_partition_dir_name(name) and (path / name).is_dir():
            verify_partition(path / name, report, deep, bar)
    for name in OFFSET_CHECKPOINTS:
        if (path / name).exists():
            verify_offsets_checkpoint(path / name, report)


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
        previous_end = verify_log(log_path, report, deep, bar)
        for suffix in INDEX_SUFFIXES:
            index_path = path / segment_file_name(base, suffix)
            if index_path.exists():
                FILE_CHECKS[SUFFIX_KINDS[suffix]](index_path, report)
    live = set(segments)
    for name in names:
        parsed = parse_offset_file_name(name)
        if parsed is None:
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


def verify_log(path: Path, report: Report, deep: bool, bar: Progress) -> int:
    """Batches of one `.log`: CRC, offsets, torn tail. Returns the segment's next offset."""
    from logstore import dump
    from logstore.errors import CorruptRecordError
    from logstore.records import RecordBatch

    report.files += 1
    base = base_offset_of(str(path))
    next_offset = base
    valid_end = 0
    with MappedFile(str(path)) as mapped:
        data = mapped.data
        for position, size in iter_batches_checked(data, path, report):
            report.batches += 1
            try:
                batch = RecordBatch(data, position)
            except CorruptRecordError as exc:
                report.problem(path, f"unreadable batch header: {exc}", position)
                break
            if not dump.kafka_is_valid(batch):
                report.problem(path, f"batch CRC mismatch: stored {batch.crc}, computed "
                                     f"{batch.compute_crc()}", position)
            elif deep:
                try:
                    batch.records()
                except CorruptRecordError as exc:
                    report.problem(path, f"records do not decode: {exc}", position)
            first, last = batch.base_offset, batch.last_offset
            if last < first:
                report.problem(path, f"last offset {last} is below the base offset {first}", position)
            if first < next_offset:
                report.problem(path, f"offset {first} does not increase (expected >= {next_offset})",
                               position)
            next_offset = max(next_offset, last + 1)
            valid_end = position + size
            bar.update(size)
        if len(data) > valid_end and not report.has_problem_from(path, valid_end):
            report.problem(path, f"{len(data) - valid_end} invalid bytes at the end (a torn write; "
                                 "recovery truncates them)", valid_end)
        bar.update(len(data) - valid_end)
    return next_offset


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


def verify_offset_index(path: Path, report: Report) -> None:
    """Offset-index entries ascending and each pointing at the batch ending at its offset."""
    from index.offset_index import OFFSET_INDEX_DTYPE
    from logstore import dump
    from logstore.errors import CorruptRecordError

    offsets, positions, log_path = read_index(path, report, OFFSET_INDEX_DTYPE, dump.read_offset_index)
    base = base_offset_of(str(path))
    n = dump.sparse_entry_count(offsets, base)
    if log_path is None:
        return
    with MappedFile(log_path) as log:
        previous_offset, previous_position = base - 1, -1
        for i in range(n):
            offset, position = int(offsets[i]), int(positions[i])
            where = i * OFFSET_INDEX_DTYPE.itemsize
            if offset <= previous_offset or position <= previous_position:
                report.problem(path, f"entry {i} (offset {offset}, position {position}) does not "
                                     "increase", where)
            try:
                found = first_batch_last_offset(log.data, position, len(log.data), log_path)
            except CorruptRecordError as exc:
                report.problem(path, f"entry {i} points at log position {position}, where no batch "
                                     f"reads: {exc}", where)
            else:
                if found != offset:
                    report.problem(path, f"entry {i} says offset {offset} is at log position {position}, "
                                         f"but the batch there ends at offset {found}", where)
            previous_offset, previous_position = offset, position


def verify_time_index(path: Path, report: Report) -> None:
    """Time-index entries increasing and each matching the max timestamp of its batch."""
    from index.time_index import TIME_INDEX_DTYPE
    from logstore import dump
    from logstore.records import read_batch_header

    timestamps, offsets, log_path = read_index(path, report, TIME_INDEX_DTYPE, dump.read_time_index)
    n = dump.sparse_entry_count(offsets, base_offset_of(str(path)))
    if log_path is None:
        return
    with MappedFile(log_path) as log:
        last_offsets: dict[int, int] = {}
        for position, _ in iter_batches_checked(log.data, Path(log_path), report):
            header = read_batch_header(log.data, position)
            last_offsets[header.last_offset] = header.max_timestamp if header.magic > 0 else -1
        previous = -1
        for i in range(n):
            timestamp, offset = int(timestamps[i]), int(offsets[i])
            where = i * TIME_INDEX_DTYPE.itemsize
            if timestamp <= previous:
                report.problem(path, f"entry {i} timestamp {timestamp} does not increase "
                                     f"(previous {previous})", where)
            if offset not in last_offsets:
                report.problem(path, f"entry {i} offset {offset} is not the last offset of a batch", where)
            elif last_offsets[offset] != timestamp:
                report.problem(path, f"entry {i} timestamp {timestamp} differs from the max timestamp "
                                     f"{last_offsets[offset]} of the batch ending at offset {offset}", where)
            previous = timestamp


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
    from logstore.records.crc import crc32c

    report.files += 1
    try:
        dump.read_producer_snapshot(read_bytes(str(path)), crc32c)
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

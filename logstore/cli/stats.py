"""`logstore stats`: per-partition summary of segments, bytes, offsets, time, keys and codecs.

Read-only: segment files are mapped and decoded; nothing is opened for writing.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from logstore.cli._common import (
    ExitCode,
    Progress,
    add_command,
    partition_dirs,
    write_json,
)
from logstore.cli.broker_files import note_skipped_dirs
from logstore.log_files import LOG_SUFFIX, segment_file_name, segment_log_offsets


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `logstore stats`."""
    parser = add_command(
        subparsers, "stats",
        help="per-partition segments, bytes, offsets, time range, records, keys, codecs, producers",
        description=(
            "Summarise every partition of a data directory (or the given partition directories):\n"
            "segments, bytes, offset range, time range, records, distinct keys (approximate, by\n"
            "64-bit murmur3 hash), compression mix and producer ids, from the log start offset in\n"
            "log-start-offset-checkpoint on. Read-only. Exit 1 when a batch is damaged or a segment\n"
            "ends in invalid bytes (they are left out of the counts and named on stderr with their\n"
            "file and position)."
        ),
        example="logstore stats --json /var/lib/kafka/data | jq .records",
    )
    parser.add_argument("paths", nargs="+", metavar="DIR", help="data or partition directories")
    parser.add_argument("--json", action="store_true", help="one JSON object per partition")
    parser.add_argument("--decode", action="store_true",
                        help="decode the records of internal topics (__consumer_offsets, "
                             "__transaction_state, __cluster_metadata) and count them by type")
    parser.set_defaults(run=run)


@dataclass
class PartitionStats:
    """What `stats` reports for one partition directory."""

    partition: str
    segments: int = 0
    bytes: int = 0
    start_offset: int | None = None
    end_offset: int | None = None
    records: int = 0
    batches: int = 0
    first_timestamp: int | None = None
    last_timestamp: int | None = None
    key_hashes: set[int] = field(default_factory=set)
    null_keys: int = 0
    codecs: Counter = field(default_factory=Counter)
    producer_ids: set[int] = field(default_factory=set)
    transactional_batches: int = 0
    control_batches: int = 0
    invalid_bytes: int = 0
    problems: list[dict[str, Any]] = field(default_factory=list)
    record_types: Counter | None = None  # under --decode, for an internal topic

    def as_json(self) -> dict[str, Any]:
        """The JSON object of this partition."""
        types = {} if self.record_types is None else {"recordTypes": dict(sorted(self.record_types.items()))}
        return {
            "partition": self.partition, "segments": self.segments, "bytes": self.bytes,
            "startOffset": self.start_offset, "endOffset": self.end_offset,
            "records": self.records, "batches": self.batches,
            "firstTimestamp": self.first_timestamp, "lastTimestamp": self.last_timestamp,
            "keysApprox": len(self.key_hashes), "nullKeys": self.null_keys,
            "compression": dict(sorted(self.codecs.items())),
            "producerIds": sorted(self.producer_ids),
            "transactionalBatches": self.transactional_batches,
            "controlBatches": self.control_batches, "invalidBytes": self.invalid_bytes, **types,
            "problems": self.problems,
        }


def run(args: argparse.Namespace) -> int:
    """Gather and print the stats of every partition; exit 1 when a segment holds a damaged
    batch or invalid bytes (each named on stderr with its file and position)."""
    from logstore.cli.verify import size_of

    partitions = partition_dirs(args.paths)
    note_skipped_dirs(args.paths)
    total = sum(size_of(p) for p in partitions)
    results = []
    with Progress(total=total, desc="stats", unit="B", unit_scale=True) as bar:
        for path in partitions:
            results.append(partition_stats(path, bar, decode=args.decode))
    if args.json:
        for stats in results:
            write_json(sys.stdout, stats.as_json())
    else:
        print_table([s.as_json() for s in results])
    sys.stdout.flush()
    for stats in results:  # the counts above leave these batches out: say so rather than skip them
        for problem in stats.problems:
            print(f"logstore: {problem['file']}: position {problem['position']}: {problem['message']}",
                  file=sys.stderr)
    return ExitCode.PROBLEMS if any(s.problems for s in results) else ExitCode.OK


def log_start_offset(path: Path) -> int:
    """The partition's log start offset in its data directory's `log-start-offset-checkpoint`
    (Kafka's view: records below it are deleted, even inside a kept segment), else 0."""
    from logstore.checkpoint import LOG_START_OFFSET_CHECKPOINT, read_offsets_checkpoint
    from logstore.errors import LogstoreError
    from logstore.log_files import parse_partition_dir

    try:
        checkpoint = read_offsets_checkpoint(path.parent / LOG_START_OFFSET_CHECKPOINT)
    except LogstoreError:  # `verify` names a corrupt checkpoint; stats counts what is on disk
        return 0
    return checkpoint.get(parse_partition_dir(path.name), 0)


def partition_stats(path: Path, bar: Progress, *, decode: bool = False) -> PartitionStats:
    """Walk every segment of one partition directory, counting what lies at or above the log
    start offset; a batch that does not read is a problem, and the walk goes on. With `decode`,
    an internal topic's records are decoded and counted by type."""
    from logstore.tools.record_decoders import decoder_for

    stats = PartitionStats(path.name)
    decoder = decoder_for(path.name.rsplit("-", 1)[0]) if decode else None
    if decoder is not None:
        stats.record_types = Counter()
    bases = segment_log_offsets(os.listdir(path))
    start = log_start_offset(path)
    for base in bases:
        stats.segments += 1
        next_offset = segment_stats(stats, path / segment_file_name(base, LOG_SUFFIX), start, bar,
                                    decoder)
        stats.end_offset = max(next_offset, stats.end_offset or 0)
    if bases:
        stats.start_offset = min(max(start, bases[0]), stats.end_offset)
    return stats


def segment_stats(stats: PartitionStats, log_path: Path, start: int, bar: Progress,
                  decoder: Any = None) -> int:
    """Add one `.log` to `stats` (record types counted by `decoder`, when given); returns the
    segment's next offset."""
    from logstore.cli._common import corruption_detail
    from logstore.cli.dump_run import MappedFile
    from logstore.errors import CorruptRecordError
    from logstore.records import read_batch
    from logstore.tools import dump

    def problem(position: int, message: str) -> None:
        stats.problems.append({"file": str(log_path), "position": position, "message": message})

    next_offset = int(log_path.name.split(".")[0])
    with MappedFile(str(log_path)) as mapped:
        data = mapped.data
        stats.bytes += len(data)
        valid_end = 0
        spans = dump.iter_batch_spans(data)
        while True:
            try:
                position, size = next(spans)
            except StopIteration:
                break
            except CorruptRecordError as exc:
                problem(exc.position, corruption_detail(exc))
                break
            valid_end = position + size
            bar.update(size)
            try:
                batch = read_batch(data, position)
                if not dump.kafka_is_valid(batch):
                    problem(position, f"batch CRC mismatch: stored {batch.crc}, computed {batch.compute_crc()}")
                    continue
                columns = None if batch.is_control or batch.last_offset < start else batch.columns()
            except CorruptRecordError as exc:
                problem(position, corruption_detail(exc))
                continue
            next_offset = max(next_offset, batch.last_offset + 1)
            if batch.last_offset < start:
                continue
            stats.batches += 1
            stats.codecs[batch.compression] += 1
            if batch.producer_id >= 0:
                stats.producer_ids.add(batch.producer_id)
            stats.transactional_batches += bool(batch.is_transactional)
            stats.control_batches += bool(batch.is_control)
            if columns is not None:
                add_records(stats, columns, start)
                if decoder is not None:
                    try:
                        stats.record_types.update(decoder.kind(r) for r in batch.records()
                                                  if r.offset >= start)
                    except CorruptRecordError as exc:
                        problem(position, corruption_detail(exc))
        invalid = len(data) - valid_end
        if invalid and not any(p["file"] == str(log_path) and p["position"] >= valid_end
                               for p in stats.problems):
            problem(valid_end, f"{invalid} invalid bytes at the end (a torn write; recovery truncates them)")
        stats.invalid_bytes += invalid
        bar.update(invalid)
    return next_offset


def add_records(stats: PartitionStats, cols: Any, start: int = 0) -> None:
    """Count one batch's decoded columns at or above offset `start` (records, time range, null
    and distinct keys)."""
    import mmh3
    import numpy as np

    kept = np.flatnonzero(cols.offset >= start)
    if not len(kept):
        return
    stats.records += len(kept)
    # columns() already gives Kafka's timestamps: LogAppendTime stamps every record, magic 0 has -1.
    timestamps = cols.timestamp[kept]
    low, high = int(timestamps.min()), int(timestamps.max())
    stats.first_timestamp = low if stats.first_timestamp is None else min(stats.first_timestamp, low)
    stats.last_timestamp = high if stats.last_timestamp is None else max(stats.last_timestamp, high)
    stats.null_keys += int(np.count_nonzero(cols.key_null[kept]))
    raw, bounds = cols.key_data.tobytes(), cols.key_offsets.tolist()
    stats.key_hashes.update(mmh3.hash64(raw[bounds[i]:bounds[i + 1]], signed=False)[0]
                            for i in kept[~cols.key_null[kept]].tolist())


COLUMNS = (("partition", "PARTITION"), ("segments", "SEGMENTS"), ("bytes", "BYTES"),
           ("startOffset", "START"), ("endOffset", "END"), ("records", "RECORDS"),
           ("keysApprox", "KEYS~"), ("firstTimestamp", "FIRST_TS"), ("lastTimestamp", "LAST_TS"),
           ("compression", "CODECS"), ("producerIds", "PRODUCERS"))


def _cell(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if key in ("compression", "recordTypes"):
        return ",".join(f"{codec}:{n}" for codec, n in value.items()) or "-"
    if key == "producerIds":
        return str(len(value))
    return str(value)


def print_table(rows: list[dict[str, Any]]) -> None:
    """Aligned columns, one row per partition (and the record types when any were decoded)."""
    columns = COLUMNS + ((("recordTypes", "TYPES"),) if any("recordTypes" in r for r in rows) else ())
    table = [[title for _, title in columns]] + [[_cell(k, row.get(k)) for k, _ in columns] for row in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(columns))]
    for r in table:
        sys.stdout.write("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                   for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip() + "\n")

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
    naming_file,
    partition_dirs,
    write_json,
)
from logstore.log_files import LOG_SUFFIX, segment_file_name, segment_log_offsets


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `logstore stats`."""
    parser = add_command(
        subparsers, "stats",
        help="per-partition segments, bytes, offsets, time range, records, keys, codecs, producers",
        description=(
            "Summarise every partition of a data directory (or the given partition directories):\n"
            "segments, bytes, offset range, time range, records, distinct keys (approximate, by\n"
            "64-bit murmur3 hash), compression mix and producer ids. Read-only. Exit 1 when a\n"
            "segment ends in invalid bytes (they are left out of the counts and named on stderr)."
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
        }


def run(args: argparse.Namespace) -> int:
    """Gather and print the stats of every partition; exit 1 when a segment has a torn tail."""
    from logstore.cli.verify import size_of

    partitions = partition_dirs(args.paths)
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
    torn = [s for s in results if s.invalid_bytes]
    for stats in torn:  # the counts above leave these bytes out: say so rather than skip them
        sys.stdout.flush()
        print(f"logstore: {stats.partition}: {stats.invalid_bytes} invalid bytes at the end of its "
              "segments (run `logstore verify` for where)", file=sys.stderr)
    return ExitCode.PROBLEMS if torn else ExitCode.OK


def partition_stats(path: Path, bar: Progress, *, decode: bool = False) -> PartitionStats:
    """Walk every segment of one partition directory (with `decode`, an internal topic's records
    are decoded and counted by type)."""
    from logstore import dump
    from logstore.cli.dump import MappedFile
    from logstore.record_decoders import decoder_for
    from logstore.records import RecordBatch

    stats = PartitionStats(path.name)
    decoder = decoder_for(path.name.rsplit("-", 1)[0]) if decode else None
    if decoder is not None:
        stats.record_types = Counter()
    for base in segment_log_offsets(os.listdir(path)):
        log_path = path / segment_file_name(base, LOG_SUFFIX)
        stats.segments += 1
        if stats.start_offset is None:
            stats.start_offset = base
        next_offset = base
        with MappedFile(str(log_path)) as mapped:
            data = mapped.data
            stats.bytes += len(data)
            valid_end = 0
            with naming_file(log_path):
                for position, size in dump.iter_batch_spans(data):
                    batch = RecordBatch(data, position)
                    stats.batches += 1
                    stats.codecs[batch.compression] += 1
                    if batch.producer_id >= 0:
                        stats.producer_ids.add(batch.producer_id)
                    stats.transactional_batches += bool(batch.is_transactional)
                    stats.control_batches += bool(batch.is_control)
                    next_offset = max(next_offset, batch.last_offset + 1)
                    valid_end = position + size
                    bar.update(size)
                    if batch.is_control:
                        continue
                    add_records(stats, batch.columns())
                    if decoder is not None:
                        stats.record_types.update(decoder.kind(r) for r in batch.records())
            stats.invalid_bytes += len(data) - valid_end
            bar.update(len(data) - valid_end)
        stats.end_offset = next_offset
    return stats


def add_records(stats: PartitionStats, cols: Any) -> None:
    """Count one batch's decoded columns (records, time range, null and distinct keys)."""
    import mmh3
    import numpy as np

    n = len(cols.offset)
    if not n:
        return
    stats.records += n
    # columns() already gives Kafka's timestamps: LogAppendTime stamps every record, magic 0 has -1.
    low, high = int(cols.timestamp.min()), int(cols.timestamp.max())
    stats.first_timestamp = low if stats.first_timestamp is None else min(stats.first_timestamp, low)
    stats.last_timestamp = high if stats.last_timestamp is None else max(stats.last_timestamp, high)
    stats.null_keys += int(np.count_nonzero(cols.key_null))
    raw, bounds = cols.key_data.tobytes(), cols.key_offsets.tolist()
    stats.key_hashes.update(mmh3.hash64(raw[bounds[i]:bounds[i + 1]], signed=False)[0]
                            for i in np.flatnonzero(~cols.key_null).tolist())


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

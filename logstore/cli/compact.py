"""`logstore compact`: run the log cleaner once on partition directories (or a data directory).

With `--dry-run` the logs are opened read-only and the report says what one cleaning round
would remove; without it the round runs (crash-safe segment swap, cleaner checkpoint).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from logstore.cli._common import (
    ExitCode,
    add_command,
    parse_config_options,
    partition_dirs,
    write_json,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `logstore compact`."""
    parser = add_command(
        subparsers, "compact",
        help="clean compacted logs once (latest value per key, tombstones, aborted txns)",
        description=(
            "Run one round of Kafka's log cleaner on each partition directory given (or on every\n"
            "partition of a data directory): keep the latest record per key, drop tombstones past\n"
            "their delete horizon and aborted transactional data, swap the cleaned segments in\n"
            "crash-safely and update cleaner-offset-checkpoint. The logs are treated as\n"
            "cleanup.policy=compact unless --config says otherwise. --dry-run changes nothing."
        ),
        example="logstore compact --dry-run --config delete.retention.ms=0 /var/lib/kafka/data/users-0",
    )
    parser.add_argument("paths", nargs="+", metavar="DIR", help="partition or data directories")
    parser.add_argument("--dry-run", action="store_true", help="report what would be removed; change nothing")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a topic or cleaner config (Kafka names); repeatable")
    parser.add_argument("--json", action="store_true", help="one JSON object per partition")
    parser.set_defaults(run=run)


def _as_json(partition: str, result: Any) -> dict[str, Any]:
    return {
        "partition": partition, "dryRun": result.dry_run, "dueReason": result.due_reason,
        "dirtyRatio": round(result.dirty_ratio, 6), "firstDirtyOffset": result.first_dirty_offset,
        "firstUncleanableOffset": result.first_uncleanable_offset, "endOffset": result.end_offset,
        "segmentsCleaned": result.segments_cleaned, "bytesRead": result.bytes_read,
        "bytesWritten": result.bytes_written, "recordsRead": result.records_read,
        "recordsWritten": result.records_written, "recordsRemoved": result.records_removed,
        "tombstonesRemoved": result.tombstones_removed, "removedByReason": result.removed_by_reason,
        "mapKeys": result.map_keys, "mapFull": result.map_full, "seconds": round(result.elapsed_s, 6),
    }


def run(args: argparse.Namespace) -> int:
    """Clean (or dry-run) every partition found under the paths; print one summary each."""
    from compaction.cleaner import Cleaner
    from logstore.log import Log

    config = parse_config_options(args.config, {"cleanup.policy": "compact"})
    partitions = partition_dirs(args.paths)
    cleaner = Cleaner(config)
    for path in partitions:
        log = Log.open(path, config, read_only=args.dry_run)
        try:
            result = cleaner.clean(log, dry_run=args.dry_run)
        finally:
            log.close()
        if args.json:
            write_json(sys.stdout, _as_json(path.name, result))
            continue
        verb = "would remove" if args.dry_run else "removed"
        reasons = ", ".join(f"{k} {v}" for k, v in result.removed_by_reason.items() if v) or "nothing"
        print(f"{path.name}: dirty ratio {result.dirty_ratio:.3f} ({result.due_reason or 'not due'}), "
              f"offsets [{result.first_dirty_offset}, {result.first_uncleanable_offset}) -> checkpoint "
              f"{result.end_offset}; {verb} {result.records_removed} of {result.records_read} records "
              f"({reasons}), {result.bytes_read - result.bytes_written} of {result.bytes_read} bytes "
              f"in {result.segments_cleaned} segments, {result.elapsed_s:.3f} s")
    return ExitCode.OK

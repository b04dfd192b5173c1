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
    add_config_arguments,
    given_configs,
    int64,
    partition_dirs,
    require_known_configs,
    topic_config,
    write_json,
)

# What `compact` assumes of a topic without stored configs: it was asked to compact it.
ASSUMED = {"cleanup.policy": "compact"}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `logstore compact`."""
    parser = add_command(
        subparsers, "compact",
        help="clean compacted logs once (latest value per key, tombstones, aborted txns)",
        description=(
            "Run one round of Kafka's log cleaner on each partition directory given (or on every\n"
            "partition of a data directory): keep the latest record per key, drop tombstones past\n"
            "their delete horizon and aborted transactional data, swap the cleaned segments in\n"
            "crash-safely and update cleaner-offset-checkpoint. --dry-run changes nothing.\n\n"
            "Configs: each topic's stored configs (logstore-topic-configs.json in the data\n"
            "directory, written by LogManager), with --config-file and --config over them; a topic\n"
            "without stored configs is treated as cleanup.policy=compact unless --config says\n"
            "otherwise. A topic with no stored or given configs is refused unless\n"
            "--assume-defaults; --dry-run still reports it and says which configs it assumed.\n"
            "Topics whose cleanup.policy lacks compact are skipped."
        ),
        example="logstore compact --dry-run --config delete.retention.ms=0 /var/lib/kafka/data/users-0",
    )
    parser.add_argument("paths", nargs="+", metavar="DIR", help="partition or data directories")
    parser.add_argument("--dry-run", action="store_true", help="report what would be removed; change nothing")
    parser.add_argument("--now", type=int64, metavar="MS",
                        help="the clock (delete horizon, compaction lag), in ms since the epoch (default: now)")
    add_config_arguments(parser)
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
    from logstore.clock import ManualClock, SystemClock
    from logstore.config import LogConfig
    from logstore.log import Log

    given = given_configs(args)
    clock = ManualClock(args.now) if args.now is not None else SystemClock()
    resolved = [(path, topic_config(given, path, ASSUMED)) for path in partition_dirs(args.paths)]
    if not args.dry_run:
        require_known_configs(resolved, "compaction")
    # The cleaner's own settings (log.cleaner.*) are broker-wide: from the command line only.
    cleaner = Cleaner(LogConfig({**ASSUMED, **given.every_topic}))
    for path, chosen in resolved:
        if not chosen.config.compact:
            policy = ",".join(chosen.config.cleanup_policy)
            if args.json:
                write_json(sys.stdout, {"partition": path.name, "skipped": f"cleanup.policy={policy}",
                                        "configs": chosen.source})
            else:
                print(f"{path.name}: skipped, not a compacted topic (cleanup.policy={policy}; "
                      f"configs: {chosen.source})")
            continue
        log = Log.open(path, chosen.config, clock=clock, read_only=args.dry_run)
        try:
            result = cleaner.clean(log, dry_run=args.dry_run)
        finally:
            log.close()
        if args.json:
            write_json(sys.stdout, {**_as_json(path.name, result), "configs": chosen.source})
            continue
        verb = "would remove" if args.dry_run else "removed"
        reasons = ", ".join(f"{k} {v}" for k, v in result.removed_by_reason.items() if v) or "nothing"
        print(f"{path.name}: dirty ratio {result.dirty_ratio:.3f} ({result.due_reason or 'not due'}), "
              f"offsets [{result.first_dirty_offset}, {result.first_uncleanable_offset}) -> checkpoint "
              f"{result.end_offset}; {verb} {result.records_removed} of {result.records_read} records "
              f"({reasons}), {result.bytes_read - result.bytes_written} of {result.bytes_read} bytes "
              f"in {result.segments_cleaned} segments, {result.elapsed_s:.3f} s; configs: {chosen.source}")
    return ExitCode.OK

"""`logstore retention`: show (or run) one retention pass on partition directories.

The plan is the same pure function the engine runs (retention.plan_retention): Kafka's
log-start-offset, retention.bytes and retention.ms rules, oldest segments first, never at or
above the high watermark. With `--dry-run` the logs are opened read-only.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
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

COLUMNS = ("base offset", "next offset", "size", "largest timestamp", "reason")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `logstore retention`."""
    parser = add_command(
        subparsers, "retention",
        help="show or apply time, size and log-start-offset retention",
        description=(
            "Plan one retention pass on each partition directory given (or on every partition of\n"
            "a data directory) with Kafka's rules: segments wholly below the log start offset,\n"
            "then the oldest segments while the rest stays >= retention.bytes, then segments whose\n"
            "largest timestamp is older than retention.ms; nothing at or above the high watermark.\n"
            "Without --dry-run the segments are renamed to .deleted (removed after\n"
            "file.delete.delay.ms, or when the log is next opened).\n\n"
            "Configs: each topic's stored configs (logstore-topic-configs.json in the data\n"
            "directory, written by LogManager), with --config-file and --config over them. A topic\n"
            "with none of these is refused (nothing is deleted on a default nobody chose) unless\n"
            "--assume-defaults; --dry-run still plans it, on Kafka's defaults, and says so."
        ),
        example="logstore retention --dry-run --now 1700000000000 --config retention.ms=86400000 orders-0",
    )
    parser.add_argument("paths", nargs="+", metavar="DIR", help="partition or data directories")
    parser.add_argument("--now", type=int64, metavar="MS",
                        help="the clock, in ms since the epoch (default: now)")
    parser.add_argument("--dry-run", action="store_true", help="print the plan; change nothing")
    add_config_arguments(parser)
    parser.add_argument("--json", action="store_true", help="one JSON object per partition")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Plan (and unless --dry-run, apply) retention on every partition found; print each plan."""
    from logstore.clock import ManualClock, SystemClock
    from logstore.log import Log
    from retention import SegmentInfo, apply_retention, plan_for_log

    given = given_configs(args)
    clock = ManualClock(args.now) if args.now is not None else SystemClock()
    resolved = [(path, topic_config(given, path)) for path in partition_dirs(args.paths)]
    if not args.dry_run:
        require_known_configs(resolved, "retention")
    for path, chosen in resolved:
        log = Log.open(path, chosen.config, clock=clock, read_only=args.dry_run)
        try:
            now = clock.time_ms()
            before = {"logStartOffset": log.log_start_offset, "highWatermark": log.high_watermark,
                      "logEndOffset": log.log_end_offset, "size": log.size}
            preview = plan_for_log(log, now_ms=now)
            # Read segment metadata before any file is renamed.
            infos = {s.base_offset: SegmentInfo.of(s) for s in preview.segments}
            plan = preview if args.dry_run else apply_retention(log, now_ms=now)
        finally:
            log.close()
        rows = [(infos[s.base_offset], reason) for s, reason in plan.deletions]
        summary = {"partition": path.name, "dryRun": args.dry_run, "now": now, **before,
                   "newLogStartOffset": plan.new_log_start_offset, "bytesReclaimed": plan.bytes_reclaimed,
                   "rollActiveFirst": plan.roll_active_first, "configs": chosen.source}
        if args.json:
            write_json(sys.stdout, {**summary, "deletions": [_row_json(info, reason) for info, reason in rows]})
        else:
            _print_table(summary, rows)
    return ExitCode.OK


def _row_json(info: Any, reason: str) -> dict[str, Any]:
    return {"baseOffset": info.base_offset, "nextOffset": info.next_offset, "size": info.size,
            "largestTimestamp": info.largest_timestamp, "reason": reason}


def _timestamp(ms: int) -> str:
    if ms < 0:
        return str(ms)
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _print_table(summary: dict[str, Any], rows: list[tuple[Any, str]]) -> None:
    verb = "would delete" if summary["dryRun"] else "deleted"
    print(f"{summary['partition']}: {verb} {len(rows)} segment(s), {summary['bytesReclaimed']} of "
          f"{summary['size']} bytes; log start offset {summary['logStartOffset']} -> "
          f"{summary['newLogStartOffset']} (high watermark {summary['highWatermark']}, log end "
          f"{summary['logEndOffset']}, now {summary['now']})"
          + ("; rolls the active segment first" if summary["rollActiveFirst"] else "")
          + f"; configs: {summary['configs']}")
    if not rows:
        return
    cells = [[str(i.base_offset), str(i.next_offset), str(i.size), _timestamp(i.largest_timestamp), reason]
             for i, reason in rows]
    widths = [max(len(h), *(len(c[k]) for c in cells)) for k, h in enumerate(COLUMNS)]
    print("  " + "  ".join(h.ljust(w) for h, w in zip(COLUMNS, widths, strict=True)).rstrip())
    for c in cells:
        print("  " + "  ".join(v.rjust(w) if k < 3 else v.ljust(w)
                               for k, (v, w) in enumerate(zip(c, widths, strict=True))).rstrip())

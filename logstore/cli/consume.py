"""`logstore consume`: print a partition's records as JSON Lines, read-only.

Opens the partition with `read_only=True` (no lock, no byte changed), so it works on a
copied Kafka directory too. Control markers are never printed; READ_COMMITTED also stops
at the last stable offset and drops aborted transactional data, as a Kafka consumer does.
"""

from __future__ import annotations

import argparse
import base64
import sys
from typing import Any

from logstore.cli._common import (
    ExitCode,
    UsageError,
    add_command,
    add_partition_arguments,
    int64,
    non_negative_int,
    partition_path,
    write_json,
)

FETCH_BYTES = 1 << 20


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `logstore consume`."""
    parser = add_command(
        subparsers, "consume",
        help="print TOPIC-PARTITION's records as JSON Lines (read-only)",
        description=(
            "Print the records of DIR/TOPIC-PARTITION from an offset or a timestamp as JSON Lines\n"
            "{offset, timestamp, key, value, headers}; keys and values are UTF-8 text (invalid bytes\n"
            "replaced) or, with --base64, base64. The directory is opened read-only."
        ),
        example="logstore consume ./data orders-0 --from 100 --max-records 10",
    )
    add_partition_arguments(parser)
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--from", dest="from_offset", type=int64, metavar="OFFSET",
                       help="first offset (default: the log start offset)")
    start.add_argument("--from-time", type=int64, metavar="TS",
                       help="start at the first record with timestamp >= TS (ms)")
    parser.add_argument("--isolation", choices=("read_uncommitted", "read_committed"),
                        default="read_uncommitted", help="Kafka's isolation level")
    parser.add_argument("--max-records", type=non_negative_int, metavar="N",
                        help="stop after N records")
    parser.add_argument("--base64", action="store_true", help="print keys and values as base64")
    parser.set_defaults(run=run)


def _text(data: bytes | None, b64: bool) -> str | None:
    if data is None:
        return None
    return base64.b64encode(data).decode("ascii") if b64 else data.decode("utf-8", errors="replace")


def record_json(record: Any, b64: bool) -> dict[str, Any]:
    """The JSON object of one record."""
    return {
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": _text(record.key, b64),
        "value": _text(record.value, b64),
        "headers": [[k, _text(v, b64)] for k, v in record.headers],
    }


def transactions(log: Any) -> tuple[int, dict[int, list[tuple[int, int]]]]:
    """(last stable offset, aborted ranges per producer id) from one scan of batch headers.

    A transaction runs from a producer's first transactional batch to its COMMIT/ABORT
    marker; the LSO is the first offset of the earliest transaction still open (else the
    high watermark). Read from the log itself, so no `.txnindex` or snapshot is needed.
    """
    from logstore import dump
    from logstore.errors import CorruptRecordError

    open_first: dict[int, int] = {}
    aborted: dict[int, list[tuple[int, int]]] = {}
    for segment in log.segments:
        for batch in segment.iter_batches():
            if batch.producer_id < 0 or not batch.is_transactional:
                continue
            if batch.is_control:
                records = batch.records()
                if not records:  # Kafka reads the marker as the batch's first record
                    raise CorruptRecordError("control batch without a marker record",
                                             path=str(segment.log_path), position=batch.position)
                marker = dump.control_fields(records[0].key, records[0].value).get("endTxnMarker")
                first = open_first.pop(batch.producer_id, None)
                if marker == "ABORT" and first is not None:
                    aborted.setdefault(batch.producer_id, []).append((first, batch.last_offset))
            else:
                open_first.setdefault(batch.producer_id, batch.base_offset)
    lso = min([*open_first.values(), log.high_watermark])
    return lso, aborted


def is_aborted(batch: Any, aborted: dict[int, list[tuple[int, int]]]) -> bool:
    """True for a transactional data batch inside one of its producer's aborted ranges."""
    return batch.is_transactional and any(
        first <= batch.base_offset <= last for first, last in aborted.get(batch.producer_id, ()))


def run(args: argparse.Namespace) -> int:
    """Print records from the chosen start up to the log end (or the LSO)."""
    from logstore.log import Log

    path = partition_path(args)
    if not path.is_dir():
        raise FileNotFoundError(2, "No such partition directory", str(path))
    committed = args.isolation == "read_committed"
    out = sys.stdout
    with Log.open(path, read_only=True) as log:
        if args.from_time is not None:
            found = log.offset_for_timestamp(args.from_time)
            position = log.log_end_offset if found is None else found.offset
        else:
            position = log.log_start_offset if args.from_offset is None else args.from_offset
        if position > log.log_end_offset or position < log.log_start_offset:
            raise UsageError(f"offset {position} is out of range for {path.name}: valid "
                             f"offsets are [{log.log_start_offset}, {log.log_end_offset}]")
        limit, aborted = transactions(log) if committed else (log.log_end_offset, {})
        remaining = args.max_records
        while position < limit and remaining != 0:
            batches = list(log.read(position, FETCH_BYTES, max_offset=limit).batches())
            if not batches:
                break
            for batch in batches:
                if batch.is_control or (committed and is_aborted(batch, aborted)):
                    continue
                for record in batch.records():
                    if record.offset < position or remaining == 0:
                        continue
                    write_json(out, record_json(record, args.base64))
                    if remaining is not None:
                        remaining -= 1
            position = max(position, batches[-1].next_offset)
    out.flush()
    return ExitCode.OK

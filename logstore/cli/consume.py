"""`logstore consume`: print a partition's records as JSON Lines, read-only.

Opens the partition with `read_only=True` (no lock, no byte changed), so it works on a
copied Kafka directory too, recovering in memory from the checkpointed recovery point as Kafka
would: a torn or corrupt tail is not read, and offsets past it are out of range. Control markers are never printed; READ_COMMITTED is the Log's
own read_committed fetch (up to the last stable offset, with the aborted transactions, which
a read-only Log rebuilds in memory when `.txnindex` files are missing) filtered as a Kafka
consumer does.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import sys
from collections.abc import Iterator
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
from logstore.tools.record_decoders import INTERNAL_TOPICS, decoder_for

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
    parser.add_argument("--decode", action="store_true",
                        help="add each record of an internal topic (__consumer_offsets, __transaction_state, "
                             "__cluster_metadata) decoded, as `decoded` (or `decodeError`)")
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


@contextlib.contextmanager
def naming_segment(log: Any, first_offset: int) -> Iterator[None]:
    """Re-raise damage found in a fetch that starts at `first_offset` as CorruptRecordError
    naming the segment file and the byte position in it (a fetch only knows its own bytes)."""
    from logstore.cli._common import corruption_detail
    from logstore.errors import CorruptRecordError

    try:
        yield
    except CorruptRecordError as exc:
        segment = next(s for s in reversed(log.segments) if s.base_offset <= first_offset)
        found = segment.translate_offset(first_offset)
        start = found.position if found is not None else 0
        raise CorruptRecordError(corruption_detail(exc), path=str(segment.log_path),
                                 position=start + (exc.position or 0)) from None


def whole_batches(log: Any, fetched: Any) -> tuple[list[Any], Exception | None]:
    """The fetch's batches up to the first damaged one, and that damage (naming its segment
    file and position) or None."""
    from logstore.errors import CorruptRecordError

    batches: list[Any] = []
    try:
        with naming_segment(log, fetched.first_offset):
            batches.extend(fetched.batches())
    except CorruptRecordError as exc:
        return batches, exc
    return batches, None


def run(args: argparse.Namespace) -> int:
    """Print records from the chosen start up to the log end (or the LSO)."""
    from logstore.log import Log
    from logstore.producer_append import committed_batches

    path = partition_path(args)
    if not path.is_dir():
        raise FileNotFoundError(2, "No such partition directory", str(path))
    decoder = None
    if args.decode:
        topic = path.name.rsplit("-", 1)[0]
        decoder = decoder_for(topic)
        if decoder is None:
            raise UsageError(f"--decode: {topic} is not an internal topic ({', '.join(INTERNAL_TOPICS)})")
    committed = args.isolation == "read_committed"
    out = sys.stdout
    with Log.open(path, read_only=True) as log:  # what Kafka's recovery keeps, no byte written
        if args.from_time is not None:
            found = log.offset_for_timestamp(args.from_time)
            position = log.log_end_offset if found is None else found.offset
        else:
            position = log.log_start_offset if args.from_offset is None else args.from_offset
        if position > log.log_end_offset or position < log.log_start_offset:
            raise UsageError(f"offset {position} is out of range for {path.name}: valid "
                             f"offsets are [{log.log_start_offset}, {log.log_end_offset}]")
        isolation = "read_committed" if committed else "log_end"
        limit = log.last_stable_offset if committed else log.log_end_offset
        remaining = args.max_records
        while position < limit and remaining != 0:
            fetched = log.read(position, FETCH_BYTES, max_offset=limit, isolation=isolation)
            batches, damage = whole_batches(log, fetched)
            kept = (committed_batches(batches, fetched.aborted_transactions) if committed
                    else (b for b in batches if not b.is_control))
            with naming_segment(log, fetched.first_offset):
                for batch in kept:
                    for record in batch.records():
                        if record.offset < position or remaining == 0:
                            continue
                        obj = record_json(record, args.base64)
                        if decoder is not None:
                            obj.update(decoder.fields(record))
                        write_json(out, obj)
                        if remaining is not None:
                            remaining -= 1
            if damage is not None:  # the records before it are printed, as a Kafka consumer gets them
                raise damage
            if not batches:
                break
            position = max(position, batches[-1].next_offset)
    out.flush()
    return ExitCode.OK

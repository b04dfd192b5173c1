"""`logstore produce`: append records read from stdin to a partition of a data directory.

Input is JSON Lines (`{"key": ..., "value": ..., "headers": {...}, "timestamp": ...}`,
every field optional) or `key<TAB>value` lines. Records are appended in batches through
the engine's leader path, so offsets, indexes and checkpoints are exactly what the engine
writes.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import sys
from collections.abc import Iterator
from itertools import islice
from typing import Any

from logstore.cli._common import (
    ExitCode,
    UsageError,
    add_command,
    add_config_arguments,
    add_partition_arguments,
    given_configs,
    partition_path,
    positive_int,
    topic_config,
)
from logstore.config import LONG_MAX
from logstore.records.compression import COMPRESSION_NAMES


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `logstore produce`."""
    parser = add_command(
        subparsers, "produce",
        help="append JSON Lines or key<TAB>value lines from stdin to TOPIC-PARTITION",
        description=(
            "Append records from stdin to the partition directory DIR/TOPIC-PARTITION (created if\n"
            "missing). JSON Lines objects may hold key, value (strings or null), headers (an object\n"
            "or a list of [key, value] pairs) and timestamp (ms); tsv lines are key<TAB>value\n"
            "(a line without a tab is a value with a null key). Prints the offsets assigned.\n\n"
            "Configs: the topic's stored configs (logstore-topic-configs.json in DIR), with\n"
            "--config-file and --config over them for this run. A partition this command creates\n"
            "for a topic with no stored configs stores the given ones (none: Kafka's defaults)."
        ),
        example="printf '{\"key\": \"k1\", \"value\": \"hello\"}\\n' | logstore produce ./data orders-0",
    )
    add_partition_arguments(parser)
    parser.add_argument("--format", choices=("jsonl", "tsv"), default="jsonl", help="input format")
    parser.add_argument("--base64", action="store_true",
                        help="keys, values and header values in the input are base64")
    parser.add_argument("--batch-size", type=positive_int, default=500, metavar="N",
                        help="records per appended batch (default: 500)")
    parser.add_argument("--compression", choices=COMPRESSION_NAMES, default="none",
                        help="batch compression (default: none)")
    add_config_arguments(parser, assume_defaults=False)
    parser.set_defaults(run=run)


def _bytes(value: Any, line: int, what: str, b64: bool) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise UsageError(f"stdin line {line}: {what} must be a string or null")
    if b64:
        try:
            return base64.b64decode(value, validate=True)
        except binascii.Error:
            raise UsageError(f"stdin line {line}: {what} is not valid base64") from None
    return value.encode("utf-8")


def parse_json_line(text: str, line: int, b64: bool) -> tuple[bytes | None, bytes | None, tuple, int | None]:
    """One JSON Lines record -> (key, value, headers, timestamp or None)."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"stdin line {line}: not valid JSON ({exc.msg})") from None
    if not isinstance(obj, dict):
        raise UsageError(f"stdin line {line}: expected a JSON object")
    unknown = set(obj) - {"key", "value", "headers", "timestamp"}
    if unknown:
        raise UsageError(f"stdin line {line}: unknown field(s) {', '.join(sorted(unknown))}")
    raw_headers = obj.get("headers") or {}
    pairs = raw_headers.items() if isinstance(raw_headers, dict) else raw_headers
    try:
        headers = tuple((str(k), _bytes(v, line, "a header value", b64)) for k, v in pairs)
    except (TypeError, ValueError):
        raise UsageError(f"stdin line {line}: headers must be an object or [key, value] pairs") from None
    timestamp = obj.get("timestamp")
    if timestamp is not None and (isinstance(timestamp, bool) or not isinstance(timestamp, int)
                                  or not 0 <= timestamp <= LONG_MAX):
        raise UsageError(f"stdin line {line}: timestamp must be an integer of ms in [0, {LONG_MAX}]")
    return (_bytes(obj.get("key"), line, "key", b64), _bytes(obj.get("value"), line, "value", b64),
            headers, timestamp)


def parse_tsv_line(text: str, line: int, b64: bool) -> tuple[bytes | None, bytes | None, tuple, None]:
    """`key<TAB>value` -> (key, value, (), None); without a tab the line is the value."""
    key, sep, value = text.partition("\t")
    if not sep:
        return None, _bytes(key, line, "value", b64), (), None
    return _bytes(key, line, "key", b64), _bytes(value, line, "value", b64), (), None


def read_records(stream: Any, fmt: str, b64: bool) -> Iterator[tuple]:
    """Parsed records of every non-empty input line."""
    parse = parse_json_line if fmt == "jsonl" else parse_tsv_line
    for number, raw in enumerate(stream, start=1):
        text = raw.rstrip("\n").rstrip("\r")
        if text.strip():
            yield parse(text, number, b64)


def run(args: argparse.Namespace) -> int:
    """Append stdin's records in batches; print the first and last offsets assigned."""
    from logstore.log import Log
    from logstore.records import Record, build_batch
    from logstore.topic_configs import store_topic_configs, stored_topic_configs

    path = partition_path(args)
    given = given_configs(args)
    if path.parent.exists() and not path.parent.is_dir():
        raise NotADirectoryError(20, "Not a directory", str(path.parent))
    chosen = topic_config(given, path)
    topic = path.name.rpartition("-")[0]
    first = last = None
    count = 0
    records = read_records(sys.stdin, args.format, args.base64)
    batch_size = min(args.batch_size, sys.maxsize)
    pending = list(islice(records, batch_size))  # bad first lines fail before the log is touched
    new_topic = not path.exists() and stored_topic_configs(path.parent, topic) is None
    with Log.open(path, chosen.config) as log:
        if new_topic:  # before the first record: the topic's data never exists without them
            store_topic_configs(path.parent, topic, given.for_topic(topic))
        while pending:
            now = log.clock.time_ms()
            batch = [Record(i, now if ts is None else ts, key, value, headers)
                     for i, (key, value, headers, ts) in enumerate(pending)]
            info = log.append(build_batch(batch, compression=args.compression))
            first = info.first_offset if first is None else first
            last = info.last_offset
            count += len(pending)
            pending = list(islice(records, batch_size))
    if count:
        print(f"appended {count} records to {path.name} at offsets {first}..{last}")
    else:
        print(f"appended 0 records to {path.name}")
    return ExitCode.OK

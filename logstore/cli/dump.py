"""`logstore dump`: print segment, index, snapshot and checkpoint files as Kafka's DumpLogSegments does.

Reads only: `.log` files are mapped read-only, index files are read as bytes (never through
the engine's index classes, which preallocate and trim), nothing is created or locked.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import mmap
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from logstore.checkpoint import OFFSET_CHECKPOINTS
from logstore.cli._common import ExitCode, Progress, UsageError, add_command, int32, naming_file
from logstore.config import INT_MAX
from logstore.epoch import CHECKPOINT_FILE_NAME as LEADER_EPOCH_CHECKPOINT
from logstore.errors import CorruptRecordError
from logstore.log_files import (
    BOOTSTRAP_SNAPSHOT,
    CHECKPOINT_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    kraft_snapshot_file_name,
    offset_prefix,
    parse_kraft_snapshot_name,
    segment_file_name,
    sibling_file_name,
)

LOG, INDEX, TIMEINDEX, SNAPSHOT, TXNINDEX, EPOCHS, OFFSETS, KRAFT_SNAPSHOT = (
    "log", "index", "timeindex", "snapshot", "txnindex", "epochs", "offsets", "kraft-snapshot")
SUFFIX_KINDS = {LOG_SUFFIX: LOG, INDEX_SUFFIX: INDEX, TIME_INDEX_SUFFIX: TIMEINDEX,
                SNAPSHOT_SUFFIX: SNAPSHOT, TXN_INDEX_SUFFIX: TXNINDEX, CHECKPOINT_SUFFIX: KRAFT_SNAPSHOT}
NOT_SEGMENT_FILES = (EPOCHS, OFFSETS, KRAFT_SNAPSHOT)
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024  # Kafka's --max-message-size default
DEFAULT_MAX_BYTES = INT_MAX  # Kafka's --max-bytes default: "no limit"
WRITE_CHUNK_BYTES = 1 << 20


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `logstore dump`."""
    parser = add_command(
        subparsers, "dump",
        help="print segment, index, snapshot and checkpoint files (Kafka's DumpLogSegments)",
        description=(
            "Print .log, .index, .timeindex, .txnindex, .snapshot, KRaft .checkpoint and\n"
            "leader-epoch-checkpoint files line for line as Kafka's kafka-dump-log.sh\n"
            "(DumpLogSegments) does, or as JSON Lines. Index dumps check every entry against the\n"
            "segment and report mismatches on stderr. The decoder options print the records of\n"
            "__consumer_offsets, __transaction_state and __cluster_metadata decoded."
        ),
        example="logstore dump --deep-iteration --print-data-log --files 00000000000000000000.log",
    )
    parser.add_argument("paths", nargs="*", metavar="FILE", help="files to dump (as --files)")
    parser.add_argument("--files", action="append", default=[], metavar="F1,F2,...",
                        help="comma-separated list of files to dump (repeatable)")
    parser.add_argument("--deep-iteration", action="store_true",
                        help="print every record, not only batches (implied by --print-data-log)")
    parser.add_argument("--print-data-log", action="store_true",
                        help="print record keys and values (UTF-8) as key:/payload:")
    parser.add_argument("--verify-index-only", action="store_true",
                        help="check index entries against the log without printing them")
    parser.add_argument("--index-sanity-check", action="store_true",
                        help="only run the sanity check Kafka runs on index files at start-up")
    parser.add_argument("--max-bytes", type=int32, default=DEFAULT_MAX_BYTES, metavar="N",
                        help="read at most N bytes of each .log file (default: all)")
    parser.add_argument("--max-message-size", type=int32, default=DEFAULT_MAX_MESSAGE_SIZE,
                        metavar="N", help="largest batch an index entry may point at (default: 5 MiB)")
    parser.add_argument("--skip-record-metadata", action="store_true",
                        help="omit the offset/timestamp/size part of record lines")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object per batch or entry (records nested under --deep-iteration)")
    decoders = parser.add_mutually_exclusive_group()
    decoders.add_argument("--offsets-decoder", dest="decoder", action="store_const", const="offsets",
                          help="decode records as __consumer_offsets data (implies --print-data-log)")
    decoders.add_argument("--transaction-log-decoder", dest="decoder", action="store_const",
                          const="transaction-log",
                          help="decode records as __transaction_state data (implies --print-data-log)")
    decoders.add_argument("--cluster-metadata-decoder", dest="decoder", action="store_const",
                          const="cluster-metadata",
                          help="decode records as KRaft cluster metadata (implies --print-data-log)")
    parser.set_defaults(run=run)


def file_kind(path: str) -> str:
    """The kind of file `path` names, from its suffix or name; UsageError for anything else."""
    name = os.path.basename(path.rstrip("/"))
    if name == LEADER_EPOCH_CHECKPOINT:
        return EPOCHS
    if name in OFFSET_CHECKPOINTS:
        return OFFSETS
    kind = SUFFIX_KINDS.get(os.path.splitext(name)[1])
    if kind is None:
        raise UsageError(
            f"cannot dump {path}: not a .log, .index, .timeindex, .txnindex, .snapshot, .checkpoint, "
            f"{LEADER_EPOCH_CHECKPOINT} or offset checkpoint file")
    if kind == KRAFT_SNAPSHOT and name != BOOTSTRAP_SNAPSHOT and parse_kraft_snapshot_name(name) is None:
        raise UsageError(f"cannot dump {path}: a KRaft snapshot is named by its end offset and epoch "
                         f"(e.g. {kraft_snapshot_file_name(0, 0)}) or is {BOOTSTRAP_SNAPSHOT}")
    return kind


def base_offset_of(path: str) -> int:
    """The base offset a segment file is named by (the digits before the first dot)."""
    offset = offset_prefix(os.path.basename(path))
    if offset is None:
        raise UsageError(f"cannot dump {path}: a segment file is named by its base offset "
                         f"(e.g. {segment_file_name(0, os.path.splitext(path)[1])})")
    return offset


def sibling(path: str, suffix: str) -> str:
    """The file of the same segment with another suffix (Kafka: name up to the first dot)."""
    directory = os.path.dirname(os.path.abspath(path))
    return os.path.join(directory, sibling_file_name(os.path.basename(path), suffix))


class MappedFile:
    """A file mapped read-only (an empty file reads as b""); a context manager."""

    def __init__(self, path: str):
        self._file = open(path, "rb")  # noqa: SIM115 - closed in close()
        size = os.fstat(self._file.fileno()).st_size
        self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if size else None
        self.data: Any = self._map if self._map is not None else b""

    def close(self) -> None:
        """Unmap and close."""
        if self._map is not None:
            # Batch views may still point in; the mapping then goes when they are collected.
            with contextlib.suppress(BufferError):
                self._map.close()
        self._file.close()

    def __enter__(self) -> MappedFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Problems:
    """What the dump found wrong, reported after all files as Kafka does."""

    index_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_out_of_order: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    non_consecutive: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    found: bool = False  # anything that makes the exit code 1

    def add(self, table: dict[str, list[tuple[int, int]]], path: str, pair: tuple[int, int]) -> None:
        """Record one (expected, found) pair for `path`."""
        table.setdefault(os.path.abspath(path), []).append(pair)


@dataclass
class Options:
    """The dump options, resolved as Kafka resolves them."""

    deep: bool
    print_data: bool
    verify_only: bool
    sanity_only: bool
    max_bytes: int
    max_message_size: int
    skip_metadata: bool
    json: bool
    decoder: Any  # a logstore.record_decoders.RecordDecoder


class Output:
    """Text lines or JSON objects, gathered as UTF-8 bytes and written in large chunks."""

    def __init__(self, stream: TextIO, as_json: bool):
        self.stream = stream
        self.json = as_json
        self._binary = getattr(stream, "buffer", None)
        self._chunks: list[bytes | memoryview] = []
        self._size = 0

    def _add(self, data: bytes | memoryview) -> None:
        self._chunks.append(data)
        self._size += len(data)
        if self._size >= WRITE_CHUNK_BYTES:
            self.flush()

    def line(self, text: str) -> None:
        """One text line (ignored in JSON mode)."""
        if not self.json:
            self._add(f"{text}\n".encode())

    def lines(self, texts: Iterable[str]) -> None:
        """Text lines (ignored in JSON mode)."""
        if not self.json:
            block = "\n".join(texts)
            if block:
                self._add(f"{block}\n".encode())

    def obj(self, obj: dict[str, Any]) -> None:
        """One JSON object on its own line (ignored in text mode)."""
        if self.json:
            self._add(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n")

    def flush(self) -> None:
        """Write what is gathered."""
        data = b"".join(self._chunks)
        self._chunks.clear()
        self._size = 0
        if self._binary is None:
            self.stream.write(data.decode())
            self.stream.flush()
        else:
            self.stream.flush()
            self._binary.write(data)
            self._binary.flush()


def run(args: argparse.Namespace) -> int:
    """Dump every requested file; exit 1 when a problem was reported."""
    paths = list(args.paths)
    for group in args.files:
        paths.extend(p for p in group.split(",") if p)
    if not paths:
        raise UsageError("no files to dump: give --files F1,F2,... or FILE arguments")
    kinds = [file_kind(p) for p in paths]
    for path, kind in zip(paths, kinds, strict=True):
        if kind not in NOT_SEGMENT_FILES:
            base_offset_of(path)  # a misnamed file is a usage error before anything is printed
    from logstore.record_decoders import DECODERS

    decoder = getattr(args, "decoder", None)
    opts = Options(
        deep=args.deep_iteration or args.print_data_log or decoder is not None,
        print_data=args.print_data_log or decoder is not None,
        verify_only=args.verify_index_only,
        sanity_only=args.index_sanity_check,
        max_bytes=args.max_bytes,
        max_message_size=args.max_message_size,
        skip_metadata=args.skip_record_metadata,
        json=args.json,
        decoder=DECODERS[decoder or "string"],
    )
    out = Output(sys.stdout, args.json)
    problems = Problems()
    try:
        for path, kind in zip(paths, kinds, strict=True):
            out.line(f"Dumping {path}")
            DUMPERS[kind](path, opts, out, problems)
            out.flush()
    finally:
        out.flush()
        report(problems, out)
    return ExitCode.PROBLEMS if problems.found else ExitCode.OK


def report(problems: Problems, out: Output) -> None:
    """Kafka's end-of-run reports on stderr (or as JSON objects on stdout)."""
    from logstore import dump

    if out.json:
        sections = (("index_mismatch", problems.index_mismatches),
                    ("time_index_mismatch", problems.time_mismatches),
                    ("time_index_out_of_order", problems.time_out_of_order),
                    ("time_index_offset_not_found", problems.time_not_found),
                    ("non_consecutive_offsets", problems.non_consecutive))
        for name, table in sections:
            for path, pairs in table.items():
                for first, second in pairs:
                    out.obj({"type": "problem", "problem": name, "file": path,
                             "expected": first, "found": second})
        out.flush()
        return
    lines: list[str] = []
    for path, pairs in problems.index_mismatches.items():
        lines += dump.index_mismatch_report(path, pairs)
    for path, pairs in problems.time_mismatches.items():
        lines += dump.time_index_report(path, pairs, [], [])
    for path, pairs in problems.time_out_of_order.items():
        lines += dump.time_index_report(path, [], pairs, [])
    for path, pairs in problems.time_not_found.items():
        lines += dump.time_index_report(path, [], [], pairs)
    for path, pairs in problems.non_consecutive.items():
        lines += dump.non_consecutive_report(path, pairs)
    if lines:
        sys.stderr.write("\n".join(lines) + "\n")


def dump_log(path: str, opts: Options, out: Output, problems: Problems) -> None:
    """Batches (and records under --deep-iteration) of a `.log` file, then any torn tail."""
    from logstore import dump

    out.line(dump.log_header_line(base_offset_of(path)))
    dump_batches(path, opts, out, problems)


def dump_kraft_snapshot(path: str, opts: Options, out: Output, problems: Problems) -> None:
    """A KRaft snapshot (`.checkpoint`): record batches, dumped as a `.log` file is."""
    from logstore import dump

    name = os.path.basename(path)
    if name == BOOTSTRAP_SNAPSHOT:
        out.line(dump.bootstrap_snapshot_header_line())
        out.obj({"type": "kraft_snapshot", "file": path, "bootstrap": True})
    else:
        end_offset, epoch = parse_kraft_snapshot_name(name)
        out.line(dump.kraft_snapshot_header_line(end_offset, epoch))
        out.obj({"type": "kraft_snapshot", "file": path, "endOffset": end_offset, "epoch": epoch})
    dump_batches(path, opts, out, problems)


def dump_batches(path: str, opts: Options, out: Output, problems: Problems) -> None:
    """Every batch of a file of record batches (and its records under --deep-iteration), then
    any torn tail."""
    from logstore import dump
    from logstore.records import read_batch

    with MappedFile(path) as mapped:
        data = mapped.data
        end = min(len(data), opts.max_bytes)
        valid_bytes = 0
        last_offset = -1
        with Progress(total=end, desc=os.path.basename(path), unit="B", unit_scale=True,
                      quiet_when_stdout_tty=True) as bar, naming_file(path):
            spans = dump.iter_batch_spans(data, 0, end)
            while True:
                try:
                    position, size = next(spans)
                except StopIteration:
                    break
                except CorruptRecordError as exc:  # no size to step over: the walk ends here
                    corrupt_entry(exc, path, out, problems)
                    return
                valid_bytes = position + size
                bar.update(size)
                try:
                    last_offset = dump_batch(read_batch(data, position), position, path, opts, out,
                                             problems, last_offset)
                except CorruptRecordError as exc:  # its size field holds: go on to the next one
                    corrupt_entry(exc, path, out, problems, position)
    trailing = end - valid_bytes
    if trailing > 0 and opts.max_bytes == DEFAULT_MAX_BYTES:
        problems.found = True
        out.line(dump.trailing_bytes_line(trailing, os.path.basename(path)))
        out.obj({"type": "problem", "problem": "invalid_trailing_bytes", "file": path,
                 "position": valid_bytes, "bytes": trailing})


def dump_batch(batch: Any, position: int, path: str, opts: Options, out: Output, problems: Problems,
               last_offset: int) -> int:
    """One batch (and its records under --deep-iteration); returns the last offset seen."""
    from logstore import dump

    problems.found |= not dump.kafka_is_valid(batch)
    if out.json:
        records = legacy = None
        if opts.deep:
            records, legacy = decode_records(batch, path, position)
            offsets = [r.offset for r in records]
        obj = dump.batch_json(batch, position, records, print_data=opts.print_data,
                              legacy=legacy, decoder=opts.decoder)
        out.obj({"type": obj.pop("type"), "file": path, **obj})
    elif opts.deep:
        out.line(dump.batch_line(batch, position))
        offsets = write_records(batch, path, position, opts, out)
    else:
        out.line(dump.batch_line(batch, position))
    if opts.deep:
        return check_consecutive(offsets, last_offset, path, problems)
    return last_offset


def corrupt_entry(exc: CorruptRecordError, path: str, out: Output, problems: Problems,
                  entry_position: int | None = None) -> None:
    """One problem line (stderr; a problem object under --json) for an entry that does not read."""
    problems.found = True
    position = exc.position if exc.position is not None else entry_position
    out.flush()
    if out.json:
        out.obj({"type": "problem", "problem": "corrupt_entry", "file": path, "position": position,
                 "message": exc.detail})
    else:
        sys.stderr.write(f"logstore: {path}: position {position}: {exc.detail}\n")
        sys.stderr.flush()


def write_records(batch: Any, path: str, position: int, opts: Options, out: Output) -> Any:
    """Write the record lines of one batch for a text deep dump; return the records' offsets."""
    from logstore import dump

    if batch.magic < 2 or batch.is_control or opts.decoder.name != "string":
        records, legacy = decode_records(batch, path, position)
        with decoding(path, position):
            out.lines([dump.record_line(batch, r, print_data=opts.print_data,
                                        skip_metadata=opts.skip_metadata,
                                        legacy=None if legacy is None else legacy[i], decoder=opts.decoder)
                       for i, r in enumerate(records)])
        return [r.offset for r in records]
    with decoding(path, position):
        out.lines(dump.record_lines(batch, print_data=opts.print_data, skip_metadata=opts.skip_metadata))
        return batch.columns().offset


@contextlib.contextmanager
def decoding(path: str, position: int) -> Iterator[None]:
    """Re-raise a record decoding error as one naming the file and the batch's position."""
    from logstore.errors import CorruptRecordError

    try:
        yield
    except CorruptRecordError as exc:
        inner = position if exc.position is None else exc.position
        batch = "the batch's records" if inner == position else f"the records of the batch at position {position}"
        raise CorruptRecordError(f"cannot decode {batch}: {exc.detail}", path=path, position=inner) from exc


def check_consecutive(offsets: Any, last_offset: int, path: str, problems: Problems) -> int:
    """Record Kafka's non-consecutive offset pairs; return the last offset seen."""
    import numpy as np

    offsets = np.asarray(offsets, dtype=np.int64)
    if offsets.size == 0:
        return last_offset
    if last_offset != -1 and int(offsets[0]) != last_offset + 1:
        problems.add(problems.non_consecutive, path, (last_offset, int(offsets[0])))
    for gap in np.flatnonzero(np.diff(offsets) != 1).tolist():
        problems.add(problems.non_consecutive, path, (int(offsets[gap]), int(offsets[gap + 1])))
    return int(offsets[-1])


def decode_records(batch: Any, path: str, position: int) -> tuple[list[Any], list[Any] | None]:
    """The batch's records (and, for magic 0/1, each message's validity and CRC)."""
    with decoding(path, position):
        records = batch.records()
    if batch.magic >= 2:
        return records, None
    return records, legacy_entries(batch)


def legacy_entries(batch: Any) -> list[Any]:
    """Validity and CRC-32 of each magic 0/1 message (the inner ones of a compressed wrapper,
    which `records()` decoded and CRC-checked through the records package)."""
    from logstore import dump

    if batch.compression == "none":
        return [dump.LegacyEntry(dump.kafka_is_valid(batch), batch.crc)]
    return [dump.LegacyEntry(True, crc) for crc in batch.message_crcs()]


def first_batch_last_offset(data: Any, position: int, end: int, path: str) -> int:
    """Last offset of the first complete batch in data[position:end], or -1 if there is none.

    Raises CorruptRecordError naming `path` when the bytes there have an impossible length.
    """
    from logstore import dump
    from logstore.records import read_batch_header

    if not 0 <= position <= len(data):  # an index entry from a corrupt file may point anywhere
        return -1
    for batch_position, _ in dump.iter_batch_spans(data, position, end, path=path):
        return read_batch_header(data, batch_position).last_offset
    return -1


def read_bytes(path: str) -> bytes:
    """The whole file (index files are small)."""
    with open(path, "rb") as f:
        return f.read()


def dump_offset_index(path: str, opts: Options, out: Output, problems: Problems) -> None:
    """Entries of a `.index` file, each checked against the batch it points at."""
    from logstore import dump
    from logstore.errors import CorruptIndexError

    base_offset = base_offset_of(path)
    log_path = sibling(path, LOG_SUFFIX)
    with MappedFile(log_path) as log:
        data = read_bytes(path)
        offsets, positions = dump.read_offset_index(data, base_offset)
        if len(offsets) == 0:
            out.line(f"{path} is empty.")
            out.obj({"type": "index_empty", "file": path})
            return
        if opts.sanity_only:
            error = dump.offset_index_sanity_error(offsets, len(data), base_offset, os.path.abspath(path))
            if error:
                raise CorruptIndexError(error)
            out.line(f"{path} passed sanity check.")
            out.obj({"type": "sanity_check", "file": path, "passed": True})
            return
        for i in range(dump.sparse_entry_count(offsets, base_offset)):
            offset, position = int(offsets[i]), int(positions[i])
            end = min(len(log.data), position + opts.max_message_size)
            found = first_batch_last_offset(log.data, position, end, log_path)
            if found != offset:
                problems.found = True
                problems.add(problems.index_mismatches, path, (offset, found))
            if not opts.verify_only:
                out.line(dump.offset_index_line(offset, position))
                out.obj({"type": "index_entry", "file": path, "offset": offset, "position": position})


def dump_time_index(path: str, opts: Options, out: Output, problems: Problems) -> None:
    """Entries of a `.timeindex` file, each checked against the batch holding its offset."""
    from logstore import dump
    from logstore.errors import CorruptIndexError
    from logstore.records import read_batch

    base_offset = base_offset_of(path)
    log_path = sibling(path, LOG_SUFFIX)
    with MappedFile(log_path) as log:
        index_path = sibling(path, INDEX_SUFFIX)
        # Kafka would create a missing offset index here; a read-only dump treats it as empty.
        index_data = read_bytes(index_path) if os.path.exists(index_path) else b""
        index_offsets, index_positions = dump.read_offset_index(index_data, base_offset)
        n_index = dump.sparse_entry_count(index_offsets, base_offset)
        index_offsets, index_positions = index_offsets[:n_index], index_positions[:n_index]
        data = read_bytes(path)
        timestamps, offsets = dump.read_time_index(data, base_offset)
        if opts.sanity_only:
            error = dump.time_index_sanity_error(timestamps, offsets, len(data), base_offset,
                                                 os.path.abspath(path))
            if error:
                raise CorruptIndexError(error)
            out.line(f"{path} passed sanity check.")
            out.obj({"type": "sanity_check", "file": path, "passed": True})
            return
        previous = -1
        for i in range(dump.sparse_entry_count(offsets, base_offset)):
            timestamp, offset = int(timestamps[i]), int(offsets[i])
            start = dump.lookup_position(index_offsets, index_positions, offset)
            holder = None
            if 0 <= start <= len(log.data):
                for position, _ in dump.iter_batch_spans(log.data, start, path=log_path):
                    batch = read_batch(log.data, position)
                    if batch.last_offset >= offset:
                        holder = batch
                        break
            if holder is None or holder.last_offset != offset:
                problems.found = True
                found = -1 if holder is None else holder.last_offset
                problems.add(problems.time_not_found, path, (offset, found))
            else:
                records, _ = decode_records(holder, path, holder.position)
                max_timestamp = max((dump.record_timestamp(holder, r) for r in records), default=-1)
                if max_timestamp != timestamp:
                    problems.found = True
                    problems.add(problems.time_mismatches, path, (timestamp, max_timestamp))
                if previous >= timestamp:
                    problems.found = True
                    problems.add(problems.time_out_of_order, path, (timestamp, previous))
            if not opts.verify_only:
                out.line(dump.time_index_line(timestamp, offset))
                out.obj({"type": "time_index_entry", "file": path, "timestamp": timestamp,
                         "offset": offset})
            previous = timestamp


def dump_snapshot(path: str, opts: Options, out: Output, problems: Problems) -> None:
    """Producers of a producer-state `.snapshot`; a corrupt one is reported on stderr."""
    from logstore import dump
    from logstore.errors import CorruptSnapshotError

    data = read_bytes(path)
    try:
        entries = dump.read_producer_snapshot(data)
    except CorruptSnapshotError as exc:
        problems.found = True
        if out.json:
            out.obj({"type": "problem", "problem": "corrupt_snapshot", "file": path, "message": str(exc)})
        else:
            out.flush()
            print(str(exc), file=sys.stderr)
        return
    for entry in entries:
        out.line(dump.snapshot_entry_line(entry))
        out.obj({**dump.snapshot_entry_json(entry), "file": path})


def dump_txn_index(path: str, opts: Options, out: Output, problems: Problems) -> None:
    """Aborted transactions of a `.txnindex` file."""
    from logstore import dump

    base_offset_of(path)
    for txn in dump.read_aborted_txns(read_bytes(path), os.path.abspath(path)):
        out.line(dump.aborted_txn_line(txn))
        out.obj({**dump.aborted_txn_json(txn), "file": path})


def dump_epochs(path: str, opts: Options, out: Output, problems: Problems) -> None:
    """Entries of a `leader-epoch-checkpoint` (an extension: Kafka's tool skips these)."""
    from logstore import dump
    from logstore.checkpoint import read_checkpoint

    read_bytes(path)  # a missing file is an error here, not "no entries"
    for epoch, start_offset in read_checkpoint(Path(path), (int, int)):
        out.line(dump.leader_epoch_line(epoch, start_offset))
        out.obj({"type": "leader_epoch", "file": path, "epoch": epoch, "startOffset": start_offset})


def dump_offsets(path: str, opts: Options, out: Output, problems: Problems) -> None:
    """Entries of a data-directory offset checkpoint (an extension, like leader epochs)."""
    from logstore import dump
    from logstore.checkpoint import read_checkpoint

    read_bytes(path)
    for topic, partition, offset in read_checkpoint(Path(path), (str, int, int)):
        out.line(dump.offset_checkpoint_line(topic, partition, offset))
        out.obj({"type": "offset_checkpoint", "file": path, "topic": topic,
                 "partition": partition, "offset": offset})


DUMPERS = {LOG: dump_log, INDEX: dump_offset_index, TIMEINDEX: dump_time_index,
           SNAPSHOT: dump_snapshot, TXNINDEX: dump_txn_index, EPOCHS: dump_epochs,
           OFFSETS: dump_offsets, KRAFT_SNAPSHOT: dump_kraft_snapshot}

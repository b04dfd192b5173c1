"""Compile every numba kernel ahead of first use: `python -m logstore.cli.warmup`, run by
`make` right after install.

The kernels are compiled with `cache=True`, so what this compiles once is loaded from disk by
every later process. It drives the real code paths (build, decode, append, recover, clean,
audit-read, legacy data) on a small temporary log, so each kernel is compiled for exactly the
argument types those paths pass (read-only and writable buffers alike); a kernel first
compiled inside a command would cost seconds and count as that command's work.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

NOW = 1_700_000_000_000
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": 4096, "min.cleanable.dirty.ratio": 0.01,
             "delete.retention.ms": 0}


def warm_records() -> None:
    """Build and decode batches of every codec, from records, columns and Arrow, from
    read-only and writable buffers, and legacy messages."""
    import pyarrow as pa

    from logstore.records import (
        COMPRESSION_NAMES,
        Record,
        RecordBatch,
        batches_to_arrow,
        build_batch,
        build_batch_columnar,
        build_legacy_entry,
        read_batch,
    )

    records = [Record(i, NOW + i, b"k%d" % i, b"v" * i, (("h", b"x"), ("n", None))) for i in range(4)]
    arrow, listed = pa.array([b"a", None]), [b"b", b"c"]
    for codec in COMPRESSION_NAMES:
        # Arrow columns are read-only buffers, lists become writable ones: every pairing.
        built = [build_batch(records, compression=codec),
                 *(build_batch_columnar(keys, values, timestamps=[NOW, NOW + 1], compression=codec)
                   for keys in (arrow, listed) for values in (arrow, listed))]
        for data in built:
            for buffer in (data, bytearray(data)):
                batch = RecordBatch(buffer)
                batch.validate(deep=True)
                batch.columns()
                batch.records()
            batches_to_arrow([data])
    for magic in (0, 1):
        for codec in ("none", "gzip"):
            plain = [Record(r.offset, r.timestamp, r.key, r.value) for r in records]
            entry = build_legacy_entry(plain[:1 if codec == "none" else 4], magic=magic, compression=codec)
            read_batch(entry).columns()


def warm_log(directory: Path, name: str, *, compressed: bool) -> Path:
    """Append every kind of input to a compacted log (leader and follower, legacy included;
    with `compressed` some of it gzip), read it, reopen it with recovery and read-only, and
    return its directory."""
    import pyarrow as pa

    from logstore import Log
    from logstore.clock import ManualClock
    from logstore.records import Record, build_batch, build_legacy_entry

    codec = "gzip" if compressed else "none"
    clock = ManualClock(NOW)
    path = directory / name
    with Log.open(path, COMPACTED, clock=clock) as log:
        for round_ in range(6):
            log.append([(b"k%d" % (i % 7), None if i % 5 == 0 else b"v" * 50) for i in range(20)])
            log.append(pa.table({"key": [b"a", b"b"], "value": [b"1", None],
                                 "timestamp": pa.array([NOW, NOW + 1], pa.int64())}))
            log.append(build_batch([Record(0, NOW, b"c", b"2")], compression=codec))
            if compressed:
                log.append(build_legacy_entry([Record(0, NOW, b"d", b"3"), Record(1, NOW, b"e", b"4")],
                                              magic=1, compression=codec))
            end = log.log_end_offset
            log.append_as_follower(build_legacy_entry([Record(end, NOW, b"f", b"5")], magic=round_ % 2))
            clock.advance(1000)
        # A sequential reader: one batch (a view of what was read), then the rest (the bytes read).
        log.read(log.read(log.read(0, 1).next_offset).next_offset)
        list(log.records())
        log.offset_for_timestamp(NOW + 10)
        log.high_watermark = log.log_end_offset
        log.roll()
    for read_only in (False, True):
        with Log.open(path, COMPACTED, clock=clock, read_only=read_only) as log:
            list(log.records())
    return path


def warm_append_paths(directory: Path) -> None:
    """What the plain appends of `warm_log` skip: an append of more batches than the scratch
    table holds, and recovery adding index entries one by one."""
    from logstore import Log
    from logstore.clock import ManualClock
    from logstore.records import Record, build_batch

    many = b"".join(build_batch([Record(0, NOW, b"k%d" % i, b"v")]) for i in range(100))
    with Log.open(directory / "warmup-2", {"index.interval.bytes": 0}, clock=ManualClock(NOW)) as log:
        log.append(many)
        for segment in log.segments:
            segment.recover()


def warm_compaction(path: Path) -> None:
    """A dry run and a real cleaning round over the log `warm_log` wrote."""
    from compaction.cleaner import Cleaner
    from logstore import Log
    from logstore.clock import ManualClock

    with Log.open(path, COMPACTED, clock=ManualClock(NOW + 10**9)) as log:
        log.high_watermark = log.log_end_offset
        Cleaner(log.config).clean(log, dry_run=True)
        Cleaner(log.config).clean(log)


def warm_audit_reader(path: Path) -> None:
    """The Spark audit's segment reader (pyarrow only; no Spark session is started)."""
    from spark_tools.reader import read_segment_metadata, read_segments

    for segment in sorted(path.glob("*.log")):
        list(read_segments(segment))
        list(read_segment_metadata(segment))


def warm_up() -> float:
    """Compile (or load from the cache) every kernel; return the seconds it took."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="logstore-warmup-") as tmp:
        warm_records()
        # Segments with compressed batches decode into a new (writable) buffer, others in place.
        for name, compressed in (("warmup-0", True), ("warmup-1", False)):
            path = warm_log(Path(tmp), name, compressed=compressed)
            warm_compaction(path)
            warm_audit_reader(path)
        warm_append_paths(Path(tmp))
    return time.perf_counter() - started


def main() -> int:
    """Warm the kernels and say how long it took."""
    seconds = warm_up()
    print(f"numba kernels compiled and cached in {seconds:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

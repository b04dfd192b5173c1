"""Peak memory of one audit task over one large segment, local and remote (by byte range).

``python -m benchmarks.task_memory [GiB] [--unique-keys] [--cleaner]`` writes one partition
whose first segment holds GiB (default 1) of 1,000-record batches (16-byte keys, a fifth as
many as the records or all distinct; 100-byte values) and a small active segment,
then runs each piece of a task's work in a fresh process and prints its peak resident set
(``ru_maxrss``, which counts the memory-mapped file pages a local read touches) and the part
of it that the work added over the imports (and the opened Log, for the cleaner round). "remote" reads the same files through a pyarrow
filesystem that is not the local one, which takes the object-store path (byte ranges through
pyarrow's file handle for the reader, a scratch copy in 1 MiB pieces for the reports, which decode it 8 MiB at a time).
"cleaner round" is a real ``Cleaner.clean`` of the partition (run last: it rewrites the
segment), with the default log.cleaner.dedupe.buffer.size (a 128 MiB offset map) and
log.cleaner.io.buffer.size; ``--cleaner`` runs it alone. The last line gives the records and
distinct keys the report tasks read.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

TOPIC = "mem"
RECORDS_PER_BATCH = 1000
VALUE_BYTES = 100
CONFIGS = {"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0.01"}
NOW_MS = 1_800_000_000_000

WORK = {
    "reader, local (mmap)": "reader_local",
    "reader, remote (byte ranges)": "reader_remote",
    "segment metadata, remote (byte ranges)": "metadata_remote",
    "report task, local": "reports_local",
    "report task, remote (staged on scratch)": "reports_remote",
    "cleaner round, local (Cleaner.clean)": "clean",
}


def write_partition(directory: Path, gib: float, unique_keys: bool = False) -> int:
    """One segment of ``gib`` GiB (keys drawn from a fifth as many as records, or every key
    distinct), then a one-batch active segment; returns the bytes written."""
    from logstore.log_files import LOG_SUFFIX, segment_file_name
    from logstore.records import build_batch_columnar

    rng = np.random.default_rng(0)
    directory.mkdir(parents=True)
    values = pa.array([b"v" * VALUE_BYTES] * RECORDS_PER_BATCH, pa.binary())
    distinct = max(int(gib * 2**30 / 130 / 5), 1)
    offset = written = 0
    with open(directory / segment_file_name(0, LOG_SUFFIX), "wb") as out:
        while written < gib * 2**30:
            ids = (np.arange(offset, offset + RECORDS_PER_BATCH) if unique_keys
                   else rng.integers(0, distinct, RECORDS_PER_BATCH))
            keys = pa.array([b"key-%012d" % k for k in ids.tolist()], pa.binary())
            batch = build_batch_columnar(keys, values, timestamps=np.full(RECORDS_PER_BATCH, NOW_MS),
                                         base_offset=offset)
            out.write(batch)
            offset += RECORDS_PER_BATCH
            written += len(batch)
    keys = pa.array([b"key-%012d" % 0] * RECORDS_PER_BATCH, pa.binary())
    tail = build_batch_columnar(keys, values, timestamps=np.full(RECORDS_PER_BATCH, NOW_MS),
                                base_offset=offset)
    (directory / segment_file_name(offset, LOG_SUFFIX)).write_bytes(tail)
    return written + len(tail)


def open_log(root: Path, now_ms: int = NOW_MS):
    """The written partition as a Log with the benchmark's topic configs (the first open
    builds the indexes and checkpoints, so later opens recover nothing)."""
    from logstore import Log
    from logstore.clock import ManualClock

    return Log.open(root / f"{TOPIC}-0", CONFIGS, clock=ManualClock(now_ms))


def _clean(root: Path) -> dict:
    """One real cleaning round of the partition: its peak RSS before and after, in MiB, and
    its time (CleanResult.elapsed_s: without the kernels' first load)."""
    from compaction import Cleaner

    log = open_log(root)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result = Cleaner(log.config).clean(log, now_ms=NOW_MS)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    log.close()
    return {"rows": result.records_read, "keys": result.map_keys, "imports_mib": before,
            "peak_mib": peak, "seconds": result.elapsed_s}


def _run(kind: str, root: Path) -> dict:
    """One piece of a task's work in this process: its peak RSS before and after, in MiB."""
    import pyarrow.fs as pafs

    from spark_tools.layout import list_partitions
    from spark_tools.reader import read_segment_metadata, read_segments
    from spark_tools.reports import AuditSettings, partition_rows
    from spark_tools.topic_configs import TopicConfigs

    remote = pafs.SubTreeFileSystem(str(root), pafs.LocalFileSystem())
    keys = None
    segment = f"{TOPIC}-0/00000000000000000000.log"
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    if kind.startswith("reader"):
        kw = {"filesystem": remote} if kind.endswith("remote") else {}
        path = segment if kw else root / segment
        rows = sum(b.num_rows for b in read_segments(path, **kw))
    elif kind == "metadata_remote":
        rows = read_segment_metadata(segment, filesystem=remote, last_modified_ms=0)["record_count"]
    else:
        fs = remote if kind.endswith("remote") else pafs.LocalFileSystem()
        path = f"{TOPIC}-0" if kind.endswith("remote") else str(root / f"{TOPIC}-0")
        (part,) = list_partitions(path, fs)
        settings = AuditSettings(TopicConfigs.load(CONFIGS), NOW_MS, fs)
        row = partition_rows(part, settings, ("compaction", "retention"))["compaction"]
        rows, keys = row["records"], row["distinct_keys"]
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"rows": rows, "keys": keys, "imports_mib": before, "peak_mib": peak, "seconds": seconds}


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "--run":
        work = _clean if argv[1] == "clean" else lambda root: _run(argv[1], root)
        print(json.dumps(work(Path(argv[2]))))
        return 0
    unique = "--unique-keys" in argv
    only_cleaner = "--cleaner" in argv
    argv = [a for a in argv if a not in ("--unique-keys", "--cleaner")]
    work = {k: v for k, v in WORK.items() if v == "clean" or not only_cleaner}
    gib = float(argv[0]) if argv else 1.0
    with tempfile.TemporaryDirectory(prefix="logstore-task-memory-") as tmp:
        root = Path(tmp)
        nbytes = write_partition(root / f"{TOPIC}-0", gib, unique)
        open_log(root).close()
        print(f"one partition: a {gib:g} GiB segment and an active one ({nbytes / 2**20:.0f} MiB)")
        print(f"{'work':<42} {'peak RSS':>10} {'added by the work':>18} {'time':>8}")
        keys = None
        for label, kind in work.items():
            done = subprocess.run([sys.executable, "-m", "benchmarks.task_memory", "--run", kind,
                                   str(root)], capture_output=True, text=True, check=True)
            r = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{label:<42} {r['peak_mib']:>7.0f} MiB {r['peak_mib'] - r['imports_mib']:>14.0f} MiB "
                  f"{r['seconds']:>7.1f}s")
            keys = r["keys"] if r["keys"] is not None else keys
            rows = r["rows"]
        print(f"the last task read {rows:,} records with {keys:,} distinct keys")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

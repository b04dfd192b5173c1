"""Compaction and retention reports: the engine's own decisions, run per partition on executors.

Each partition is opened read-only as a ``logstore.Log`` on the executor (staged on local
scratch first, one partition at a time in 1 MiB pieces, when it lives on a remote filesystem). The retention report is
``retention.plan_for_log`` (``plan_retention`` over the Log's segments); the compaction report
is a dry-run ``compaction.Cleaner.clean`` round (``selection.evaluate`` plus the plan
functions the cleaner applies), with key statistics from the cleaner's own decoder. A report
therefore cannot disagree with what the engine would do to the same files at the same clock.
Segments are decoded a chunk at a time (``compaction.decode.decode_chunks``), so a task's
memory follows a partition's distinct keys, not its segment sizes.

A partition whose files are corrupt or unreadable fails alone and deterministically: the task
catches the LogstoreError and returns it as a row (so Spark does not retry it), and the driver
raises it as one line naming the partition and the file.
"""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs

from compaction.cleaner import Cleaner
from logstore import errors as logstore_errors
from logstore.config import LogConfig
from logstore.errors import CorruptRecordError, LogstoreError
from logstore.log_like import SegmentedLogLike
from logstore.log_loader import LoadState
from spark_tools.dataframes import distribute, spark_schema
from spark_tools.layout import (
    PartitionFiles,
    PathArg,
    list_partitions,
    resolve_paths,
)
from spark_tools.report_files import sort_rows
from spark_tools.topic_configs import TopicConfigs

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

REPORTS = ("compaction", "retention")

_DELETION = pa.struct([("base_offset", pa.int64()), ("next_offset", pa.int64()),
                       ("size", pa.int64()), ("reason", pa.string())])

RETENTION_SCHEMA = pa.schema([
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("cleanup_policy", pa.string()),
    ("retention_ms", pa.int64()),
    ("retention_bytes", pa.int64()),
    ("segments", pa.int32()),
    ("log_bytes", pa.int64()),
    ("log_start_offset", pa.int64()),
    ("high_watermark", pa.int64()),
    ("log_end_offset", pa.int64()),
    ("segments_deleted", pa.int32()),
    ("deleted_by_retention_ms", pa.int32()),
    ("deleted_by_retention_bytes", pa.int32()),
    ("deleted_by_log_start_offset", pa.int32()),
    ("deletions", pa.list_(_DELETION)),
    ("new_log_start_offset", pa.int64()),
    ("bytes_reclaimed", pa.int64()),
    ("roll_active_first", pa.bool_()),
])
"""One row per partition: what one retention pass would delete, by rule."""

COMPACTION_SCHEMA = pa.schema([
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("cleanup_policy", pa.string()),
    ("segments", pa.int32()),
    ("log_bytes", pa.int64()),
    ("records", pa.int64()),
    ("keyed_records", pa.int64()),
    ("distinct_keys", pa.int64()),
    ("duplicate_records", pa.int64()),
    ("tombstones", pa.int64()),
    ("tombstones_removable", pa.int64()),
    ("records_removable", pa.int64()),
    ("bytes_removable", pa.int64()),
    ("first_dirty_offset", pa.int64()),
    ("first_uncleanable_offset", pa.int64()),
    ("next_cleaner_checkpoint", pa.int64()),
    ("clean_bytes", pa.int64()),
    ("cleanable_bytes", pa.int64()),
    ("dirty_ratio", pa.float64()),
    ("min_cleanable_dirty_ratio", pa.float64()),
    ("would_clean_now", pa.bool_()),
    ("reason", pa.string()),
])
"""One row per partition: keys, duplicates and tombstones, and what one cleaning round would
remove (``bytes_removable`` = bytes read - bytes written by a dry-run round)."""

@dataclass(frozen=True)
class AuditSettings:
    """What every partition task needs: the configs, the clock and the filesystem."""

    configs: TopicConfigs
    now_ms: int
    filesystem: pafs.FileSystem


_COPY_CHUNK = 1 << 20  # bytes per read while staging a remote partition


def scratch_root() -> str | None:
    """Where remote partitions are staged: Spark's local dirs on an executor (SPARK_LOCAL_DIRS),
    else the temp dir."""
    dirs = os.environ.get("SPARK_LOCAL_DIRS")
    return dirs.split(",")[0] if dirs else None


@contextlib.contextmanager
def local_partition_dir(part: PartitionFiles, fs: pafs.FileSystem) -> Iterator[Path]:
    """The partition directory as a local path: itself when local, else a scratch copy copied
    in 1 MiB pieces and removed on exit (the data directory's checkpoints come from the listing)."""
    if isinstance(fs, pafs.LocalFileSystem):
        yield Path(part.directory)
        return
    local = pafs.LocalFileSystem()
    with tempfile.TemporaryDirectory(prefix="logstore-audit-", dir=scratch_root()) as tmp:
        target = Path(tmp) / part.directory.rsplit("/", 1)[-1]
        target.mkdir()
        pafs.copy_files(part.directory, str(target), source_filesystem=fs,
                        destination_filesystem=local, chunk_size=_COPY_CHUNK)
        yield target


def listed_load_state(part: PartitionFiles) -> LoadState:
    """What ``Log.open`` would read from the partition's data directory (its checkpoint entries
    and the clean-shutdown marker), from the listing: a data directory's checkpoint files hold an
    entry per partition, so reading them again for every partition made an audit quadratic."""
    return LoadState(recovery_point=part.recovery_point or 0,
                     log_start_offset=part.log_start_offset or 0,
                     high_watermark=part.high_watermark, clean_shutdown=part.clean_shutdown)


def _open_log(directory: Path, config: LogConfig, now_ms: int, load_state: LoadState):
    from logstore.clock import ManualClock
    from logstore.log import Log

    return Log.open(directory, config, clock=ManualClock(now_ms), read_only=True,
                    load_state=load_state, raw=True)


def _policy(config: LogConfig) -> str:
    return ",".join(config.cleanup_policy)


def retention_row(log: SegmentedLogLike, config: LogConfig, now_ms: int) -> dict[str, Any]:
    """The retention report row of an open Log (``retention.plan_for_log``, nothing changes)."""
    from retention.apply import plan_for_log
    from retention.plan import REASON_LOG_START_OFFSET, REASON_RETENTION_BYTES, REASON_RETENTION_MS

    segments = log.segments
    plan = plan_for_log(log, now_ms=now_ms)
    reasons = [d.reason for d in plan.deletions]
    return {
        "topic": log.topic,
        "partition": log.partition,
        "cleanup_policy": _policy(config),
        "retention_ms": config.retention_ms,
        "retention_bytes": config.retention_bytes,
        "segments": len(segments),
        "log_bytes": sum(s.size for s in segments),
        "log_start_offset": log.log_start_offset,
        "high_watermark": log.high_watermark,
        "log_end_offset": log.log_end_offset,
        "segments_deleted": len(plan.deletions),
        "deleted_by_retention_ms": reasons.count(REASON_RETENTION_MS),
        "deleted_by_retention_bytes": reasons.count(REASON_RETENTION_BYTES),
        "deleted_by_log_start_offset": reasons.count(REASON_LOG_START_OFFSET),
        "deletions": [
            {"base_offset": d.segment.base_offset, "next_offset": d.segment.next_offset,
             "size": d.segment.size, "reason": d.reason}
            for d in plan.deletions
        ],
        "new_log_start_offset": plan.new_log_start_offset,
        "bytes_reclaimed": plan.bytes_reclaimed,
        "roll_active_first": plan.roll_active_first,
    }


def _key_stats(segments: Sequence[Any]) -> dict[str, int]:
    """Read every segment once, a chunk at a time, as the cleaner reads it (every v2 batch's
    CRC checked: CorruptRecordError naming the file and position), for the key statistics:
    records, keyed records, distinct keys (128-bit mmh3, as the cleaner hashes them, counted
    exactly in bounded memory, spilling to scratch disk past a million keys) and tombstones.

    Nothing decoded outlives its chunk. The active segment may end in a torn tail (never
    cleaned, so not an error); bytes after the last complete batch of any other are.
    """
    from compaction.decode import decode_chunks
    from compaction.distinct_keys import DistinctKeys

    records = keyed = tombstones = 0
    with DistinctKeys(spill_dir=scratch_root()) as counter:
        for i, segment in enumerate(segments):
            path = str(segment.log_path)
            for d in decode_chunks(path, segment_base=segment.base_offset, size=segment.size,
                                   torn_tail_ok=i + 1 == len(segments)):
                _check_crcs(d, path)
                c = d.records
                records += len(c)
                keyed += int(c.has_key.sum())
                tombstones += int(c.is_tombstone.sum())
                counter.add(c.key_hash1, c.key_hash2, c.has_key)
        distinct = counter.size
    return {"records": records, "keyed_records": keyed, "distinct_keys": distinct,
            "duplicate_records": keyed - distinct, "tombstones": tombstones}


def _check_crcs(decoded: Any, path: str) -> None:
    """Raise CorruptRecordError for the first magic 2 batch whose CRC-32C does not match."""
    from logstore.records import crc32c
    from logstore.records.header import ATTRIBUTES_OFFSET

    header = decoded.header
    buf = decoded.arena
    for i in np.flatnonzero(header["magic"] >= 2).tolist():
        start = int(decoded.position[i])
        end = start + int(decoded.size[i])
        if crc32c(buf[start + ATTRIBUTES_OFFSET:end]) != int(header["crc"][i]):
            raise CorruptRecordError("batch CRC-32C mismatch", position=decoded.file_position + start,
                                     path=path)


class ListedCheckpointCleaner(Cleaner):
    """A Cleaner whose checkpoint (first dirty offset) is ``listed_checkpoint``, the partition's
    entry the audit's listing read, rather than a reread of the data directory's file."""

    listed_checkpoint: int | None = None

    def read_checkpoint(self, log: SegmentedLogLike) -> int | None:
        """The listed checkpoint (None: never cleaned)."""
        return self.listed_checkpoint


@functools.lru_cache(maxsize=4)
def _cleaner(config: LogConfig) -> ListedCheckpointCleaner:
    """One Cleaner per config and process, reused across partitions as Kafka's cleaner threads
    reuse theirs (its offset map is cleared at the start of every round)."""
    return ListedCheckpointCleaner(config)


def compaction_row(log: SegmentedLogLike, config: LogConfig, now_ms: int,
                   cleaner_checkpoint: int | None = None) -> dict[str, Any]:
    """The compaction report row of an open Log (a dry-run Cleaner round; nothing changes);
    ``cleaner_checkpoint`` is the partition's entry in its data directory's
    cleaner-offset-checkpoint (None: never cleaned)."""
    segments = log.segments
    key_stats = _key_stats(segments)
    row: dict[str, Any] = {
        "topic": log.topic,
        "partition": log.partition,
        "cleanup_policy": _policy(config),
        "segments": len(segments),
        "log_bytes": sum(s.size for s in segments),
        **key_stats,
        "min_cleanable_dirty_ratio": config.min_cleanable_dirty_ratio,
    }
    if not config.compact:
        row.update(tombstones_removable=0, records_removable=0, bytes_removable=0,
                   first_dirty_offset=None, first_uncleanable_offset=None,
                   next_cleaner_checkpoint=None, clean_bytes=None, cleanable_bytes=None,
                   dirty_ratio=None, would_clean_now=False,
                   reason="not compacted (cleanup.policy has no compact)")
        return row
    cleaner = _cleaner(config)
    cleaner.listed_checkpoint = cleaner_checkpoint
    result = cleaner.clean(log, now_ms=now_ms, dry_run=True, distinct_keys=key_stats["distinct_keys"])
    rng = result.cleanable
    row.update(
        tombstones_removable=result.tombstones_removed,
        records_removable=result.records_removed,
        bytes_removable=result.bytes_read - result.bytes_written,
        first_dirty_offset=rng.first_dirty_offset,
        first_uncleanable_offset=rng.first_uncleanable_offset,
        next_cleaner_checkpoint=result.end_offset,
        clean_bytes=rng.clean_bytes,
        cleanable_bytes=rng.cleanable_bytes,
        dirty_ratio=rng.dirty_ratio,
        would_clean_now=rng.due,
        reason=_due_text(rng, config),
    )
    return row


def partition_rows(part: PartitionFiles, settings: AuditSettings,
                   kinds: Sequence[str]) -> dict[str, dict[str, Any]]:
    """{kind: report row} for one partition, opening it once as a read-only Log.

    Raises the LogstoreError the engine raised, as one line naming the partition and its file.
    """
    config = settings.configs.for_topic(part.topic)
    directory = None
    try:
        with local_partition_dir(part, settings.filesystem) as directory:
            log = _open_log(directory, config, settings.now_ms, listed_load_state(part))
            try:
                return {kind: _row(kind, log, config, settings.now_ms, part) for kind in kinds}
            finally:
                log.close()
    except LogstoreError as exc:
        raise partition_error(part, exc, directory) from None


def partition_error(part: PartitionFiles, exc: LogstoreError,
                    staged: Path | None = None) -> LogstoreError:
    """``exc`` again (same class where it takes a message alone), as one line that starts with
    the partition and names the file as the user gave it (not a scratch copy)."""
    text = " ".join(str(exc).split())
    if staged is not None and str(staged) != part.directory:
        text = text.replace(str(staged), part.directory)
    if part.directory not in text:
        text = f"{text} ({part.directory})"
    message = f"partition {part.topic}-{part.partition}: {text}"
    try:
        err = type(exc)(message)
    except TypeError:
        return LogstoreError(message)
    for name in ("position", "path"):
        value = getattr(exc, name, None)
        if name == "path" and value is not None and staged is not None:
            value = str(value).replace(str(staged), part.directory)
        if value is not None:
            setattr(err, name, value)
    return err


def raise_error_row(error_type: str, message: str) -> None:
    """Raise a task's error row on the driver as the logstore error class it names."""
    cls = getattr(logstore_errors, error_type, None)
    if not (isinstance(cls, type) and issubclass(cls, LogstoreError)):
        cls = LogstoreError
    try:
        err = cls(message)
    except TypeError:
        err = LogstoreError(message)
    raise err


def _due_text(rng: Any, config: LogConfig) -> str:
    from compaction.selection import DUE_MAX_LAG

    if rng.due_reason == DUE_MAX_LAG:
        return f"due: a dirty segment is {rng.compaction_delay_ms} ms past max.compaction.lag.ms"
    if rng.due_reason is not None:
        return (f"due: dirty ratio {rng.dirty_ratio:.4f} > min.cleanable.dirty.ratio "
                f"{config.min_cleanable_dirty_ratio}")
    if rng.cleanable_bytes == 0:
        return "not due: nothing cleanable (active segment, high watermark or min.compaction.lag.ms)"
    return (f"not due: dirty ratio {rng.dirty_ratio:.4f} <= min.cleanable.dirty.ratio "
            f"{config.min_cleanable_dirty_ratio}")


def _row(kind: str, log: SegmentedLogLike, config: LogConfig, now_ms: int,
         part: PartitionFiles) -> dict[str, Any]:
    if kind == "compaction":
        return compaction_row(log, config, now_ms, part.cleaner_checkpoint)
    return retention_row(log, config, now_ms)


_SCHEMAS: dict[str, pa.Schema] = {"compaction": COMPACTION_SCHEMA, "retention": RETENTION_SCHEMA}


def _settings(paths, config_overrides, now_ms, filesystem) -> tuple[AuditSettings, list[str]]:
    fs, inner = resolve_paths(paths, filesystem)
    now = int(time.time() * 1000) if now_ms is None else int(now_ms)
    return AuditSettings(TopicConfigs.load(config_overrides), now, fs), inner


def local_reports(
    paths: PathArg | Sequence[PathArg],
    config_overrides: TopicConfigs | Mapping[str, Any] | str | PathLike[str] | None = None,
    now_ms: int | None = None,
    *,
    kinds: Sequence[str] = REPORTS,
    filesystem: pafs.FileSystem | None = None,
) -> dict[str, pa.Table]:
    """{kind: report} computed in this process without Spark (same rows as the Spark reports)."""
    settings, inner = _settings(paths, config_overrides, now_ms, filesystem)
    rows: dict[str, list[dict]] = {kind: [] for kind in kinds}
    for part in list_partitions(inner, settings.filesystem):
        for kind, row in partition_rows(part, settings, kinds).items():
            rows[kind].append(row)
    return {kind: pa.Table.from_pylist(rows[kind], schema=_SCHEMAS[kind])
            for kind in kinds}


def local_report(
    kind: str,
    paths: PathArg | Sequence[PathArg],
    config_overrides: TopicConfigs | Mapping[str, Any] | str | PathLike[str] | None = None,
    now_ms: int | None = None,
    *,
    filesystem: pafs.FileSystem | None = None,
) -> pa.Table:
    """The ``kind`` report ('compaction' or 'retention') computed in this process, without Spark."""
    return local_reports(paths, config_overrides, now_ms, kinds=(kind,),
                         filesystem=filesystem)[kind]


def audit_tables(
    spark: SparkSession,
    paths: PathArg | Sequence[PathArg],
    config_overrides: TopicConfigs | Mapping[str, Any] | str | PathLike[str] | None = None,
    now_ms: int | None = None,
    *,
    kinds: Sequence[str] = REPORTS,
    filesystem: pafs.FileSystem | None = None,
    num_tasks: int | None = None,
) -> dict[str, pa.Table]:
    """{kind: report table} from one Spark job that opens each partition once, collected on the
    driver in (topic, partition) order.

    A partition's LogstoreError (CorruptRecordError for corrupt files) comes back as a row, not
    a task failure, so Spark does not retry it; the first one (in partition order) is raised
    here, naming the partition and file. Raises LogstoreError for an unknown kind; see
    ``compaction_report`` for the arguments.
    """
    unknown = [k for k in kinds if k not in _SCHEMAS]
    if unknown or not kinds:
        raise LogstoreError(f"unknown report kinds {unknown} (choose from {', '.join(REPORTS)})")
    settings, inner = _settings(paths, config_overrides, now_ms, filesystem)
    parts = list_partitions(inner, settings.filesystem)
    combined = pa.schema([*((kind, pa.struct(list(_SCHEMAS[kind]))) for kind in kinds),
                          ("error_type", pa.string()), ("error", pa.string())])

    def work(group: list[PartitionFiles]) -> Iterator[pa.RecordBatch]:
        rows = []
        for part in group:
            try:
                rows.append(partition_rows(part, settings, kinds))
            except LogstoreError as exc:
                rows.append({"error_type": type(exc).__name__, "error": str(exc)})
            except Exception as exc:  # not deterministic (I/O, memory): Spark retries the task
                detail = " ".join(f"{type(exc).__name__}: {exc}".split())
                raise RuntimeError(f"partition {part.topic}-{part.partition} "
                                   f"({part.directory}): {detail}") from exc
        yield pa.RecordBatch.from_pylist(rows, schema=combined)

    table = distribute(spark, parts, [sum(s.size for s in p.segments) for p in parts], work,
                       spark_schema(combined), num_tasks).toArrow()
    failed = table.filter(table.column("error").is_valid())
    if failed.num_rows:
        errors = sorted(zip(*(failed.column(c).to_pylist() for c in ("error", "error_type")),
                            strict=True))
        raise_error_row(errors[0][1], errors[0][0])
    return {kind: sort_rows(pa.Table.from_struct_array(table.column(kind).combine_chunks())
                            .cast(_SCHEMAS[kind]))
            for kind in kinds}


def audit_reports(
    spark: SparkSession,
    paths: PathArg | Sequence[PathArg],
    config_overrides: TopicConfigs | Mapping[str, Any] | str | PathLike[str] | None = None,
    now_ms: int | None = None,
    *,
    kinds: Sequence[str] = REPORTS,
    filesystem: pafs.FileSystem | None = None,
    num_tasks: int | None = None,
) -> dict[str, DataFrame]:
    """{kind: report DataFrame} from one Spark job that opens each partition once (``audit_tables``,
    run now; each report is a small DataFrame of the collected rows, one per partition)."""
    tables = audit_tables(spark, paths, config_overrides, now_ms, kinds=kinds,
                          filesystem=filesystem, num_tasks=num_tasks)
    return {kind: spark.createDataFrame(table, schema=spark_schema(_SCHEMAS[kind]))
            for kind, table in tables.items()}


def compaction_report(
    spark: SparkSession,
    paths: PathArg | Sequence[PathArg],
    config_overrides: TopicConfigs | Mapping[str, Any] | str | PathLike[str] | None = None,
    now_ms: int | None = None,
    *,
    filesystem: pafs.FileSystem | None = None,
    num_tasks: int | None = None,
) -> DataFrame:
    """Per partition: keys, duplicates, tombstones, and what one cleaning round would remove.

    ``config_overrides``: a `.properties` path or a dict of Kafka names (``<topic>.<name>``
    or nested dicts per topic); ``now_ms`` defaults to the wall clock. Runs the job now.
    """
    return audit_reports(spark, paths, config_overrides, now_ms, kinds=("compaction",),
                         filesystem=filesystem, num_tasks=num_tasks)["compaction"]


def retention_report(
    spark: SparkSession,
    paths: PathArg | Sequence[PathArg],
    config_overrides: TopicConfigs | Mapping[str, Any] | str | PathLike[str] | None = None,
    now_ms: int | None = None,
    *,
    filesystem: pafs.FileSystem | None = None,
    num_tasks: int | None = None,
) -> DataFrame:
    """Per partition: the segments one retention pass would delete (by rule), the new log start
    offset and the bytes reclaimed. Arguments as for ``compaction_report``."""
    return audit_reports(spark, paths, config_overrides, now_ms, kinds=("retention",),
                         filesystem=filesystem, num_tasks=num_tasks)["retention"]

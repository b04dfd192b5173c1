"""Spark DataFrames over segment files: the driver lists files, executors read them.

The driver only lists files and ships their paths, packed into about one task per core
(largest files first, each to the least loaded task), so the bytes are read where the tasks
run and nothing but results comes back through the driver.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.fs as pafs

from logstore.errors import LogstoreError
from spark_tools.layout import PathArg, list_partitions, resolve_paths
from spark_tools.reader import (
    METADATA_SCHEMA,
    RECORD_SCHEMA,
    read_segment_metadata,
    read_segments,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

_FILE_FIELDS = ("path", "topic", "partition", "mtime_ms")


def spark_schema(schema: pa.Schema) -> StructType:
    """The Spark schema of an Arrow schema, so mapInArrow output matches it exactly; built in
    Python (a DDL string is parsed by the JVM, 2 s on a fresh session)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def balanced_groups(weights: Sequence[int], groups: int) -> list[list[int]]:
    """Split item indexes into at most ``groups`` lists of similar total weight (largest first)."""
    groups = max(1, min(groups, len(weights)))
    heap = [(0, g) for g in range(groups)]
    out: list[list[int]] = [[] for _ in range(groups)]
    for i in sorted(range(len(weights)), key=lambda i: -weights[i]):
        load, g = heapq.heappop(heap)
        out[g].append(i)
        heapq.heappush(heap, (load + weights[i], g))
    return [sorted(g) for g in out if g]


def default_tasks(spark: SparkSession) -> int:
    """One task per core Spark offers (its default parallelism)."""
    return max(1, spark.sparkContext.defaultParallelism)


def distribute(spark: SparkSession, items: Sequence[Any], weights: Sequence[int],
               work: Callable[[list[Any]], Iterator[pa.RecordBatch]], schema: StructType,
               num_tasks: int | None = None) -> DataFrame:
    """``work`` run on the executors over ``items`` packed by weight into about one group per
    task: a DataFrame of ``schema`` holding every batch ``work`` yields.

    The groups travel with the function and each task finds its own by its id, so no input
    rows are built (a one-column ``range`` drives the tasks).
    """
    groups = [[items[i] for i in g]
              for g in balanced_groups(weights, num_tasks or default_tasks(spark))]

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for task in batch.column("id").to_pylist():
                yield from work(groups[task])

    return spark.range(len(groups), numPartitions=max(1, len(groups))).mapInArrow(run, schema)


def _over_files(spark: SparkSession, paths: PathArg | Sequence[PathArg],
                filesystem: pafs.FileSystem, num_tasks: int | None,
                read: Callable[[dict], Iterator[pa.RecordBatch]], schema: StructType) -> DataFrame:
    """``read`` run on the executors for every segment file under ``paths`` (a dict of
    path, topic, partition and mtime_ms each), files packed by size."""
    segments = [s for p in list_partitions(paths, filesystem) for s in p.segments]
    items = [{f: getattr(s, f) for f in _FILE_FIELDS} for s in segments]

    def work(files: list[dict]) -> Iterator[pa.RecordBatch]:
        for f in files:
            yield from read(f)

    return distribute(spark, items, [s.size for s in segments], work, schema, num_tasks)


def segments_dataframe(
    spark: SparkSession,
    paths: PathArg | Sequence[PathArg],
    *,
    filesystem: pafs.FileSystem | None = None,
    num_tasks: int | None = None,
    columns: Sequence[str] | None = None,
) -> DataFrame:
    """One row per record (the columns of ``read_segments``) of every segment under ``paths``.

    Paths are local or URIs (or paths inside ``filesystem``); executors read the files with
    ``mapInArrow``. ``columns`` keeps only those reader columns, so less crosses from Python
    to the JVM. ``num_tasks`` defaults to Spark's default parallelism. Raises LogstoreError
    for an unknown column.
    """
    fs, inner = resolve_paths(paths, filesystem)
    names = list(columns) if columns is not None else RECORD_SCHEMA.names
    unknown = [c for c in names if c not in RECORD_SCHEMA.names]
    if unknown:
        raise LogstoreError(f"unknown reader columns {unknown} (see RECORD_SCHEMA)")
    schema = pa.schema([RECORD_SCHEMA.field(c) for c in names])

    def read(f: dict) -> Iterator[pa.RecordBatch]:
        for batch in read_segments(f["path"], f["topic"], f["partition"], filesystem=fs):
            yield batch.select(names) if columns is not None else batch

    return _over_files(spark, inner, fs, num_tasks, read, spark_schema(schema))


def segment_metadata_dataframe(
    spark: SparkSession,
    paths: PathArg | Sequence[PathArg],
    *,
    filesystem: pafs.FileSystem | None = None,
    num_tasks: int | None = None,
) -> DataFrame:
    """One row per segment (``read_segment_metadata``'s columns) under ``paths``, read on executors."""

    fs, inner = resolve_paths(paths, filesystem)

    def read(f: dict) -> Iterator[pa.RecordBatch]:
        row = read_segment_metadata(f["path"], f["topic"], f["partition"], filesystem=fs,
                                    last_modified_ms=f["mtime_ms"])
        yield pa.RecordBatch.from_pylist([row], schema=METADATA_SCHEMA)

    return _over_files(spark, inner, fs, num_tasks, read, spark_schema(METADATA_SCHEMA))

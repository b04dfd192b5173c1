"""spark_tools.segments_dataframe / segment_metadata_dataframe: executors read the files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from logstore.errors import LogstoreError
from logstore.log import Log
from logstore.log_files import LOG_SUFFIX, segment_file_name
from logstore.records import Record, build_batch
from spark_tools import (
    read_segment_metadata,
    read_segments,
    segment_metadata_dataframe,
    segments_dataframe,
)
from spark_tools.dataframes import balanced_groups
from tests.support.paths import KAFKA_LOGDIR

SAMPLES = KAFKA_LOGDIR


@pytest.fixture
def kafka_logdir(tmp_path) -> Path:
    target = tmp_path / "logdir"
    shutil.copytree(SAMPLES, target)
    return target


def _local_rows(directory: Path) -> list[dict]:
    rows = []
    for log in sorted(directory.glob("*/*.log")):
        for batch in read_segments(log):
            rows.extend(batch.to_pylist())
    return rows


def test_balanced_groups_spread_weight_and_keep_every_item():
    groups = balanced_groups([10, 1, 1, 1, 9, 2, 8], 3)
    assert sorted(i for g in groups for i in g) == list(range(7))
    loads = [sum([10, 1, 1, 1, 9, 2, 8][i] for i in g) for g in groups]
    assert max(loads) - min(loads) <= 2
    assert balanced_groups([5, 5], 8) == [[0], [1]]


@pytest.mark.spark
def test_segments_dataframe_equals_the_local_reader_on_kafka_files(spark, kafka_logdir):
    df = segments_dataframe(spark, kafka_logdir, num_tasks=3)
    got = sorted((r.asDict() for r in df.collect()), key=lambda r: r["offset"])
    assert got == _local_rows(kafka_logdir)
    assert len(got) == 720


@pytest.mark.spark
def test_segments_dataframe_reads_many_partitions_by_uri(spark, tmp_path):
    for partition in range(4):
        part = tmp_path / "data" / f"events-{partition}"
        part.mkdir(parents=True)
        for base in (0, 10):
            records = [Record(o, 1000 + o, b"k%d" % (o % 3), b"v") for o in range(base, base + 10)]
            (part / segment_file_name(base, LOG_SUFFIX)).write_bytes(build_batch(records, base_offset=base))
    df = segments_dataframe(spark, (tmp_path / "data").as_uri())
    counts = {(r.topic, r.partition): r["count"] for r in df.groupBy("topic", "partition").count().collect()}
    assert counts == {("events", p): 20 for p in range(4)}


@pytest.mark.spark
def test_segment_metadata_matches_the_engines_segments(spark, kafka_logdir):
    rows = sorted((r.asDict() for r in segment_metadata_dataframe(spark, kafka_logdir).collect()),
                  key=lambda r: r["base_offset"])
    assert [r["record_count"] for r in rows] == [105, 106, 107, 108, 105, 102, 87]
    log = Log.open(kafka_logdir / "plain-0", read_only=True)
    try:
        for row, segment in zip(rows, log.segments, strict=True):
            assert row["base_offset"] == segment.base_offset
            assert row["next_offset"] == segment.next_offset
            assert row["size"] == segment.size
            assert row["largest_timestamp"] == segment.largest_timestamp
            assert row["first_batch_timestamp"] == segment.first_batch_timestamp
            assert row == read_segment_metadata(row["path"], last_modified_ms=row["last_modified_ms"])
    finally:
        log.close()


def test_record_schema_has_its_spark_types():
    from spark_tools.dataframes import spark_schema
    from spark_tools.reader import METADATA_SCHEMA, RECORD_SCHEMA

    ddl = spark_schema(RECORD_SCHEMA).simpleString()
    assert ddl.startswith("struct<topic:string,partition:int,segment_base_offset:bigint")
    assert "key:binary" in ddl and "producer_epoch:smallint" in ddl and "magic:tinyint" in ddl
    assert "largest_timestamp:bigint" in spark_schema(METADATA_SCHEMA).simpleString()


@pytest.mark.spark
def test_segments_dataframe_column_projection(spark, kafka_logdir):
    df = segments_dataframe(spark, kafka_logdir, columns=["partition", "offset", "key_hash"])
    assert df.columns == ["partition", "offset", "key_hash"]
    assert df.count() == 720
    with pytest.raises(LogstoreError, match="unknown reader columns"):
        segments_dataframe(spark, kafka_logdir, columns=["value"])

"""spark_tools.read_segments: segment files to Arrow, one row per record (no Spark needed)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import mmh3
import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from logstore.errors import CorruptRecordError
from logstore.log_files import LOG_SUFFIX, segment_file_name
from logstore.records import Record, build_batch, build_batch_columnar
from spark_tools.reader import RECORD_SCHEMA, read_segments, scan_segment
from tests.support.paths import KAFKA_SAMPLE

SAMPLES = KAFKA_SAMPLE
DUMP_BATCH = re.compile(
    r"baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .*producerId: (-?\d+) "
    r"producerEpoch: (-?\d+) partitionLeaderEpoch: (-?\d+) isTransactional: (\w+) "
    r"isControl: (\w+) .*position: (\d+) (\w+): (-?\d+) size: (\d+) magic: (\d) "
    r"compresscodec: (\w+)"
)
DUMP_RECORD = re.compile(
    r"\| offset: (\d+) (\w+): (-?\d+) keySize: (-?\d+) valueSize: (-?\d+) "
    r"sequence: -?\d+ headerKeys: \[([^\]]*)\]"
)


def _table(path, **kwargs) -> pa.Table:
    return pa.Table.from_batches(list(read_segments(path, **kwargs)), schema=RECORD_SCHEMA)


def _write_segment(directory: Path, base_offset: int, batches: list[bytes]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / segment_file_name(base_offset, LOG_SUFFIX)
    path.write_bytes(b"".join(batches))
    return path


@pytest.fixture
def kafka_logdir(tmp_path) -> Path:
    target = tmp_path / "logdir"
    shutil.copytree(SAMPLES / "logdir", target)
    return target


def test_kafka_written_segments_match_dump_log_segments(kafka_logdir):
    for log in sorted((kafka_logdir / "plain-0").glob("*.log")):
        table = _table(log).to_pylist()
        dump = (SAMPLES / "dump-logsegments/plain-0" / f"{log.name}.txt").read_text()
        expected = []
        batch = None
        for line in dump.splitlines():
            if m := DUMP_BATCH.search(line):
                batch = m.groups()
            elif m := DUMP_RECORD.search(line):
                headers = [h for h in m.group(6).split(",") if h]
                expected.append((batch, m.groups(), len(headers)))
        assert len(table) == len(expected)
        for row, (b, r, header_count) in zip(table, expected, strict=True):
            assert row["topic"] == "plain" and row["partition"] == 0
            assert row["segment_base_offset"] == int(log.stem)
            assert row["batch_base_offset"] == int(b[0])
            assert row["producer_id"] == int(b[3]) and row["producer_epoch"] == int(b[4])
            assert row["partition_leader_epoch"] == int(b[5])
            assert row["is_transactional"] == (b[6] == "true")
            assert row["is_control"] == (b[7] == "true")
            assert row["batch_position"] == int(b[8])
            assert row["batch_size"] == int(b[11])
            assert row["magic"] == int(b[12])
            assert row["compression"] == b[13]
            assert row["offset"] == int(r[0])
            assert row["timestamp_type"] == r[1]
            assert row["timestamp"] == int(r[2])
            assert row["key_size"] == int(r[3])
            assert row["value_size"] == int(r[4])
            assert row["is_tombstone"] == (int(r[4]) == -1)
            assert row["header_count"] == header_count


def test_keys_and_key_hashes_match_mmh3(tmp_path):
    keys = [b"", b"a", b"0123456789abcdef", b"0123456789abcdefXYZ", None, b"k" * 100]
    records = [Record(i, 1000 + i, k, b"v") for i, k in enumerate(keys)]
    path = _write_segment(tmp_path / "t-0", 0, [build_batch(records)])
    table = _table(path)
    assert table.column("key").to_pylist() == keys
    assert table.column("key_hash").to_pylist() == [
        None if k is None else mmh3.hash64(k)[0] for k in keys
    ]
    assert table.column("key_size").to_pylist() == [-1 if k is None else len(k) for k in keys]


def test_batch_metadata_repeats_over_each_batchs_records(tmp_path):
    first = build_batch(
        [Record(10, 5, b"a", None), Record(11, 6, b"b", b"xy", (("h", b"1"), ("g", None)))],
        base_offset=10, compression="zstd", producer_id=7, producer_epoch=3, base_sequence=0,
        is_transactional=True, partition_leader_epoch=4,
    )
    commit = build_batch_columnar(
        [b"\x00\x00\x00\x01"], [b"\x00\x00\x00\x00\x00\x05"], timestamps=[9], base_offset=12,
        producer_id=7, producer_epoch=3, is_transactional=True, is_control=True,
    )
    path = _write_segment(tmp_path / "orders-3", 10, [first, commit])
    rows = _table(path).to_pylist()
    assert [r["offset"] for r in rows] == [10, 11, 12]
    assert [r["batch_base_offset"] for r in rows] == [10, 10, 12]
    assert [r["batch_position"] for r in rows] == [0, 0, len(first)]
    assert [r["batch_size"] for r in rows] == [len(first), len(first), len(commit)]
    assert [r["compression"] for r in rows] == ["zstd", "zstd", "none"]
    assert [r["is_tombstone"] for r in rows] == [True, False, False]
    assert [r["header_count"] for r in rows] == [0, 2, 0]
    assert [r["is_control"] for r in rows] == [False, False, True]
    assert all(r["is_transactional"] and r["producer_id"] == 7 for r in rows)
    assert {(r["topic"], r["partition"], r["segment_base_offset"]) for r in rows} == {
        ("orders", 3, 10)
    }


def test_chunks_cover_every_record_once(tmp_path):
    batches = [
        build_batch([Record(o, o, b"%d" % (o % 7), b"v") for o in range(b * 10, b * 10 + 10)],
                    base_offset=b * 10)
        for b in range(9)
    ]
    path = _write_segment(tmp_path / "t-0", 0, batches)
    chunks = list(read_segments(path, chunk_rows=25))
    assert len(chunks) == 3
    assert pa.Table.from_batches(chunks).column("offset").to_pylist() == list(range(90))


def test_topic_and_partition_can_be_given(tmp_path):
    path = _write_segment(tmp_path / "t-0", 0, [build_batch([Record(0, 0, b"k", b"v")])])
    table = _table(path, topic="other", partition=9)
    assert table.column("topic").to_pylist() == ["other"]
    assert table.column("partition").to_pylist() == [9]


def test_empty_segment_reads_as_no_rows(tmp_path):
    path = _write_segment(tmp_path / "t-0", 0, [])
    assert _table(path).num_rows == 0


def test_reads_through_a_pyarrow_filesystem(tmp_path):
    path = _write_segment(tmp_path / "t-1", 0, [build_batch([Record(0, 0, b"k", b"v")])])
    fs = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    table = _table("t-1/00000000000000000000.log", filesystem=fs)
    assert table.column("key").to_pylist() == [b"k"]
    assert _table(path.as_uri()).column("partition").to_pylist() == [1]


def test_corrupt_batch_names_file_and_position(tmp_path):
    good = build_batch([Record(0, 0, b"k", b"v")])
    bad = bytearray(build_batch([Record(1, 0, b"k", b"value")], base_offset=1))
    bad[-1] ^= 0xFF
    path = _write_segment(tmp_path / "t-0", 0, [good, bytes(bad)])
    with pytest.raises(CorruptRecordError, match="CRC") as info:
        _table(path)
    assert info.value.path == str(path)
    assert info.value.position == len(good)


def test_partial_batch_at_end_is_an_error(tmp_path):
    batch = build_batch([Record(0, 0, b"k", b"v")])
    path = _write_segment(tmp_path / "t-0", 0, [batch, batch[:20]])
    with pytest.raises(CorruptRecordError, match="partial batch") as info:
        list(scan_segment(path))
    assert info.value.position == len(batch)


def test_legacy_magic_0_and_1_entries_read_as_rows(tmp_path):
    from logstore.records import build_legacy_entry

    v0 = build_legacy_entry([Record(0, -1, b"a", b"old")], magic=0)
    v1 = build_legacy_entry(
        [Record(1, 50, b"b", b"x"), Record(2, 60, None, None)], magic=1, compression="gzip")
    v2 = build_batch([Record(3, 70, b"c", b"new")], base_offset=3)
    path = _write_segment(tmp_path / "legacy-0", 0, [v0, v1, v2])
    rows = _table(path).to_pylist()
    assert [r["offset"] for r in rows] == [0, 1, 2, 3]
    assert [r["magic"] for r in rows] == [0, 1, 1, 2]
    assert [r["key"] for r in rows] == [b"a", b"b", None, b"c"]
    assert [r["is_tombstone"] for r in rows] == [False, False, True, False]
    assert [r["compression"] for r in rows] == ["none", "gzip", "gzip", "none"]
    assert [r["timestamp"] for r in rows][1:] == [50, 60, 70]

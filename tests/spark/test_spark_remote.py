"""Audits over remote filesystems: segment reads by byte range, URI schemes, and a local S3 server
(moto in server mode on 127.0.0.1) for input and for reports written with --out."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from logstore.cli import main
from logstore.errors import CorruptRecordError, LogstoreError
from logstore.log_files import LOG_SUFFIX, segment_file_name
from logstore.records import Record, build_batch
from spark_tools.layout import redact, resolve_filesystem
from spark_tools.reader import (
    RECORD_SCHEMA,
    SegmentBatches,
    read_segment_metadata,
    read_segments,
    scan_segment,
)
from spark_tools.reports import local_reports
from tests.support.paths import KAFKA_LOGDIR

SAMPLES = KAFKA_LOGDIR
SECRET = "not-a-real-secret-7f3a"
NOW = 1_800_000_000_000
CONFIGS = {"retention.ms": 86_400_000, "cleanup.policy": "compact,delete",
           "min.cleanable.dirty.ratio": "0.01"}


def _remote(root: Path) -> pafs.FileSystem:
    """A local directory seen through a filesystem that is not LocalFileSystem (read by range)."""
    return pafs.SubTreeFileSystem(str(root), pafs.LocalFileSystem())


def _table(path, **kwargs) -> pa.Table:
    return pa.Table.from_batches(list(read_segments(path, **kwargs)), schema=RECORD_SCHEMA)


def _write_segment(directory: Path, batches: list[bytes]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / segment_file_name(0, LOG_SUFFIX)
    path.write_bytes(b"".join(batches))
    return path


def test_ranged_reads_equal_memory_mapped_reads():
    fs = _remote(SAMPLES)
    for path in sorted((SAMPLES / "plain-0").glob("*.log")):
        inner = f"plain-0/{path.name}"
        assert not SegmentBatches(inner, fs).local
        assert _table(inner, filesystem=fs).equals(_table(path))
        streamed = read_segment_metadata(inner, filesystem=fs, last_modified_ms=0)
        mapped = read_segment_metadata(path, last_modified_ms=0)
        assert {**streamed, "path": None} == {**mapped, "path": None}


def test_ranged_chunks_are_bounded_by_rows(tmp_path):
    batches = [build_batch([Record(i, 0, b"k%d" % i, b"v")], base_offset=i) for i in range(10)]
    _write_segment(tmp_path / "t-0", batches)
    scans = list(scan_segment("t-0/" + segment_file_name(0, LOG_SUFFIX),
                              filesystem=_remote(tmp_path), chunk_rows=3))
    assert [s.num_records for s in scans] == [3, 3, 3, 1]
    assert [int(p) for s in scans for p in s.position] == [
        sum(len(b) for b in batches[:i]) for i in range(10)]


def test_ranged_corruption_names_file_and_position(tmp_path):
    good = build_batch([Record(0, 0, b"k", b"v")])
    bad = bytearray(build_batch([Record(1, 0, b"k", b"value")], base_offset=1))
    bad[-1] ^= 0xFF
    _write_segment(tmp_path / "t-0", [good, bytes(bad)])
    inner = "t-0/" + segment_file_name(0, LOG_SUFFIX)
    with pytest.raises(CorruptRecordError, match="CRC") as info:
        _table(inner, filesystem=_remote(tmp_path))
    assert info.value.path == inner and info.value.position == len(good)


def test_ranged_partial_batch_at_end_is_an_error(tmp_path):
    batch = build_batch([Record(0, 0, b"k", b"v")])
    _write_segment(tmp_path / "t-0", [batch, batch[:20]])
    with pytest.raises(CorruptRecordError, match="partial batch") as info:
        list(scan_segment("t-0/" + segment_file_name(0, LOG_SUFFIX), filesystem=_remote(tmp_path)))
    assert info.value.position == len(batch)


def test_s3a_is_s3_and_uris_print_without_credentials():
    fs, inner = resolve_filesystem(f"s3a://AKID:{SECRET}@bucket/data?region=us-east-1")
    assert isinstance(fs, pafs.S3FileSystem) and inner == "bucket/data"
    assert redact(f"s3://AKID:{SECRET}@bucket/x/y?secret_key={SECRET}") == "s3://bucket/x/y"
    assert redact("/local/path") == "/local/path"


def test_hdfs_without_libhdfs_is_one_line_naming_what_is_missing(monkeypatch):
    monkeypatch.setenv("ARROW_LIBHDFS_DIR", "/nonexistent")
    with pytest.raises(LogstoreError) as info:
        resolve_filesystem("hdfs://namenode:8020/kafka")
    message = str(info.value)
    assert "\n" not in message and "libhdfs" in message and "HADOOP_HOME" in message


def test_unknown_scheme_is_one_line():
    with pytest.raises(LogstoreError, match="cannot open nope://bucket/x: "):
        resolve_filesystem(f"nope://user:{SECRET}@bucket/x")


# --- a local S3 server -------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3():
    """moto's S3 server on 127.0.0.1 with a bucket holding the Kafka samples under data/;
    yields the URI query that points pyarrow at it."""
    import boto3
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        endpoint = f"127.0.0.1:{port}"
        boto3.client("s3", endpoint_url=f"http://{endpoint}", region_name="us-east-1",
                     aws_access_key_id="testing", aws_secret_access_key=SECRET,
                     ).create_bucket(Bucket="audit")
        query = f"?endpoint_override={endpoint}&scheme=http&region=us-east-1"
        fs, _ = pafs.FileSystem.from_uri(f"s3://testing:{SECRET}@audit/{query}")
        pafs.copy_files(str(SAMPLES), "audit/data", source_filesystem=pafs.LocalFileSystem(),
                        destination_filesystem=fs)
        yield {"query": query, "endpoint": endpoint, "fs": fs}
    finally:
        server.stop()


def test_local_reports_from_s3_with_credentials_from_the_environment(s3, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://{s3['endpoint']}")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    got = local_reports("s3://audit/data", CONFIGS, NOW)
    expected = local_reports(SAMPLES, CONFIGS, NOW)
    for kind, table in expected.items():
        assert got[kind].to_pylist() == table.to_pylist()


def test_segments_on_s3_are_read_by_byte_range_and_equal_local_reads(s3):
    for path in sorted((SAMPLES / "plain-0").glob("*.log")):
        inner = f"audit/data/plain-0/{path.name}"
        assert _table(inner, filesystem=s3["fs"]).equals(_table(path))
        remote = read_segment_metadata(inner, filesystem=s3["fs"], last_modified_ms=0)
        local = read_segment_metadata(path, last_modified_ms=0)
        assert {**remote, "path": None} == {**local, "path": None}


@pytest.mark.spark
def test_cli_audit_reads_s3a_and_writes_reports_to_s3(spark, s3, tmp_path, capsys):
    uri = f"s3a://testing:{SECRET}@audit/data{s3['query']}"
    out = f"s3://testing:{SECRET}@audit/reports{s3['query']}"
    args = ["--config", "retention.ms=86400000", "--config", "cleanup.policy=compact,delete",
            "--config", "min.cleanable.dirty.ratio=0.01", "--now", str(NOW), "--master", "local[2]"]
    assert main(["audit", uri, "--out", out, "--format", "parquet", "--plot", *args]) == 0
    printed = capsys.readouterr()
    assert SECRET not in printed.out + printed.err
    assert "wrote retention report (parquet) to s3://audit/reports/retention.parquet" in printed.out
    fs = s3["fs"]
    names = sorted(i.base_name for i in fs.get_file_info(pafs.FileSelector("audit/reports")))
    assert names == ["compaction.parquet", "reclaimable-bytes.png", "retention.parquet"]
    local_out = tmp_path / "local-out"
    data = tmp_path / "data"
    shutil.copytree(SAMPLES, data)
    assert main(["audit", str(data), "--out", local_out.as_uri(), "--format", "parquet", *args]) == 0
    for kind in ("compaction", "retention"):
        remote = pq.read_table(f"audit/reports/{kind}.parquet", filesystem=fs)
        assert remote.equals(pq.read_table(local_out / f"{kind}.parquet"))


@pytest.mark.spark
def test_corrupt_segment_on_s3_is_one_line_naming_partition_and_file(spark, s3, capsys):
    batch = bytearray(build_batch([Record(0, 0, b"k", b"value")]))
    batch[-1] ^= 0xFF
    fs = s3["fs"]
    with fs.open_output_stream("audit/bad/t-3/" + segment_file_name(0, LOG_SUFFIX)) as f:
        f.write(bytes(batch) + build_batch([Record(1, 0, b"k", b"v")], base_offset=1))
    uri = f"s3://testing:{SECRET}@audit/bad{s3['query']}"
    assert main(["audit", uri, "--report", "compaction", "--config", "cleanup.policy=compact",
                 "--master", "local[2]"]) == 1
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("logstore:")]
    assert len(lines) == 1 and SECRET not in err
    assert "partition t-3" in lines[0] and "audit/bad/t-3/00000000000000000000.log" in lines[0]
    assert "CRC" in lines[0]


def test_json_reports_are_sorted_by_topic_then_partition_number(tmp_path):
    from spark_tools.report_files import write_report

    table = pa.table({"topic": ["b", "a", "a"], "partition": pa.array([0, 10, 9], pa.int32())})
    path = write_report(table, tmp_path.as_uri(), "json", name="r")
    assert path == f"{tmp_path.as_uri()}/r.json"
    rows = [json.loads(line) for line in (tmp_path / "r.json").read_text().splitlines()]
    assert [(r["topic"], r["partition"]) for r in rows] == [("a", 9), ("a", 10), ("b", 0)]


# --- byte ranges: what a remote read fetches -----------------------------------------------


class _CountingFile:
    """A read-only file object that counts the bytes read from it (pyarrow wraps it)."""

    def __init__(self, path: str, counter: list[int]):
        self._file = open(path, "rb")  # noqa: SIM115 - closed by pyarrow through close()
        self._counter = counter
        self.closed = False

    def read(self, n: int = -1) -> bytes:
        data = self._file.read(n)
        self._counter[0] += len(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._file.seek(offset, whence)

    def tell(self) -> int:
        return self._file.tell()

    def size(self) -> int:
        return Path(self._file.name).stat().st_size

    def close(self) -> None:
        self._file.close()
        self.closed = True


class _CountingHandler(pafs.FileSystemHandler):
    """A directory as a non-local pyarrow filesystem whose file reads are counted in ``read``."""

    def __init__(self, root: Path):
        self.root = root
        self.inner = pafs.SubTreeFileSystem(str(root), pafs.LocalFileSystem())
        self.read = [0]

    def get_type_name(self) -> str:
        return "counting"

    def equals(self, other) -> bool:
        return isinstance(other, _CountingHandler) and other.root == self.root

    def normalize_path(self, path: str) -> str:
        return path

    def get_file_info(self, paths):
        return self.inner.get_file_info(paths)

    def get_file_info_selector(self, selector):
        return self.inner.get_file_info(selector)

    def open_input_file(self, path: str):
        return pa.PythonFile(_CountingFile(str(self.root / path), self.read), mode="r")

    def open_input_stream(self, path: str):
        return self.open_input_file(path)

    def _read_only(self, *args):
        raise OSError("read-only test filesystem")

    create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = _read_only
    delete_file = move = copy_file = open_output_stream = open_append_stream = _read_only


def _large_batches(directory: Path, batches: int, records: int, value_bytes: int) -> Path:
    """One segment of ``batches`` batches, each of ``records`` records of ``value_bytes``."""
    return _write_segment(directory, [
        build_batch([Record(b * records + i, 1_000 + b, b"k%d" % i, b"v" * value_bytes)
                     for i in range(records)], base_offset=b * records)
        for b in range(batches)])


def test_segment_metadata_reads_only_batch_headers_by_byte_range(tmp_path):
    path = _large_batches(tmp_path / "t-0", batches=20, records=16, value_bytes=16 << 10)
    handler = _CountingHandler(tmp_path)
    remote = read_segment_metadata("t-0/" + path.name, filesystem=pafs.PyFileSystem(handler),
                                   last_modified_ms=0)
    local = read_segment_metadata(path, last_modified_ms=0)
    assert {**remote, "path": None} == {**local, "path": None}
    assert remote["batch_count"] == 20
    assert handler.read[0] * 10 < path.stat().st_size


def test_ranged_full_reads_fetch_each_byte_once_and_equal_local_reads(tmp_path):
    path = _large_batches(tmp_path / "t-0", batches=20, records=16, value_bytes=16 << 10)
    handler = _CountingHandler(tmp_path)
    remote = _table("t-0/" + path.name, filesystem=pafs.PyFileSystem(handler))
    assert remote.equals(_table(path))
    assert handler.read[0] == path.stat().st_size

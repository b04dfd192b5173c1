"""Report files written by the driver with pyarrow, on any filesystem pyarrow opens.

The report rows are on the driver already (one per partition), so the driver writes them:
``--out`` means the same place for a local path, ``file://`` or an object store, whatever
filesystem the executors see. One file per report, named after it (``compaction.json``),
rows in (topic, partition) order.
"""

from __future__ import annotations

import csv
import io
import json
from os import PathLike, fspath
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from logstore.errors import LogstoreError
from spark_tools.layout import join_path, redact, resolve_filesystem

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

REPORT_FORMATS = ("json", "csv", "parquet")


def sort_rows(table: pa.Table) -> pa.Table:
    """``table`` in (topic, partition) order, partitions numerically (when it has those columns)."""
    if {"topic", "partition"} <= set(table.column_names):
        return table.sort_by([("topic", "ascending"), ("partition", "ascending")])
    return table


def output_path(out_dir: str | PathLike[str], name: str) -> str:
    """``out_dir/name`` as given (a local path or a URI), credentials removed, for messages."""
    return join_path(redact(fspath(out_dir)).rstrip("/"), name)


def write_bytes(out_dir: str | PathLike[str], name: str, data: bytes) -> str:
    """Write ``data`` as ``out_dir/name`` (created if missing); returns ``output_path``."""
    fs, inner = resolve_filesystem(out_dir)
    fs.create_dir(inner, recursive=True)
    with fs.open_output_stream(join_path(inner.rstrip("/"), name)) as out:
        out.write(data)
    return output_path(out_dir, name)


def _json_lines(table: pa.Table) -> bytes:
    return b"".join(json.dumps(row, separators=(",", ":")).encode() + b"\n"
                    for row in table.to_pylist())


def _csv(table: pa.Table) -> bytes:
    """CSV with a header, nulls empty; nested values (lists, structs) as JSON text, as CSV
    cannot hold them."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(table.column_names)
    for row in table.to_pylist():
        writer.writerow(["" if v is None else json.dumps(v, separators=(",", ":"))
                         if isinstance(v, list | dict) else v for v in row.values()])
    return text.getvalue().encode()


def _parquet(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


_ENCODERS = {"json": _json_lines, "csv": _csv, "parquet": _parquet}


def write_report(report: pa.Table | DataFrame | Any, out_dir: str | PathLike[str],
                 fmt: str = "json", name: str = "report") -> str:
    """Write a report (an Arrow table or a Spark DataFrame, collected here) as one file
    ``out_dir/<name>.<fmt>``: JSON lines, CSV with a header, or Parquet.

    ``out_dir`` is a local path or a URI (``file://``, ``s3://``, ...) and is created if
    missing; an existing file of that name is replaced. Returns the file's path as given,
    without credentials. Raises LogstoreError for an unknown format.
    """
    if fmt not in REPORT_FORMATS:
        raise LogstoreError(f"unknown report format {fmt!r} (choose {', '.join(REPORT_FORMATS)})")
    table = report if isinstance(report, pa.Table) else report.toArrow()
    return write_bytes(out_dir, f"{name}.{fmt}", _ENCODERS[fmt](sort_rows(table)))

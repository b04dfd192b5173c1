"""The nodes of a KafkaCluster and what can happen to them: a clean stop, a kill, a power loss,
a restart. A node runs in this process (its KafkaServer on its own event-loop thread) or as a
`logstore serve` process of its own; either way it keeps its data directory, its ports and its
ControlHooks across restarts, so that clients and the other nodes find it again where it was."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path

import logstore
from logstore.checkpoint import RECOVERY_POINT_CHECKPOINT, read_offsets_checkpoint
from logstore.clock import Clock
from logstore.errors import LogstoreError
from logstore.log_files import is_partition_dir_name, partition_dir_name
from logstore.server.cluster.power_loss import drop_unflushed
from logstore.server.control_hooks import ControlHooks
from logstore.server.kraft.metadata_log import METADATA_PARTITION_DIR
from logstore.server.server import KafkaServer

HOST = "127.0.0.1"
CONTROLLER_LISTENER = "CONTROLLER"
PROCESS_START_S = 60  # a fresh interpreter imports the server and may compile its kernels
PROCESS_STOP_S = 30
# What `logstore serve` prints once it serves: its client address and, on a controller, the controller listener's.
SERVING_LINE = re.compile(rf"logstore: serving .* on [^ ]+:(\d+) .*?(?:{CONTROLLER_LISTENER} on [^ ]+:(\d+))?\)$",
                          re.MULTILINE)


def free_port() -> int:
    """A port nothing listens on now (the kernel's pick for a socket bound to port 0)."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


class NodeStartError(LogstoreError):
    """A cluster node did not start (its process exited, or never said it was serving)."""


class ClusterMember(ABC):
    """Node `node_id` of a cluster: `roles` ("broker", "controller" or both), its data directory
    and its Kafka configs; `controller` is the member brokers register with (None on that one)."""

    def __init__(self, node_id: int, roles: str, data_dir: Path, config: Mapping[str, str], cluster_id: str,
                 controller: ClusterMember | None):
        self.node_id = node_id
        self.roles = roles
        self.data_dir = data_dir
        self.config = dict(config)
        self.cluster_id = cluster_id
        self.controller = controller
        self.hooks = ControlHooks(node_id)  # per-API hooks and cut links, kept across restarts
        self.port: int | None = None  # the clients' listener, fixed after the first start
        self.controller_port: int | None = None

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def bootstrap_servers(self) -> str:
        """This node's address for a client's bootstrap.servers."""
        return f"{HOST}:{self.port}"

    def properties(self) -> dict[str, str]:
        """The node's `server.properties`: its roles, the quorum, its listeners (ports it had before, else free ones)."""
        props = {**self.config, "node.id": str(self.node_id), "process.roles": self.roles,
                 "controller.listener.names": CONTROLLER_LISTENER}
        listeners = [f"PLAINTEXT://{HOST}:{self.port or 0}"] if self.is_broker else []
        if self.controller is None:
            listeners.append(f"{CONTROLLER_LISTENER}://{HOST}:{self.controller_port or 0}")
            props["controller.quorum.voters"] = f"{self.node_id}@{HOST}:{self.controller_port or 0}"
        else:
            props["controller.quorum.bootstrap.servers"] = f"{HOST}:{self.controller.controller_port}"
        props["listeners"] = ",".join(listeners)
        return props

    @property
    @abstractmethod
    def running(self) -> bool:
        """Whether the node is up."""

    @abstractmethod
    def start(self) -> None:
        """Start the node; returns once it serves (a broker: registered and unfenced)."""

    @abstractmethod
    def stop(self) -> None:
        """A clean shutdown: logs flushed and closed, the controller told (the broker is fenced at once)."""

    @abstractmethod
    def kill(self) -> None:
        """Stop the node as SIGKILL does: nothing flushed, checkpointed or said; its broker
        session runs out at the controller. Written bytes survive (the page cache keeps them)."""

    @abstractmethod
    def _recovery_points(self) -> dict[Path, int]:
        """After a kill: how far each partition log of the node had been fsynced."""

    def power_loss(self) -> int:
        """Kill the node and drop what it had not fsynced, as a power cut would: each log's
        segment files cut back to its recovery point. Returns the bytes dropped. A node in this
        process cuts at the logs' own recovery points (exactly); a process node at those of its
        last recovery-point checkpoint, which may also drop records fsynced since (see ProcessNode)."""
        self.kill()
        return sum(drop_unflushed(path, point) for path, point in self._recovery_points().items() if path.is_dir())

    def restart(self) -> None:
        """Stop the node cleanly if it runs, then start it again on the same ports and directory."""
        if self.running:
            self.stop()
        self.start()


class InProcessNode(ClusterMember):
    """A node whose KafkaServer runs in this process, on its own event-loop thread; `server` is
    that KafkaServer while the node runs (None while it is down)."""

    def __init__(self, *args, clock: Clock | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self._clock = clock
        self.server: KafkaServer | None = None
        self._abandoned: dict[Path, int] = {}

    @property
    def running(self) -> bool:
        return self.server is not None

    def start(self) -> None:
        if self.server is not None:
            return
        self._abandoned = {}  # a power loss from here on cuts back what this run leaves unflushed
        server = KafkaServer(self.data_dir, port=self.port or 0, config=self.properties(), clock=self._clock,
                             cluster_id=self.cluster_id, hooks=self.hooks).start()
        self.server, self.port = server, server.port
        if server.cluster is not None and server.cluster.controller_port is not None:
            self.controller_port = server.cluster.controller_port

    def stop(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            server.stop()

    def kill(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            server.kill()
            # the abandoned logs still know how far they had fsynced: the power loss reads it
            self._abandoned = {log.dir: log.recovery_point for log in server.manager.logs()}

    def _recovery_points(self) -> dict[Path, int]:
        return self._abandoned


class ProcessNode(ClusterMember):
    """A node run as a `logstore serve` process of its own (this interpreter, this logstore);
    its `server.properties` and stderr sit beside its data directory."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.process: subprocess.Popen | None = None
        self._log_start = 0  # where this start's lines begin in the log file
        self.properties_file = self.data_dir.with_name(f"{self.data_dir.name}.properties")
        self.log_file = self.data_dir.with_name(f"{self.data_dir.name}.log")

    @property
    def running(self) -> bool:
        return self.process is not None

    def reserve_ports(self) -> None:
        """Choose the controller listener's port before the first start, so that every node of a
        cluster can start at once (the brokers' configs name it). Only that one: a port chosen
        ahead may be taken by another process before the node binds it, so the client listener
        binds port 0 and its port is read from the serving line."""
        if self.controller is None:
            self.controller_port = self.controller_port or free_port()

    def start(self) -> None:
        if self.process is None:
            self.launch()
            self.wait_serving()

    def launch(self) -> None:
        """Start the process; `wait_serving` waits until it serves."""
        self.properties_file.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        self._log_start = self.log_file.stat().st_size if self.log_file.exists() else 0
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(logstore.__file__).parent.parent),
                                                          env.get("PYTHONPATH")]))
        with self.log_file.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "logstore", "serve", str(self.data_dir), "--config-file",
                 str(self.properties_file), f"--cluster-id={self.cluster_id}"],  # an id may start with "-"
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, env=env)

    def wait_serving(self) -> None:
        """Wait for the line saying the process serves (written once its broker is unfenced);
        NodeStartError, the process killed, when it exits or stays silent first."""
        try:
            self._wait_serving()
        except BaseException:
            self.kill()
            raise

    def _wait_serving(self) -> None:
        deadline = time.monotonic() + PROCESS_START_S
        while True:
            with self.log_file.open("rb") as log:
                log.seek(self._log_start)
                match = SERVING_LINE.search(log.read().decode(errors="replace"))
            if match is not None:
                self.port = int(match.group(1))
                if match.group(2):
                    self.controller_port = int(match.group(2))
                return
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise NodeStartError(f"node {self.node_id} did not start (exit code {self.process.poll()}); "
                                     f"see {self.log_file}")
            time.sleep(0.05)

    def _end(self, signum: int) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        process.send_signal(signum)
        try:
            process.wait(PROCESS_STOP_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def stop(self) -> None:
        self._end(signal.SIGTERM)

    def kill(self) -> None:
        self._end(signal.SIGKILL)

    def _recovery_points(self) -> dict[Path, int]:
        """From the recovery-point checkpoint, the only record of them a killed process leaves:
        behind the logs' own by what they fsynced in the `log.flush.offset.checkpoint.interval.ms`
        (200 ms here) since it was last written, and 0 for a partition created since. So every
        unflushed byte goes, and possibly fsynced records too: a harsher loss than a real power
        cut, never a milder one. The metadata log is fsynced as it is written: nothing of it goes."""
        points = read_offsets_checkpoint(self.data_dir / RECOVERY_POINT_CHECKPOINT) \
            if (self.data_dir / RECOVERY_POINT_CHECKPOINT).exists() else {}
        logs = {path: 0 for path in self.data_dir.iterdir() if path.is_dir()
                and is_partition_dir_name(path.name) and path.name != METADATA_PARTITION_DIR}
        logs.update({path: point for (topic, partition), point in points.items()
                     if (path := self.data_dir / partition_dir_name(topic, partition)) in logs})
        return logs

"""`logstore serve` processes forming a KRaft cluster from `server.properties` files: a
combined broker+controller and a broker-only node, one process each."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.server.test_server_kraft_cluster import CLUSTER_ID, brokers_of, metadata
from tests.support.paths import REPO_ROOT

BANNER = re.compile(r"on 127\.0\.0\.1:(\d+) \(node\.id (\d+), cluster\.id (\S+), process\.roles ([a-z,]+)"
                    r"(?:, CONTROLLER on 127\.0\.0\.1:(\d+))?\)")


def serve(data_dir: Path, properties: dict[str, str]) -> tuple[subprocess.Popen, re.Match]:
    config = data_dir.with_suffix(".properties")
    config.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
    process = subprocess.Popen(
        [sys.executable, "-m", "logstore", "serve", str(data_dir), "--config-file", str(config),
         "--cluster-id", CLUSTER_ID], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    line = process.stderr.readline()
    match = BANNER.search(line)
    if match is None:
        process.kill()
        raise AssertionError(f"no banner: {line}{process.communicate(timeout=30)[1]}")
    return process, match


@pytest.mark.slow
def test_serve_processes_join_one_cluster_from_their_server_properties(tmp_path):
    controller, started = serve(tmp_path / "node-1", {
        "process.roles": "broker,controller", "node.id": "1", "controller.quorum.voters": "1@127.0.0.1:0",
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "controller.listener.names": "CONTROLLER"})
    processes = [controller]
    try:
        assert started.group(2, 3, 4) == ("1", CLUSTER_ID, "broker,controller")
        broker, joined = serve(tmp_path / "node-2", {
            "process.roles": "broker", "node.id": "2", "listeners": "PLAINTEXT://127.0.0.1:0",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{started.group(5)}",
            "controller.listener.names": "CONTROLLER"})
        processes.append(broker)
        assert joined.group(2, 4) == ("2", "broker")
        assert brokers_of(metadata(int(started.group(1)))) == [1, 2]
    finally:
        for process in reversed(processes):
            process.terminate()
            process.communicate(timeout=30)
    assert (tmp_path / "node-2" / "__cluster_metadata-0" / "00000000000000000000.log").stat().st_size > 0

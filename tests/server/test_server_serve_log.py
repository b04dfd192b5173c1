"""`logstore serve` at its default logging: a connection it closes shows on stderr with the
client's address and the reason (a TLS client on the plaintext port, here)."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys

from tests.support.paths import REPO_ROOT

TLS_CLIENT_HELLO = bytes.fromhex("160301020001") + b"\x00" * 64


def test_a_closed_connection_shows_on_stderr_at_the_default_level(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    process = subprocess.Popen([sys.executable, "-m", "logstore", "serve", str(tmp_path), "--listen", "127.0.0.1:0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        port = int(re.search(r"on 127\.0\.0\.1:(\d+)", process.stderr.readline()).group(1))
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            host, client_port = sock.getsockname()
            sock.sendall(TLS_CLIENT_HELLO)
            with contextlib.suppress(ConnectionResetError):
                assert sock.recv(1) == b""
    finally:
        process.terminate()
        _, err = process.communicate(timeout=30)
    assert f"closing connection from {host}:{client_port}: request size 369295618" in err

"""A connection the server closes is logged at WARN with the client's address and the reason:
how a user spots a TLS client on the plaintext port or a client speaking another protocol."""

from __future__ import annotations

import contextlib
import logging
import socket
import struct

import pytest

TLS_CLIENT_HELLO = bytes.fromhex("160301020001") + b"\x00" * 64
UNKNOWN_API = struct.pack(">ihhih", 10, 9999, 0, 7, -1)
GARBAGE = struct.pack(">i", 12) + struct.pack(">hhi", 3, 9, 1) + b"\xff\xff\xff\x7f"  # Metadata v9, bad body


@pytest.mark.parametrize(("frame", "reason"), [
    (TLS_CLIENT_HELLO, "request size 369295618"),
    (UNKNOWN_API, "api 9999 v0 is not supported"),
    (GARBAGE, "malformed api 3 v9"),
], ids=["tls-on-plaintext", "unknown-api", "garbage"])
def test_a_closed_connection_is_logged_at_warn_with_peer_and_reason(module_server, caplog, frame, reason):
    caplog.set_level(logging.WARNING, logger="logstore.server")
    with socket.create_connection(("127.0.0.1", module_server.port), timeout=10) as sock:
        host, port = sock.getsockname()
        sock.sendall(frame)
        with contextlib.suppress(ConnectionResetError):  # unread bytes make the close a reset
            assert sock.recv(1) == b""
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(f"{host}:{port}" in m and reason in m for m in warnings), warnings

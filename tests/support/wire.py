"""Kafka requests sent by hand over one socket, for tests that need exact frames, orders or
versions that no client library lets them choose."""

from __future__ import annotations

import socket
import struct


class WireClient:
    """One connection to a broker; requests framed with a header, responses decoded."""

    def __init__(self, port: int, *, timeout: float | None = 10, client_id: str = "wire"):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.client_id = client_id
        self.correlation = 0

    def send(self, request, correlation_id: int | None = None) -> int:
        """Frame and send `request` (a kafka-python request object); its correlation id."""
        if correlation_id is None:
            self.correlation += 1
            correlation_id = self.correlation
        request.with_header(correlation_id=correlation_id, client_id=self.client_id)
        self.sock.sendall(request.encode(header=True, framed=True))
        return correlation_id

    def receive(self, response_cls):
        """The next response, decoded as `response_cls`; ConnectionError if the broker closed."""
        head = recv_exactly(self.sock, 4)
        payload = None if head is None else recv_exactly(self.sock, struct.unpack(">i", head)[0])
        if payload is None:
            raise ConnectionError("the broker closed the connection")
        return response_cls.decode(payload, header=True)

    def call(self, request, response_cls, correlation_id: int | None = None):
        """Send `request` and return its response."""
        self.send(request, correlation_id)
        return self.receive(response_cls)

    def closed_by_broker(self) -> bool:
        """Whether the broker closed the connection (waits up to the socket's timeout)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def recv_exactly(sock: socket.socket, size: int) -> bytes | None:
    """`size` bytes from `sock`, or None if the peer closed the connection first."""
    chunks, left = [], size
    while left:
        try:
            chunk = sock.recv(min(left, 1 << 20))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)

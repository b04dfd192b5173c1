"""Transports: how a follower reaches its leader's Partition. One interface (`Transport`),
an in-process implementation (direct calls, the default) and a loopback TCP one (length-
prefixed frames: a JSON header plus the raw batch bytes) so replicas can live in other
processes. Errors raised by the leader are raised again, with the same class, on the caller.
"""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import struct
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from logstore import errors
from logstore.clean_shutdown import NO_BROKER_EPOCH
from logstore.errors import LogstoreError, ReplicaNotAvailableError
from logstore.replication.partition import EpochEndOffset, FetchResponse, Partition

PartitionKey = tuple[int, str, int]  # (replica id, topic, partition)

# Frame layout: total length (>i4, excluding itself), header length (>i4), JSON header, payload.
_FRAME = struct.Struct(">ii")
MAX_FRAME_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """A follower's fetch of one partition (Kafka's FetchRequest, one partition)."""

    topic: str
    partition: int
    replica_id: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int
    replica_epoch: int = NO_BROKER_EPOCH  # the follower's broker epoch (KIP-903's ReplicaState)


class Transport(Protocol):
    """What a follower needs from the network: fetch and OffsetsForLeaderEpoch on a leader.
    Raises ReplicaNotAvailableError when the leader cannot be reached."""

    def fetch(self, leader_id: int, request: FetchRequest) -> FetchResponse:
        """Send `request` to replica `leader_id`."""
        ...

    def offsets_for_leader_epoch(self, leader_id: int, topic: str, partition: int,
                                 current_leader_epoch: int, leader_epoch: int) -> EpochEndOffset:
        """Ask replica `leader_id` where `leader_epoch` ends in its log."""
        ...


def _serve_fetch(partition: Partition, request: FetchRequest) -> FetchResponse:
    return partition.fetch(request.replica_id, request.fetch_offset, request.max_bytes,
                           request.current_leader_epoch, request.last_fetched_epoch,
                           log_start_offset=request.log_start_offset, replica_epoch=request.replica_epoch)


class InProcessTransport:
    """Direct calls to Partitions registered under their replica id (a dead broker is one
    that is not registered)."""

    def __init__(self) -> None:
        self._partitions: dict[PartitionKey, Partition] = {}
        self._lock = threading.Lock()

    def register(self, partition: Partition) -> None:
        """Make `partition` reachable as replica `partition.replica_id`."""
        with self._lock:
            self._partitions[(partition.replica_id, partition.topic, partition.partition)] = partition

    def unregister(self, replica_id: int, topic: str, partition: int) -> None:
        """Make a replica unreachable (its broker went down)."""
        with self._lock:
            self._partitions.pop((replica_id, topic, partition), None)

    def _lookup(self, replica_id: int, topic: str, partition: int) -> Partition:
        with self._lock:
            found = self._partitions.get((replica_id, topic, partition))
        if found is None:
            raise ReplicaNotAvailableError(f"replica {replica_id} of {topic}-{partition} is not reachable")
        return found

    def fetch(self, leader_id: int, request: FetchRequest) -> FetchResponse:
        """Call the leader's Partition.fetch directly."""
        return _serve_fetch(self._lookup(leader_id, request.topic, request.partition), request)

    def offsets_for_leader_epoch(self, leader_id: int, topic: str, partition: int,
                                 current_leader_epoch: int, leader_epoch: int) -> EpochEndOffset:
        """Call the leader's Partition.offsets_for_leader_epoch directly."""
        leader = self._lookup(leader_id, topic, partition)
        return leader.offsets_for_leader_epoch(current_leader_epoch, leader_epoch)


# ---------------------------------------------------------------------- TCP framing


def _send_frame(sock: socket.socket, header: dict[str, Any], payload: bytes = b"") -> None:
    head = json.dumps(header, separators=(",", ":")).encode("utf-8")
    sock.sendall(_FRAME.pack(_FRAME.size - 4 + len(head) + len(payload), len(head)) + head + payload)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("connection closed mid-frame" if got else "connection closed")
        got += k
    return bytes(buf)


def _recv_frame(sock: socket.socket) -> tuple[dict[str, Any], bytes]:
    total, head_len = _FRAME.unpack(_recv_exact(sock, _FRAME.size))
    if not 0 <= head_len <= total - 4 or total > MAX_FRAME_BYTES:
        raise ConnectionError(f"bad frame: length {total}, header length {head_len}")
    body = _recv_exact(sock, total - 4)
    return json.loads(body[:head_len]), body[head_len:]


def _error_header(exc: LogstoreError) -> dict[str, Any]:
    attrs = {k: v for k, v in vars(exc).items() if isinstance(v, int | str | None)}
    return {"error": type(exc).__name__, "message": str(exc), "attrs": attrs}


def _raise_error(header: dict[str, Any]) -> None:
    cls = getattr(errors, header["error"], None)
    if not (isinstance(cls, type) and issubclass(cls, LogstoreError)):
        raise ReplicaNotAvailableError(f"remote error {header['error']}: {header['message']}")
    attrs = header.get("attrs") or {}
    try:
        exc = cls(header["message"], **attrs)
    except TypeError:
        exc = cls(header["message"])
    raise exc


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        sock: socket.socket = self.request
        with self.server.owner._lock:
            self.server.owner._connections.add(sock)
        try:
            self._serve(sock)
        finally:
            with self.server.owner._lock:
                self.server.owner._connections.discard(sock)

    def _serve(self, sock: socket.socket) -> None:
        while True:
            try:
                header, _ = _recv_frame(sock)
            except (ConnectionError, OSError):
                return
            try:
                reply, payload = self.server.owner.dispatch(header)
            except LogstoreError as exc:
                reply, payload = _error_header(exc), b""
            _send_frame(sock, reply, payload)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: PartitionServer


class PartitionServer:
    """Serve fetch and OffsetsForLeaderEpoch for local Partitions over TCP (one thread per
    connection). Use `address` to reach it; `close()` stops it."""

    def __init__(self, partitions: Iterable[Partition] = (), host: str = "127.0.0.1", port: int = 0):
        self._partitions: dict[tuple[str, int], Partition] = {}
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()
        for partition in partitions:
            self.add(partition)
        self._server = _Server((host, port), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, name="partition-server", daemon=True)
        self._thread.start()

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) the server listens on."""
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def add(self, partition: Partition) -> None:
        """Serve `partition` (replacing one with the same topic-partition)."""
        self._partitions[(partition.topic, partition.partition)] = partition

    def dispatch(self, header: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        """Run one request on the local partition; the reply header and payload."""
        key = (header["topic"], header["partition"])
        partition = self._partitions.get(key)
        if partition is None:
            raise ReplicaNotAvailableError(f"{key[0]}-{key[1]} is not served here")
        op = header["op"]
        if op == "fetch":
            fields = {k: header[k] for k in FetchRequest.__dataclass_fields__}
            response = _serve_fetch(partition, FetchRequest(**fields))
            diverging = response.diverging_epoch
            return {
                "high_watermark": response.high_watermark,
                "log_start_offset": response.log_start_offset,
                "log_end_offset": response.log_end_offset,
                "diverging_epoch": list(diverging) if diverging is not None else None,
            }, response.records
        if op == "offsets_for_leader_epoch":
            answer = partition.offsets_for_leader_epoch(header["current_leader_epoch"], header["leader_epoch"])
            return {"leader_epoch": answer.leader_epoch, "end_offset": answer.end_offset}, b""
        raise ReplicaNotAvailableError(f"unknown operation {op!r}")

    def close(self) -> None:
        """Stop serving: close the listening socket and drop open connections (as a broker
        that goes down does)."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
        with self._lock:
            connections = list(self._connections)
        for sock in connections:
            with contextlib.suppress(OSError):  # already closed by the peer
                sock.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> PartitionServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TcpTransport:
    """A Transport over TCP to PartitionServers, one kept-open connection per leader.
    `addresses` maps replica id -> (host, port)."""

    def __init__(self, addresses: Mapping[int, tuple[str, int]], *, timeout_s: float = 10.0):
        self.addresses = dict(addresses)
        self.timeout_s = timeout_s
        self._sockets: dict[int, socket.socket] = {}
        self._lock = threading.Lock()

    def _call(self, leader_id: int, header: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        with self._lock:
            try:
                sock = self._sockets.get(leader_id)
                if sock is None:
                    address = self.addresses.get(leader_id)
                    if address is None:
                        raise ReplicaNotAvailableError(f"no address for replica {leader_id}")
                    sock = socket.create_connection(address, timeout=self.timeout_s)
                    self._sockets[leader_id] = sock
                _send_frame(sock, header)
                reply, payload = _recv_frame(sock)
            except (ConnectionError, OSError) as exc:
                self._drop(leader_id)
                raise ReplicaNotAvailableError(f"replica {leader_id} unreachable: {exc}") from exc
        if "error" in reply:
            _raise_error(reply)
        return reply, payload

    def _drop(self, leader_id: int) -> None:
        sock = self._sockets.pop(leader_id, None)
        if sock is not None:
            sock.close()

    def fetch(self, leader_id: int, request: FetchRequest) -> FetchResponse:
        """Send a fetch frame; the records travel as the raw payload."""
        header = {"op": "fetch", **{k: getattr(request, k) for k in FetchRequest.__dataclass_fields__}}
        reply, payload = self._call(leader_id, header)
        diverging = reply["diverging_epoch"]
        return FetchResponse(payload, reply["high_watermark"], reply["log_start_offset"], reply["log_end_offset"],
                             EpochEndOffset(*diverging) if diverging is not None else None)

    def offsets_for_leader_epoch(self, leader_id: int, topic: str, partition: int,
                                 current_leader_epoch: int, leader_epoch: int) -> EpochEndOffset:
        """Send an OffsetsForLeaderEpoch frame."""
        reply, _ = self._call(leader_id, {"op": "offsets_for_leader_epoch", "topic": topic, "partition": partition,
                                          "current_leader_epoch": current_leader_epoch, "leader_epoch": leader_epoch})
        return EpochEndOffset(reply["leader_epoch"], reply["end_offset"])

    def close(self) -> None:
        """Close every connection."""
        with self._lock:
            for leader_id in list(self._sockets):
                self._drop(leader_id)

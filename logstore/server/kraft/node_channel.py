"""A broker's connection to another node, the active controller or a partition's leader
(Kafka's NodeToControllerChannelManager and fetcher connections, reduced): Kafka requests sent one
at a time over one TCP connection, reopened after a failure."""

from __future__ import annotations

import asyncio
import re
import struct

from logstore.server.protocol import ApiMessage

_SIZE = struct.Struct(">i")
# The client ids nodes send with: broker-<id> (registration, heartbeats, metadata fetches),
# broker-<id>-<purpose> (forwarding, AlterPartition), replica-fetcher-<id> (replica fetches).
_NODE_CLIENT_ID = re.compile(r"(?:broker|replica-fetcher)-(\d+)(?:-[a-z-]+)?")


def sender_node(client_id: str | None) -> int | None:
    """The node that sent a request with `client_id` over a NodeChannel; None for a client."""
    match = _NODE_CLIENT_ID.fullmatch(client_id or "")
    return None if match is None else int(match.group(1))


class NodeUnreachableError(ConnectionError):
    """The node did not answer (refused, closed, or a response that does not decode)."""


class NodeChannel:
    """Requests to the node at (`host`, `port`), as client `client_id`."""

    def __init__(self, host: str, port: int, client_id: str):
        self.host, self.port = host, port
        self._client_id = client_id
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._correlation = 0
        self._lock = asyncio.Lock()

    async def send(self, request: ApiMessage, version: int, response_class: type[ApiMessage]) -> ApiMessage:
        """Send `request` at `version` and return its response, decoded as `response_class`;
        NodeUnreachableError when the connection fails (the next send reconnects)."""
        async with self._lock:
            self._correlation += 1
            request.with_header(correlation_id=self._correlation, client_id=self._client_id)
            frame_out = request.encode(version=version, header=True, framed=True)
            try:
                reader, writer = await self._connect()
                writer.write(frame_out)
                await writer.drain()
                (size,) = _SIZE.unpack(await reader.readexactly(_SIZE.size))
                frame = await reader.readexactly(size)
                return response_class.decode(frame, version=version, header=True)
            except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                await self.close()
                raise NodeUnreachableError(f"node {self.host}:{self.port}: {exc!r}") from exc

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._streams is None:
            self._streams = await asyncio.open_connection(self.host, self.port)
        return self._streams

    async def close(self) -> None:
        """Close the connection, if open."""
        streams, self._streams = self._streams, None
        if streams is not None:
            streams[1].close()

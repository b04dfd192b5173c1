"""One client connection: size-prefixed frames in, one request handled at a time (Kafka mutes
a channel while its request is processed), responses out. Bounds every allocation a client
can cause: a frame larger than `socket.request.max.bytes` closes the connection before any
byte of it is read, and frames wait for room in the server-wide in-flight budget."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from logstore.server.protocol import (
    API_VERSIONS_KEY,
    ProtocolError,
    Request,
    UnsupportedVersion,
    decode_request,
    encode_response,
    unsupported_version_response,
)

log = logging.getLogger("logstore.server")
Handler = Callable[[Request], Awaitable[Any]]
MIN_REQUEST_BYTES = 8  # api key, version and correlation id


class InFlightBudget:
    """Bytes of requests read but not yet answered, across all connections
    (Kafka's queued.max.request.bytes memory pool)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0
        self._cond = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def reserve(self, size: int) -> AsyncIterator[None]:
        """Hold `size` bytes; waits while they do not fit (a request alone may use it all)."""
        async with self._cond:
            await self._cond.wait_for(lambda: self.used == 0 or self.used + size <= self.limit)
            self.used += size
        try:
            yield
        finally:
            async with self._cond:
                self.used -= size
                self._cond.notify_all()


class Connection:
    """Serves one socket until the client leaves, sends a bad frame or the server stops."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                 handlers: dict[int, Handler], max_request_bytes: int, budget: InFlightBudget):
        self._reader = reader
        self._writer = writer
        self._handlers = handlers
        self._max = max_request_bytes
        self._budget = budget

    async def serve(self) -> None:
        """Read, handle and answer requests in order; close on any protocol violation."""
        try:
            while True:
                size = int.from_bytes(await self._reader.readexactly(4), "big", signed=True)
                if not MIN_REQUEST_BYTES <= size <= self._max:
                    log.info("closing connection: request size %d outside [%d, %d]", size,
                             MIN_REQUEST_BYTES, self._max)
                    return
                async with self._budget.reserve(size):
                    frame = await self._reader.readexactly(size)
                    answer = await self._handle(frame)
                    del frame
                if answer is False:
                    return
                if answer:
                    self._writer.write(answer)
                    await self._writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._writer.close()
            with contextlib.suppress(Exception):
                await self._writer.wait_closed()

    async def _handle(self, frame: bytes) -> bytes | bool | None:
        """The response bytes, None when no response is due (acks=0), False to close."""
        try:
            request = decode_request(frame, self._handlers)
        except UnsupportedVersion as exc:
            if exc.api_key == API_VERSIONS_KEY:
                return unsupported_version_response(exc, self._handlers)
            log.info("closing connection: %s", exc)
            return False
        except ProtocolError as exc:
            log.info("closing connection: %s", exc)
            return False
        try:
            response = await self._handlers[request.api_key](request)
        except Exception:
            log.exception("closing connection: api %d v%d failed", request.api_key, request.version)
            return False
        return None if response is None else encode_response(request, response)

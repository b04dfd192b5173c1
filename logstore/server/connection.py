"""One client connection: size-prefixed frames in, one request handled at a time (Kafka mutes
a channel while its request is processed), responses out. Frames are received straight into
their own buffers (a BufferedProtocol), not through asyncio's stream buffer.

Bounds every allocation a client can cause: a frame larger than `socket.request.max.bytes`
closes the connection before any byte of it is read, and frames wait for room in the
server-wide in-flight budget before their buffer is allocated."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import numpy

from logstore.errors import FileSliceTruncatedError
from logstore.file_slice import FileSlice
from logstore.server import error_versions
from logstore.server.control_hooks import ControlHooks
from logstore.server.protocol import (
    API_VERSIONS_KEY,
    ApiSpec,
    Buffer,
    Piece,
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
READ_AHEAD_BYTES = 16384  # a connection's bytes read before a request asks for them, at most
_NO_TARGET = memoryview(b"")  # no buffer waits for bytes: they go to the read-ahead buffer


def frame_buffer(size: int) -> memoryview:
    """Room for a frame of `size` bytes, not zero-filled: the socket overwrites all of it, and
    zero-filling a bytearray for each 1 MB Produce request took 5% of the event loop's time."""
    return memoryview(numpy.empty(size, numpy.uint8))


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


class FrameProtocol(asyncio.BufferedProtocol):
    """Socket bytes go straight into the buffer the connection asks for (a size field, then
    a frame of that size): no stream-buffer copies. Bytes that arrive while no buffer waits
    for them (the next request, sent while this one is handled) are read once, up to
    READ_AHEAD_BYTES, and reading pauses until they are taken: the next size field and a small
    request come from there, without a pause and resume of the socket for each."""

    def __init__(self, on_connect: Callable[[FrameProtocol], None]) -> None:
        self._on_connect = on_connect
        self.transport: asyncio.Transport | None = None
        self._target = _NO_TARGET
        self._filled = 0
        self._ahead: memoryview | None = None  # allocated on the first read ahead
        self._ahead_start = self._ahead_end = 0  # its bytes not yet taken
        self._waiter: asyncio.Future | None = None
        self._lost: BaseException | None = None
        self._writable = asyncio.Event()
        self._writable.set()
        self._sendfile = True  # until the transport shows it cannot

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        transport.pause_reading()
        self._on_connect(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._filled < len(self._target):
            return self._target[self._filled:]
        if self._ahead is None:
            self._ahead = memoryview(bytearray(READ_AHEAD_BYTES))
        return self._ahead  # empty whenever reading is on: taking its last byte resumes reading

    def buffer_updated(self, nbytes: int) -> None:
        if self._filled == len(self._target):  # get_buffer, just before, handed out the read-ahead
            self._ahead_start, self._ahead_end = 0, nbytes
            self.transport.pause_reading()  # until the connection takes them
            return
        self._filled += nbytes
        if self._filled == len(self._target):
            self._target, self._filled = _NO_TARGET, 0  # the buffer is the connection's now
            if self._waiter is not None and not self._waiter.done():
                self._waiter.set_result(None)

    def eof_received(self) -> bool:
        self._fail(ConnectionError("the client closed the connection"))
        return False

    def connection_lost(self, exc: BaseException | None) -> None:
        self._fail(exc or ConnectionError("connection closed"))
        self._writable.set()

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    def _fail(self, exc: BaseException) -> None:
        self._lost = exc
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(ConnectionError(str(exc)))

    async def read_into(self, buffer: bytearray | memoryview) -> None:
        """Fill `buffer` from the bytes read ahead, then the socket; ConnectionError if the
        connection ends first."""
        target, filled = memoryview(buffer), 0
        if self._ahead_end:
            filled = min(len(target), self._ahead_end - self._ahead_start)
            target[:filled] = self._ahead[self._ahead_start:self._ahead_start + filled]
            self._ahead_start += filled
            if self._ahead_start < self._ahead_end:
                return  # all of it was read ahead; reading stays paused for the rest
            self._ahead_start = self._ahead_end = 0
            if filled == len(target):
                self.transport.resume_reading()
                return
        if self._lost is not None:
            raise ConnectionError(str(self._lost))
        self._target, self._filled = target, filled
        self._waiter = asyncio.get_running_loop().create_future()
        self.transport.resume_reading()
        await self._waiter

    async def write(self, pieces: list[Piece]) -> None:
        """Send `pieces` in order, waiting while the transport's write buffer is full; FileSlices
        go from their file with sendfile (copied where the transport cannot) and are closed."""
        try:
            if self._lost is not None:
                raise ConnectionError(str(self._lost))
            for piece in pieces:
                if isinstance(piece, FileSlice):
                    await self._send_file(piece)
                else:
                    self.transport.write(piece)
            await self._writable.wait()
        finally:
            for piece in pieces:
                if isinstance(piece, FileSlice):
                    piece.close()

    async def _send_file(self, piece: FileSlice) -> None:
        """`piece` from its file to the socket with loop.sendfile; a transport that cannot
        (TLS, or no os.sendfile) gets its bytes copied, and every later piece too."""
        if self._sendfile:
            if self.transport.is_closing():
                raise ConnectionError("connection closed")
            try:
                sent = await asyncio.get_running_loop().sendfile(self.transport, piece, piece.position, piece.size,
                                                                 fallback=False)
            except RuntimeError as exc:  # SendfileNotAvailableError included: nothing was sent
                if self._lost is not None or self.transport.is_closing():  # the client left meanwhile
                    raise ConnectionError("connection closed") from exc
                log.info("sendfile is not available on this connection, fetched records are copied: %s", exc)
                self._sendfile = False
            else:
                if sent == piece.size:
                    return
                raise self._truncated(f"{piece} was truncated to {sent} bytes during the send")
        try:
            self.transport.write(piece.read())
        except FileSliceTruncatedError as exc:
            raise self._truncated(str(exc)) from exc

    def _truncated(self, reason: str) -> ConnectionError:
        """The segment was cut under a send: the response's framing promised more bytes, so the
        connection must close (the client fetches again)."""
        log.warning("closing a connection: %s", reason)
        return ConnectionError(reason)


class Connection:
    """Serves one socket until the client leaves, sends a bad frame or the server stops."""

    def __init__(self, protocol: FrameProtocol, *, apis: Mapping[int, ApiSpec], handlers: Mapping[int, Handler],
                 max_request_bytes: int, budget: InFlightBudget, hooks: ControlHooks | None = None):
        self._protocol = protocol
        self._apis = apis
        self._handlers = handlers
        self._max = max_request_bytes
        self._budget = budget
        self._hooks = hooks  # the node's ControlHooks (fault injection): they call the handlers

    async def serve(self) -> None:
        """Read, handle and answer requests in order; close on any protocol violation."""
        size_field = bytearray(4)
        try:
            while True:
                await self._protocol.read_into(size_field)
                size = int.from_bytes(size_field, "big", signed=True)
                if not MIN_REQUEST_BYTES <= size <= self._max:
                    # a TLS client on a plaintext port shows as a huge size: 0x16030100 and alike
                    self._closing(f"request size {size} outside [{MIN_REQUEST_BYTES}, {self._max}]")
                    return
                answer = await self._serve_one(size)
                if answer is False:
                    return
                if answer:
                    await self._protocol.write(answer)
        except ConnectionError:
            pass
        finally:
            self._protocol.transport.close()

    def _peer(self) -> str:
        """The client's address as host:port."""
        peer = self._protocol.transport.get_extra_info("peername")
        return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)

    def _closing(self, reason: str) -> None:
        """Log at WARN, naming the client, why its connection is closed (as Kafka's SocketServer
        does: how a TLS/plaintext mix-up or a client speaking another protocol shows)."""
        log.warning("closing connection from %s: %s", self._peer(), reason)

    async def _serve_one(self, size: int) -> list[Piece] | bool | None:
        """Read, decode and handle one request of `size` bytes: the response's buffers, None
        when no response is due (acks=0), False to close.

        Its bytes count against the in-flight budget until decoded, or until handled when its
        body holds views of them (Produce): a long poll waiting for data holds none, as Kafka
        frees a request's buffer once its API has taken it."""
        async with self._budget.reserve(size):
            frame = frame_buffer(size)
            await self._protocol.read_into(frame)
            request = self._decode(frame)
            del frame  # a Produce body's views keep it alive; nothing else does
            if not isinstance(request, Request):
                return request
            if request.spec.request_views:
                return await self._handle(request)
        return await self._handle(request)

    def _decode(self, frame: memoryview) -> Request | list[Buffer] | bool:
        """The request, or the answer to a frame that is not one (False: close)."""
        try:
            return decode_request(frame, self._apis)
        except UnsupportedVersion as exc:
            if exc.api_key == API_VERSIONS_KEY:
                return [unsupported_version_response(exc, self._apis)]
            self._closing(str(exc))
            return False
        except ProtocolError as exc:
            self._closing(str(exc))
            return False

    async def _handle(self, request: Request) -> list[Piece] | bool | None:
        try:
            handler = self._handlers[request.api_key]
            response = await (handler(request) if self._hooks is None else self._hooks.handle(request, handler))
            if response is False:
                return False
        except Exception:
            log.exception("closing connection from %s: api %d v%d failed", self._peer(), request.api_key,
                          request.version)
            return False
        if response is None:
            return None
        return encode_response(request, error_versions.for_version(request.api_key, request.version, response))

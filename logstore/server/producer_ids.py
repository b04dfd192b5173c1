"""Producer ids: on a single node handed out above every id any log of the node has seen, so a
restarted node never gives a new producer the id of one whose sequences the logs still remember.
In a cluster they come from blocks the active controller allocates (AllocateProducerIds), as
Kafka's brokers take theirs, so two brokers never give two producers one id (and no log is read:
the controller never hands out an id twice, and ids of other brokers' blocks say nothing of this one's)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor

from logstore.errors import LogstoreError, ProducerIdsUnavailableError
from logstore.manager import LogManager
from logstore.server.disk_calls import on_disk

log = logging.getLogger("logstore.server")
PREFETCH_FRACTION = 0.1  # the next block is asked for once this much of the current one is left, as Kafka does


class ProducerIdManager:
    """Allocates producer ids: on a single node (`standalone`) above the largest id in any log's
    producer state, read once `ready()` is awaited (on the `disk` executor, as it opens the logs
    not opened yet, rather than at start); in a cluster from the controller's blocks alone."""

    def __init__(self, manager: LogManager, disk: Executor, *, standalone: bool = True):
        self._manager = manager
        self._disk = disk
        self._standalone = standalone
        self._next = 0
        self._logs_seen = False
        self._reading: asyncio.Task | None = None
        self._blocks: Callable[[], Awaitable[range]] | None = None
        self._block = range(0)  # the ids left in the current block
        self._block_size = 0
        self._prefetched: range | None = None
        self._fetching: asyncio.Task | None = None

    def fetch_blocks_from(self, blocks: Callable[[], Awaitable[range]]) -> None:
        """Hand out ids only from the blocks `blocks()` returns (the controller's); the first
        is asked for now. Call on the server's event loop."""
        self._blocks = blocks
        self._prefetch()

    def observe(self, producer_id: int) -> None:
        """On a single node: never hand out `producer_id` or below (an id found in the
        transaction log). In a cluster the controller's blocks already keep ids apart."""
        self._next = max(self._next, producer_id + 1)

    async def ready(self) -> None:
        """Before `allocate` on a single node: read the largest producer id of every log, once,
        on the disk executor (never on the event loop: at 10,000 partitions that takes seconds)."""
        if self._standalone and not self._logs_seen:
            await asyncio.shield(self._start_reading())

    def _start_reading(self) -> asyncio.Task:
        if self._reading is None:
            self._reading = asyncio.get_running_loop().create_task(self._read_logs())
        return self._reading

    async def _read_logs(self) -> None:
        try:
            seen = await on_disk(self._disk, self._largest_in_logs)
        except (LogstoreError, OSError) as exc:  # allocate refuses meanwhile; its next call reads again
            log.warning("reading the logs' producer ids failed: %s", exc)
            self._reading = None
            return
        self.observe(seen)
        self._logs_seen = True

    def _largest_in_logs(self) -> int:
        return max((pid for log_ in self._manager.logs() for pid in log_.producer_state.producers), default=-1)

    def allocate(self) -> int:
        """A producer id no producer of this node (of the cluster, with blocks) has used.
        Raises ProducerIdsUnavailableError until the logs are read (single node: the read starts
        now, if `ready()` has not started it), or while a cluster's broker waits for its next block.
        Call on the server's event loop."""
        if self._standalone:
            if not self._logs_seen:
                self._start_reading()
                raise ProducerIdsUnavailableError("no producer id until the logs' producer ids are read")
            producer_id = self._next
            self._next += 1
            return producer_id
        if not self._block and self._prefetched is not None:
            self._block, self._prefetched = self._prefetched, None
            self._block_size = len(self._block)
        if not self._block:
            self._prefetch()
            raise ProducerIdsUnavailableError("no producer id until the controller's next block arrives")
        producer_id, self._block = self._block[0], self._block[1:]
        if len(self._block) < PREFETCH_FRACTION * self._block_size:
            self._prefetch()
        return producer_id

    def _prefetch(self) -> None:
        if self._blocks is None:  # the blocks come once the node has joined its cluster
            return
        if self._prefetched is not None or (self._fetching is not None and not self._fetching.done()):
            return
        self._fetching = asyncio.get_running_loop().create_task(self._fetch())

    async def _fetch(self) -> None:
        try:
            self._prefetched = await self._blocks()
        except (ConnectionError, ProducerIdsUnavailableError) as exc:  # asked again on the next allocate
            log.info("no block of producer ids from the controller: %s", exc)

    async def close(self) -> None:
        """Stop asking for a block, or reading the logs."""
        for task in (self._fetching, self._reading):
            if task is not None:
                task.cancel()

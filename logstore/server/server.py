"""KafkaServer: one Kafka node over a data directory, on asyncio. Real Kafka clients produce,
fetch, join groups and run transactions against it; the directory stays Kafka's format."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any

from logstore.clean_shutdown import NO_BROKER_EPOCH
from logstore.clock import Clock, SystemClock
from logstore.manager import LogManager
from logstore.policies import CleanerFactory, RetentionPass
from logstore.server.admin_api import AdminApi
from logstore.server.apis import APIS, bind
from logstore.server.broker_config import BrokerConfig
from logstore.server.connection import Connection, FrameProtocol, Handler, InFlightBudget
from logstore.server.consumer_group_api import ConsumerGroupApi
from logstore.server.context import ServerContext
from logstore.server.control_hooks import ControlHooks
from logstore.server.data_api import DataApi
from logstore.server.describe_api import DescribeApi
from logstore.server.group_api import GroupApi
from logstore.server.group_coordinator import GroupCoordinator
from logstore.server.kraft.cluster_node import ClusterNode
from logstore.server.meta_properties import load_or_create
from logstore.server.offset_delete_api import OffsetDeleteApi
from logstore.server.producer_ids import ProducerIdManager
from logstore.server.topics import Topics, reserve_descriptors
from logstore.server.transaction_api import TransactionApi
from logstore.server.transactions import TransactionCoordinator
from logstore.server.txn_describe_api import TxnDescribeApi
from logstore.server.txn_markers import TxnMarkerApi

UNLIMITED_QUEUE_BYTES = 2**62


class KafkaServer:
    """A single-node Kafka broker serving `data_dir`.

    `config` is a BrokerConfig, a mapping of Kafka broker keys, or a `server.properties` path.
    `cleaner` (compaction.LogCleaner) and `retention` (retention.apply_retention) are handed to
    the LogManager; without them nothing is cleaned or deleted by age or size. `cluster_id` is the
    one a new data directory is formatted with (every node of a cluster needs the same). `hooks`
    (ControlHooks) answer or hold requests before their handlers, for fault-injection tests.
    Use as a context manager, or call start() and stop(); `port` is the bound port.
    """

    def __init__(self, data_dir: str | os.PathLike[str], *, host: str = "127.0.0.1", port: int = 9092,
                 config: BrokerConfig | Mapping[str, Any] | str | os.PathLike[str] | None = None,
                 cleaner: CleanerFactory | None = None, retention: RetentionPass | None = None,
                 clock: Clock | None = None, advertised_host: str | None = None, cluster_id: str | None = None,
                 hooks: ControlHooks | None = None):
        self.data_dir = Path(data_dir)
        if isinstance(config, BrokerConfig):
            self.config = config
        elif isinstance(config, Mapping):
            self.config = BrokerConfig.load(None, config)
        else:
            self.config = BrokerConfig.load(config)
        self._host = host
        self._requested_port = port
        self._advertised_host = advertised_host or ("127.0.0.1" if host in ("", "0.0.0.0", "::") else host)
        self._cleaner = cleaner
        self._retention = retention
        self._clock = clock or SystemClock()
        self._cluster_id = cluster_id
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.AbstractServer | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._connections: set[asyncio.Task] = set()
        self.manager: LogManager | None = None
        self.context: ServerContext | None = None
        self._topics: Topics | None = None
        self.port: int | None = None
        self._groups: GroupCoordinator | None = None
        self._txns: TransactionCoordinator | None = None
        self._producer_ids: ProducerIdManager | None = None
        self.cluster: ClusterNode | None = None  # the KRaft roles, when process.roles is set
        self.hooks = hooks or ControlHooks(self.config.node_id)  # fault injection: per-API hooks, cut links
        self._killed = False

    # ------------------------------------------------------------------ life cycle

    def start(self) -> KafkaServer:
        """Open the data directory and serve on a background thread; returns once listening.

        Raises what opening failed with (LogLockedError, InvalidConfigError, OSError).
        """
        if self._thread is not None:
            return self
        self._ready.clear()
        self._killed = False
        self._thread = threading.Thread(target=self._run, name="logstore-kafka-server", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self._thread.join()
            self._thread = None
            error, self._error = self._error, None
            raise error
        return self

    def stop(self) -> None:
        """Close the listener and every connection, then the logs (clean shutdown). Idempotent."""
        self._end(self._shutdown)

    def kill(self) -> None:
        """Stop as a killed process stops, for fault-injection tests: the listeners and every
        connection close, but no log is flushed, checkpointed or marked clean, and the controller
        is not told (it fences this broker when its session runs out). Idempotent."""
        self._end(self._crash)

    def _end(self, how: Callable[[], Coroutine[Any, Any, None]]) -> None:
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return
        try:
            with contextlib.suppress(RuntimeError):  # the loop had already stopped
                asyncio.run_coroutine_threadsafe(how(), loop).result()
        finally:  # a failed step still ends the loop, so its thread closes the logs and frees the directory lock
            with contextlib.suppress(RuntimeError):  # closed already
                loop.call_soon_threadsafe(loop.stop)
            thread.join()
            self._thread = None

    def __enter__(self) -> KafkaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def check_timers(self) -> None:
        """Check the coordinators' timers at once, on the server's thread (a background task
        checks them every half second): what a driven ManualClock has made due, a session
        timeout, an offset's retention or (in a cluster) a broker's session, happens before this
        returns."""
        loop = self._loop
        if self._thread is None or loop is None:
            raise RuntimeError("the server is not running")
        asyncio.run_coroutine_threadsafe(self._check_timers(), loop).result()

    def move_leader(self, topic: str, partition: int, to_node: int) -> int:
        """On the active controller's node: move the partition's leadership to `to_node`, a live
        in-sync replica; returns the new leader epoch (`ClusterNode.move_leader`)."""
        loop = self._loop
        if self._thread is None or loop is None or self.cluster is None:
            raise RuntimeError("the server is not a running cluster node")
        return asyncio.run_coroutine_threadsafe(self.cluster.move_leader(topic, partition, to_node), loop).result()

    async def _check_timers(self) -> None:
        if self.cluster is not None:
            await self.cluster.check_timers()
        self._groups.check_timers()
        self._txns.check_timers()

    @property
    def bootstrap_servers(self) -> str:
        """`host:port` for a client's bootstrap.servers."""
        return f"{self._advertised_host}:{self.port}"

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._open())
        except BaseException as exc:
            self._error = exc
            self._release(loop)
            self._ready.set()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            self._release(loop)

    def _release(self, loop: asyncio.AbstractEventLoop) -> None:
        """Once the loop has stopped, free what the node holds even when a step of its opening or
        shutdown failed: the listener's port, the loop, the logs and the directory lock."""
        try:
            if self._server is not None:  # still listening when the failed step came before its close
                self._server.close()
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
            self._close_manager()

    def _close_manager(self) -> None:
        try:
            if self.context is not None:  # an append or read cancelled with its connection ends first
                self.context.disk.shutdown(wait=True)
            if self._topics is not None:
                self._topics.close()  # its background writes end before the logs close
        finally:
            self._close_logs()

    def _close_logs(self) -> None:
        if self.manager is not None:
            if self._killed:
                self.manager.abandon()
            else:  # a cluster broker's marker names its registration (KIP-966)
                lifecycle = None if self.cluster is None else self.cluster.lifecycle
                self.manager.close(NO_BROKER_EPOCH if lifecycle is None else lifecycle.broker_epoch)

    async def _open(self) -> None:
        config = self.config
        reserve_descriptors()  # before the first segment opens
        self.manager = LogManager(self.data_dir, config.log_defaults, clock=self._clock,
                                  cleaner=self._cleaner, retention=self._retention)
        meta = load_or_create(self.data_dir, config.node_id, self._cluster_id)
        topics = self._topics = Topics(self.manager, hosts_all=config.quorum is None)
        ctx = ServerContext(config, meta, self.manager, topics, self._clock, host=self._advertised_host)
        handlers = self._build_handlers(ctx)
        ctx.implemented = APIS
        self.context = ctx
        limit = config.queued_max_request_bytes
        budget = InFlightBudget(UNLIMITED_QUEUE_BYTES if limit <= 0 else limit)

        loop = asyncio.get_running_loop()

        def serve(protocol: FrameProtocol) -> None:
            connection = Connection(protocol, apis=APIS, handlers=handlers,
                                    max_request_bytes=config.socket_request_max_bytes, budget=budget,
                                    hooks=self.hooks)
            task = loop.create_task(connection.serve())
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)

        self._server = await loop.create_server(lambda: FrameProtocol(serve), self._host, self._requested_port)
        self.port = self._server.sockets[0].getsockname()[1]
        ctx.port = self.port
        if config.quorum is not None:
            self.cluster = ClusterNode(config, self.data_dir, meta, self._clock, hooks=self.hooks)
            self.cluster.metadata_listeners.append(self._follow_coordinator_leaders)
            await self.cluster.open(ctx)
            if self.cluster.producer_id_blocks is not None:
                self._producer_ids.fetch_blocks_from(self.cluster.producer_id_blocks)
        self._groups.start()
        self._txns.start()
        self.manager.start()

    def _follow_coordinator_leaders(self) -> None:
        """In a cluster: the coordinators load the __consumer_offsets and __transaction_state
        partitions this node has become the leader of and unload those it no longer leads;
        a broker whose current registration the metadata does not show unfenced yet (a restart
        replaying the metadata it had) coordinates none."""
        if self.context is None or self.context.cluster is None:
            return
        image, lifecycle, node_id = self.context.cluster.image, self.cluster.lifecycle, self.context.node_id
        info = image.brokers.get(node_id)
        current = lifecycle is not None and info is not None and info.broker_epoch == lifecycle.broker_epoch \
            and not image.registry.is_fenced(node_id)
        self._groups.coordinated.follow_metadata(current)
        self._txns.coordinated.follow_metadata(current)

    def _build_handlers(self, ctx: ServerContext) -> dict[int, Handler]:
        self._groups = GroupCoordinator(ctx)
        self._producer_ids = ProducerIdManager(ctx.manager, ctx.disk, standalone=ctx.config.quorum is None)
        self._txns = TransactionCoordinator(ctx, self._groups, self._producer_ids)
        return bind(APIS, (AdminApi(ctx), DataApi(ctx), GroupApi(ctx, self._groups, self._txns.coordinated),
                           TransactionApi(self._txns, self._groups, self._producer_ids), DescribeApi(ctx), OffsetDeleteApi(ctx, self._groups),
                           TxnDescribeApi(ctx, self._txns), ConsumerGroupApi(ctx, self._groups),
                           TxnMarkerApi(ctx, self._groups)))

    async def _shutdown(self) -> None:
        if self._producer_ids is not None:
            await self._producer_ids.close()
        if self.cluster is not None:
            await self.cluster.close()
        if self._groups is not None:
            self._groups.close()
        if self._txns is not None:
            await self._txns.close()
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
        asyncio.get_running_loop().stop()

    async def _crash(self) -> None:
        """What a kill leaves: listeners and connections closed, every task stopped where it
        was, nothing written on the way out (the logs are abandoned after the loop stops)."""
        self._killed = True
        if self.cluster is not None:
            await self.cluster.close(controlled=False)
        if self._txns is not None:  # its connections to the leaders it sent markers to
            await self._txns.close()
        if self._server is not None:
            self._server.close()
        current = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        asyncio.get_running_loop().stop()

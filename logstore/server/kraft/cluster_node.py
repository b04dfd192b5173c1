"""The KRaft side of a `logstore serve` node, by its `process.roles`: the active controller
and the controller listener it answers on (controller), and the broker's registration,
heartbeats, metadata and replica fetching (broker). KafkaServer opens it after its own listener, closes it first."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

from logstore.clock import Clock
from logstore.errors import InvalidReplicationError
from logstore.kafka_uuid import parse_kafka_uuid
from logstore.meta_properties import MetaProperties
from logstore.server.apis import bind
from logstore.server.broker_config import BrokerConfig
from logstore.server.connection import Connection, FrameProtocol, InFlightBudget
from logstore.server.context import ServerContext
from logstore.server.control_hooks import ControlHooks
from logstore.server.kraft.broker_lifecycle import BrokerLifecycle
from logstore.server.kraft.cluster_view import ClusterView
from logstore.server.kraft.controller_api import CONTROLLER_APIS, ControllerApi
from logstore.server.kraft.isr_tracker import IsrTracker
from logstore.server.kraft.metadata_image import MetadataImage
from logstore.server.kraft.metadata_log import MetadataLog
from logstore.server.kraft.producer_id_blocks import ProducerIdBlocks
from logstore.server.kraft.quorum_config import PLAINTEXT, Endpoint
from logstore.server.kraft.quorum_controller import QuorumController
from logstore.server.kraft.replica_fetcher import ReplicaFetcher

CONTROLLER_BUDGET_BYTES = 64 * 1024 * 1024
REGISTRATION_TIMEOUT_S = 60  # initial.broker.registration.timeout.ms
SESSION_CHECK_S = 0.5  # how often the controller looks for expired broker sessions
ISR_CHECK_S = 0.5  # how often a leader looks for followers past replica.lag.time.max.ms


class ClusterNode:
    """The controller and/or broker roles of the node `config.quorum` describes."""

    def __init__(self, config: BrokerConfig, data_dir: Path, meta: MetaProperties, clock: Clock, *,
                 hooks: ControlHooks | None = None):
        if config.quorum is None:
            raise ValueError("a ClusterNode needs process.roles")
        self.config = config
        self.quorum = config.quorum
        self._data_dir = data_dir
        self._meta = meta
        self._clock = clock
        self._hooks = hooks  # the node's ControlHooks, asked about the controller listener's requests too
        self.controller: QuorumController | None = None
        self.lifecycle: BrokerLifecycle | None = None
        self.view: ClusterView | None = None
        self.fetcher: ReplicaFetcher | None = None
        self.isr: IsrTracker | None = None
        self.producer_id_blocks: ProducerIdBlocks | None = None  # a broker's: the controller allocates them
        self.controller_port: int | None = None
        self._api: ControllerApi | None = None
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.Task] = set()
        self._local_log: MetadataLog | None = None
        self._ctx: ServerContext | None = None
        self._fencing: asyncio.Task | None = None
        self._isr_checks: asyncio.Task | None = None
        # called after each metadata change, the partitions opened: the coordinators follow their leaders
        self.metadata_listeners: list[Callable[[], None]] = []

    async def open(self, ctx: ServerContext) -> None:
        """Start the roles; a broker returns once the controller has unfenced it (TimeoutError
        after initial.broker.registration.timeout.ms)."""
        self._ctx = ctx
        try:
            if self.quorum.is_controller:
                await self._open_controller()
            if self.quorum.is_broker:
                await self._open_broker(ctx)
        except BaseException:
            await self.close()
            raise

    async def _open_controller(self) -> None:
        quorum = self.quorum
        self.controller = QuorumController(self._data_dir, self._meta.node_id, self._meta.cluster_id, self._clock,
                                           session_timeout_ms=quorum.session_timeout_ms,
                                           snapshot_record_bytes=quorum.snapshot_record_bytes,
                                           topic_defaults=self.config.log_defaults)
        self.controller.start()
        self._api = ControllerApi(self.controller, self.config.num_partitions, on_change=self._metadata_changed)
        handlers = bind(CONTROLLER_APIS, [self._api])
        budget = InFlightBudget(CONTROLLER_BUDGET_BYTES)
        loop = asyncio.get_running_loop()

        def serve(protocol: FrameProtocol) -> None:
            connection = Connection(protocol, apis=CONTROLLER_APIS, handlers=handlers,
                                    max_request_bytes=self.config.socket_request_max_bytes, budget=budget,
                                    hooks=self._hooks)
            task = loop.create_task(connection.serve())
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)

        listener = quorum.controller_listener
        self._server = await loop.create_server(lambda: FrameProtocol(serve), listener.host, listener.port)
        self.controller_port = self._server.sockets[0].getsockname()[1]
        self._fencing = loop.create_task(self._fence_expired_sessions())
        if not quorum.is_broker:  # a controller-only node answers its clients' Metadata, hosts nothing
            self.view = ClusterView(self.controller.image, self._meta.node_id, PLAINTEXT,
                                    (self._ctx.host, self.controller_port),
                                    metadata_offset=lambda: self.controller.log.end_offset)
            self._ctx.cluster = self.view

    async def _fence_expired_sessions(self) -> None:
        """The controller's periodic task: fence brokers whose sessions ran out on the clock."""
        while True:
            await asyncio.sleep(SESSION_CHECK_S)
            if self.controller.check_sessions():
                self._api.changed()

    async def _open_broker(self, ctx: ServerContext) -> None:
        quorum, node_id = self.quorum, self._meta.node_id
        if self.controller is not None:  # a combined node: the controller's own image and log
            image, address = self.controller.image, (ctx.host, self.controller_port)
            offset = lambda: self.controller.log.end_offset  # noqa: E731
        else:
            image, address, offset = MetadataImage(), quorum.controller_address, None
            self._local_log = MetadataLog(self._data_dir, node_id, self._clock)
            self._local_log.replay_into(image)
        listener = quorum.broker_listeners[0].name
        self.isr = IsrTracker(node_id, image, ctx.manager.get, self._clock, address,
                              lambda: self.lifecycle.broker_epoch)
        self.view = ClusterView(image, node_id, listener, address, ctx.manager.get, ctx.data, self.isr,
                                metadata_offset=lambda: self.lifecycle.metadata_offset)
        ctx.cluster = self.view
        self.fetcher = ReplicaFetcher(node_id, image, ctx.manager.get, listener, ctx.disk,
                                      lambda: self.lifecycle.broker_epoch)
        self.lifecycle = BrokerLifecycle(
            node_id, self._meta.cluster_id, parse_kafka_uuid(self._meta.directory_id), address, [Endpoint(listener, ctx.host, ctx.port)],
            image, heartbeat_interval_ms=quorum.heartbeat_interval_ms, local_log=self._local_log, offset=offset,
            on_metadata=self._metadata_changed, previous_broker_epoch=ctx.manager.previous_broker_epoch)
        self.producer_id_blocks = ProducerIdBlocks(node_id, address, lambda: self.lifecycle.broker_epoch)
        self._metadata_changed()
        self.lifecycle.start()
        self._isr_checks = asyncio.get_running_loop().create_task(self._check_isr_periodically())
        await self.lifecycle.wait_unfenced(REGISTRATION_TIMEOUT_S)

    def _metadata_changed(self) -> None:
        if self.view is not None and self._ctx is not None:
            self.view.open_hosted_partitions(self._ctx.topics)
        if self.fetcher is not None:
            self.fetcher.update()
        for listener in self.metadata_listeners:
            listener()
        if self._ctx is not None:  # acks=all waits look again whether this node still leads
            self._ctx.data.notify()

    async def move_leader(self, topic: str, partition: int, to_node: int) -> int:
        """The active controller moves the partition's leadership to `to_node`, a live in-sync
        replica (`QuorumController.move_leader`), and wakes the brokers' metadata fetches;
        returns the new leader epoch. InvalidReplicationError on a node without the controller
        role, for an unknown partition or a replica that may not lead."""
        if self.controller is None:
            raise InvalidReplicationError(f"node {self._meta.node_id} is not the active controller")
        epoch = self.controller.move_leader(topic, partition, to_node)
        self._api.changed()
        return epoch

    async def check_timers(self) -> None:
        """Heartbeat now (broker role), then fence the brokers whose sessions ran out on the
        clock (controller role): what a driven clock has made due happens before this returns."""
        if self.lifecycle is not None:
            await self.lifecycle.heartbeat()
        if self.controller is not None and self.controller.check_sessions():
            self._api.changed()
        await self._check_isr()

    async def _check_isr(self) -> None:
        """The leader's ISR check (replica.lag.time.max.ms on the clock); wakes waiting fetches
        and acks=all produces when a high watermark moved."""
        if self.isr is not None and await self.isr.check():
            self._ctx.data.notify()

    async def _check_isr_periodically(self) -> None:
        while True:
            await asyncio.sleep(ISR_CHECK_S)
            await self._check_isr()

    async def close(self, *, controlled: bool = True) -> None:
        """Stop heartbeating, telling the controller (fenced at once), close the controller
        listener and the metadata logs. Not `controlled`, as a killed node stops: no word to the
        controller (its session runs out) and the metadata logs are left unflushed."""
        for task in (self._fencing, self._isr_checks):
            if task is not None:
                task.cancel()
        if self.fetcher is not None:
            await self.fetcher.close()
        if self.lifecycle is not None:
            await (self.lifecycle.close() if controlled else self.lifecycle.abandon())
        if self.isr is not None:
            await self.isr.close()
        if self.producer_id_blocks is not None:
            await self.producer_id_blocks.close()
        if self.view is not None:
            await self.view.close()
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
        for log in (self.controller.log if self.controller else None, self._local_log):
            if log is not None:
                (log.close if controlled else log.abandon)()

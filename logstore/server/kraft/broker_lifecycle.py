"""A broker's life in a KRaft cluster (Kafka's BrokerLifecycleManager and its metadata
fetcher, reduced): register with the active controller, learn the metadata by fetching
`__cluster_metadata` into the broker's own replica of it, and heartbeat; fenced until caught up.

A broker that shares its node with the controller reads the controller's image and log end
instead of fetching (`local_log=None`); it still registers and heartbeats over the wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Sequence

from logstore.clean_shutdown import NO_BROKER_EPOCH
from logstore.server import error_codes as ec
from logstore.server.kraft.controller_api import METADATA_TOPIC_ID
from logstore.server.kraft.metadata_image import MetadataImage
from logstore.server.kraft.metadata_log import MetadataLog
from logstore.server.kraft.metadata_records import SUPPORTED_FEATURES
from logstore.server.kraft.node_channel import NodeChannel, NodeUnreachableError
from logstore.server.kraft.quorum_config import Endpoint
from logstore.server.messages.controller_apis import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from logstore.server.protocol import consumer

log = logging.getLogger("logstore.server")
REGISTRATION_VERSION, HEARTBEAT_VERSION, FETCH_VERSION = 4, 1, 17
FETCH_MAX_WAIT_MS = 500
FETCH_MAX_BYTES = 8 * 1024 * 1024
RETRY_S = 0.05
CONTROLLED_SHUTDOWN_S = 10.0  # how long a stopping broker waits for the controller's shouldShutDown


class BrokerLifecycle:
    """Registration, heartbeats and metadata fetching of broker `node_id` of `cluster_id`.

    `image` is what fetched records are replayed into (the controller's own, on a combined node);
    `on_metadata` runs after each replay. `offset` gives the metadata offset reached when
    `local_log` is None.
    """

    def __init__(self, node_id: int, cluster_id: str, log_dir_id: uuid.UUID, controller: tuple[str, int],
                 endpoints: Sequence[Endpoint], image: MetadataImage, *, heartbeat_interval_ms: int,
                 local_log: MetadataLog | None = None, offset: Callable[[], int] | None = None,
                 on_metadata: Callable[[], None] = lambda: None, previous_broker_epoch: int = NO_BROKER_EPOCH):
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.incarnation_id = uuid.uuid4()
        self._log_dir_id = log_dir_id
        self._endpoints = list(endpoints)
        self.image = image
        self._local_log = local_log
        self._applied = local_log.end_offset if local_log is not None else 0  # replayed already
        self._offset = offset
        self._on_metadata = on_metadata
        self._interval_s = heartbeat_interval_ms / 1000
        client = f"broker-{node_id}"
        self._heartbeats = NodeChannel(*controller, client)
        self._fetches = NodeChannel(*controller, client)
        self.broker_epoch = NO_BROKER_EPOCH
        self._previous_broker_epoch = previous_broker_epoch  # what the last clean stop's marker named
        self.fenced = True
        self.unfenced = asyncio.Event()
        self._caught_up = asyncio.Event()
        self._tasks: list[asyncio.Task] = []

    @property
    def metadata_offset(self) -> int:
        """The offset up to which this broker has the metadata log and has acted on it."""
        return self._applied if self._local_log is not None else self._offset()

    def start(self) -> None:
        """Register, then keep fetching and heartbeating, on the running loop."""
        self._tasks.append(asyncio.get_running_loop().create_task(self._run()))

    async def wait_unfenced(self, timeout_s: float) -> None:
        """Return once the controller has unfenced this broker; TimeoutError after `timeout_s`,
        and what stopped the lifecycle if it failed."""
        waiter = asyncio.ensure_future(self.unfenced.wait())
        done, _ = await asyncio.wait([waiter, self._tasks[0]], timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        if waiter not in done:
            waiter.cancel()
            if self._tasks[0] in done:
                self._tasks[0].result()
            raise TimeoutError(f"broker {self.node_id} was not unfenced within {timeout_s} s")

    async def _run(self) -> None:
        await self._register()
        if self._local_log is not None:
            self._tasks.append(asyncio.get_running_loop().create_task(self._fetch_loop()))
        while True:
            await self._beat_quietly()
            interval = self._interval_s if not self.fenced else RETRY_S
            if self.fenced and self._local_log is not None:
                await _first(self._caught_up.wait(), asyncio.sleep(self._interval_s))
                self._caught_up.clear()
            else:
                await asyncio.sleep(interval)

    async def _register(self) -> None:
        request = BrokerRegistrationRequest(
            version=REGISTRATION_VERSION, broker_id=self.node_id, cluster_id=self.cluster_id,
            incarnation_id=self.incarnation_id,
            listeners=[BrokerRegistrationRequest.Listener(name=e.name, host=e.host, port=e.port, security_protocol=0)
                       for e in self._endpoints],
            features=[BrokerRegistrationRequest.Feature(name=name, min_supported_version=low,
                                                        max_supported_version=high)
                      for name, (low, high) in SUPPORTED_FEATURES.items()],
            rack=None, is_migrating_zk_broker=False, log_dirs=[self._log_dir_id],
            # KIP-966: the epoch of the last clean stop (none after an unclean one); once
            # registered, this incarnation's own, which it never lost
            previous_broker_epoch=self.broker_epoch if self.broker_epoch != NO_BROKER_EPOCH
            else self._previous_broker_epoch)
        while True:
            try:
                response = await self._heartbeats.send(request, REGISTRATION_VERSION, BrokerRegistrationResponse)
            except NodeUnreachableError as exc:
                log.info("broker %d: registration failed, retrying: %s", self.node_id, exc)
                await asyncio.sleep(RETRY_S)
                continue
            if response.error_code == ec.NONE:
                self.broker_epoch = response.broker_epoch
                return
            log.warning("broker %d: the controller refused its registration (error %d)", self.node_id,
                        response.error_code)
            await asyncio.sleep(self._interval_s)

    async def _beat_quietly(self) -> None:
        try:
            await self.heartbeat()
        except NodeUnreachableError as exc:
            log.info("broker %d: heartbeat failed: %s", self.node_id, exc)

    async def heartbeat(self, *, want_shut_down: bool = False) -> bool:
        """Send one heartbeat now; returns whether the broker is fenced after it.
        Raises NodeUnreachableError when the controller does not answer."""
        return (await self._heartbeat(want_shut_down)).is_fenced

    async def _heartbeat(self, want_shut_down: bool) -> BrokerHeartbeatResponse:
        request = BrokerHeartbeatRequest(version=HEARTBEAT_VERSION, broker_id=self.node_id,
                                         broker_epoch=self.broker_epoch, current_metadata_offset=self.metadata_offset,
                                         want_fence=False, want_shut_down=want_shut_down)
        response = await self._heartbeats.send(request, HEARTBEAT_VERSION, BrokerHeartbeatResponse)
        if not want_shut_down and response.error_code in (ec.STALE_BROKER_EPOCH, ec.BROKER_ID_NOT_REGISTERED):
            await self._register()  # the controller forgot this incarnation's registration
            response.is_fenced = self.fenced
            return response
        if response.error_code == ec.NONE:
            self.fenced = response.is_fenced
            if self.fenced:
                self.unfenced.clear()
            else:
                self.unfenced.set()
        elif want_shut_down:  # a registration the controller no longer holds: nothing to hand over
            response.should_shut_down = True
        return response

    async def controlled_shutdown(self, timeout_s: float = CONTROLLED_SHUTDOWN_S) -> bool:
        """Heartbeat wantShutDown until the controller answers shouldShutDown (it has moved this
        broker's leaderships away and taken it out of the ISRs, and the brokers know), fetching
        the metadata meanwhile; False when `timeout_s` ran out first or the controller is gone."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while loop.time() < deadline:
            try:
                response = await asyncio.wait_for(self._heartbeat(True), max(deadline - loop.time(), 0.001))
            except (NodeUnreachableError, TimeoutError):
                return False
            if response.should_shut_down:
                return True
            await asyncio.sleep(RETRY_S)
        return False

    async def _fetch_loop(self) -> None:
        while True:
            try:
                await self.fetch()
            except NodeUnreachableError as exc:
                log.info("broker %d: metadata fetch failed: %s", self.node_id, exc)
                await asyncio.sleep(RETRY_S)

    async def fetch(self) -> int:
        """Fetch the metadata log from where this broker's replica ends (waiting a while for new
        records), append and replay what came; returns the number of records replayed."""
        fetch = consumer.FetchRequest
        topic = fetch.FetchTopic(topic_id=METADATA_TOPIC_ID, partitions=[fetch.FetchTopic.FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=self._local_log.end_offset, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=FETCH_MAX_BYTES)])
        request = fetch(version=FETCH_VERSION, replica_state=fetch.ReplicaState(replica_id=self.node_id,
                                                                              replica_epoch=self.broker_epoch),
                        max_wait_ms=FETCH_MAX_WAIT_MS, min_bytes=1, max_bytes=FETCH_MAX_BYTES, isolation_level=0,
                        session_id=0, session_epoch=-1, topics=[topic], forgotten_topics_data=[], rack_id="")
        response = await self._fetches.send(request, FETCH_VERSION, consumer.FetchResponse)
        partitions = [p for t in response.responses for p in t.partitions]
        errors = [p.error_code for p in partitions if p.error_code != ec.NONE] or \
            ([response.error_code] if response.error_code != ec.NONE else [])
        if errors:  # e.g. a replica ahead of the controller's log: another cluster's, or a wiped one
            log.warning("broker %d: the controller refused the metadata fetch at offset %d (error %d)",
                        self.node_id, self._local_log.end_offset, errors[0])
            await asyncio.sleep(self._interval_s)
            return 0
        records = b"".join(bytes(p.records or b"") for p in partitions)
        if not records:
            return 0
        start = self._local_log.append_fetched(records)
        replayed = 0
        for _offset, record in self._local_log.records(start):
            self.image.replay(*record)
            replayed += 1
        self._on_metadata()
        self._applied = self._local_log.end_offset
        self._caught_up.set()
        return replayed

    async def close(self) -> None:
        """Shut down under control (`controlled_shutdown`: this broker's leaderships move and it
        leaves the ISRs before it stops; it is fenced, so that its next incarnation may
        register), then stop fetching and heartbeating and close the connections."""
        if self._tasks:
            self._tasks[0].cancel()  # the periodic heartbeats; the metadata keeps coming
            await asyncio.gather(self._tasks[0], return_exceptions=True)
        if self.broker_epoch != NO_BROKER_EPOCH:
            with contextlib.suppress(Exception):
                await self.controlled_shutdown()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._heartbeats.close()
        await self._fetches.close()

    async def abandon(self) -> None:
        """Stop as a killed broker stops: no word to the controller, which fences this broker
        once its session runs out; the connections close."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._heartbeats.close()
        await self._fetches.close()


async def _first(*awaitables) -> None:
    """Wait for the first of `awaitables` to finish; cancel the others."""
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    _done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()

"""A broker's source of producer-id blocks: AllocateProducerIds sent to the active controller
at the broker's current epoch (Kafka's RPCProducerIdManager, reduced to the request)."""

from __future__ import annotations

from collections.abc import Callable

from logstore.errors import ProducerIdsUnavailableError
from logstore.server import error_codes as ec
from logstore.server.kraft.node_channel import NodeChannel
from logstore.server.messages.controller_apis import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
)


class ProducerIdBlocks:
    """Called, returns the next block of producer ids broker `node_id` may hand out."""

    def __init__(self, node_id: int, controller: tuple[str, int], broker_epoch: Callable[[], int]):
        self._node_id = node_id
        self._broker_epoch = broker_epoch
        self._channel = NodeChannel(*controller, f"broker-{node_id}-producer-ids")

    async def __call__(self) -> range:
        """The block; NodeUnreachableError or ProducerIdsUnavailableError (the controller refused)."""
        request = AllocateProducerIdsRequest(version=0, broker_id=self._node_id, broker_epoch=self._broker_epoch())
        response = await self._channel.send(request, 0, AllocateProducerIdsResponse)
        if response.error_code != ec.NONE:
            raise ProducerIdsUnavailableError(f"the controller refused a block of producer ids: error {response.error_code}")
        return range(response.producer_id_start, response.producer_id_start + response.producer_id_len)

    async def close(self) -> None:
        await self._channel.close()

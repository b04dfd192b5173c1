"""InitProducerId for idempotent producers (no transactional id): a fresh producer id at
epoch 0. Transactional ids are the transaction coordinator's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from logstore.server import error_codes as ec
from logstore.server.producer_ids import ProducerIdManager
from logstore.server.protocol import Request


class IdempotenceApi:
    """InitProducerId without a transactional id."""

    def __init__(self, producer_ids: ProducerIdManager):
        self._ids = producer_ids

    def handlers(self) -> dict[int, Callable[[Request], Any]]:
        """Handlers by API key."""
        return {22: self.init_producer_id}

    async def init_producer_id(self, req: Request) -> Any:
        if req.body.transactional_id is not None:
            return req.response(throttle_time_ms=0, error_code=ec.COORDINATOR_NOT_AVAILABLE,
                                producer_id=-1, producer_epoch=-1)
        return req.response(throttle_time_ms=0, error_code=ec.NONE, producer_id=self._ids.allocate(),
                            producer_epoch=0)

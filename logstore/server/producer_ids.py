"""Producer ids: handed out above every id any log of the node has seen, so a restarted node
never gives a new producer the id of one whose sequences the logs still remember."""

from __future__ import annotations

from logstore.manager import LogManager


class ProducerIdManager:
    """Allocates producer ids, starting above the largest id in any log's producer state."""

    def __init__(self, manager: LogManager):
        seen = [pid for log in manager.logs() for pid in log.producer_state.producers]
        self._next = max(seen, default=-1) + 1

    def observe(self, producer_id: int) -> None:
        """Never hand out `producer_id` or below (an id found in the transaction log)."""
        self._next = max(self._next, producer_id + 1)

    def allocate(self) -> int:
        """A producer id no producer of this node has used."""
        producer_id = self._next
        self._next += 1
        return producer_id

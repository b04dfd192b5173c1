"""Producer ids: handed out above every id any log of the node has seen, so a restarted node
never gives a new producer the id of one whose sequences the logs still remember."""

from __future__ import annotations

from logstore.manager import LogManager


class ProducerIdManager:
    """Allocates producer ids, starting above the largest id in any log's producer state (read
    at the first allocation, which opens the logs not opened yet, rather than at start)."""

    def __init__(self, manager: LogManager):
        self._manager = manager
        self._next = 0
        self._logs_seen = False

    def observe(self, producer_id: int) -> None:
        """Never hand out `producer_id` or below (an id found in the transaction log)."""
        self._next = max(self._next, producer_id + 1)

    def allocate(self) -> int:
        """A producer id no producer of this node has used."""
        if not self._logs_seen:
            seen = [pid for log in self._manager.logs() for pid in log.producer_state.producers]
            self.observe(max(seen, default=-1))
            self._logs_seen = True
        producer_id = self._next
        self._next += 1
        return producer_id

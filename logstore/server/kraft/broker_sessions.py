"""When each registered broker last heartbeated, on the injected clock (the session half of
Kafka's BrokerHeartbeatManager): a broker silent for `broker.session.timeout.ms` is due to be
fenced."""

from __future__ import annotations

from logstore.clock import Clock


class BrokerSessions:
    """Broker id -> time of its last contact with the active controller."""

    def __init__(self, clock: Clock, session_timeout_ms: int):
        self._clock = clock
        self.session_timeout_ms = session_timeout_ms
        self._last_contact: dict[int, int] = {}
        self._offsets: dict[int, int] = {}  # broker -> metadata offset it has replayed up to

    def caught_up_to(self, broker_id: int, offset: int) -> None:
        """The broker has replayed the metadata log below `offset` (a heartbeat or a fetch said so)."""
        self._offsets[broker_id] = max(offset, self._offsets.get(broker_id, 0))

    def metadata_offset(self, broker_id: int) -> int:
        """How far the broker is known to have replayed the metadata log (0: unknown)."""
        return self._offsets.get(broker_id, 0)

    def touch(self, broker_id: int) -> None:
        """The broker registered or heartbeated now."""
        self._last_contact[broker_id] = self._clock.time_ms()

    def forget(self, broker_id: int) -> None:
        self._last_contact.pop(broker_id, None)
        self._offsets.pop(broker_id, None)

    def expired(self) -> list[int]:
        """Brokers whose session has run out, in id order."""
        deadline = self._clock.time_ms() - self.session_timeout_ms
        return sorted(b for b, last in self._last_contact.items() if last < deadline)

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

    def touch(self, broker_id: int) -> None:
        """The broker registered or heartbeated now."""
        self._last_contact[broker_id] = self._clock.time_ms()

    def forget(self, broker_id: int) -> None:
        self._last_contact.pop(broker_id, None)

    def expired(self) -> list[int]:
        """Brokers whose session has run out, in id order."""
        deadline = self._clock.time_ms() - self.session_timeout_ms
        return sorted(b for b, last in self._last_contact.items() if last < deadline)

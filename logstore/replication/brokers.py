"""The cluster's broker registry (Kafka's ClusterControlManager, in miniature): which brokers
are registered, the broker epoch of each one's current registration (KIP-903) and whether it
is fenced. It is cluster-wide, apart from any partition's Controller, so that the controllers of
many partitions (or a multi-node controller) share it.

Every registration gets a new, larger broker epoch. A broker tells the registry the epoch it
held when it last stopped cleanly (its clean-shutdown marker; NO_BROKER_EPOCH without one); a
mismatch with its last registration means the stop was not clean and the broker may have lost
unflushed data (KIP-966). A broker never registered before is not unclean: it holds nothing.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from logstore.clean_shutdown import NO_BROKER_EPOCH


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """One registration: the broker, its epoch, and whether the stop before it was unclean."""

    broker_id: int
    broker_epoch: int
    unclean_shutdown: bool = False


class BrokerRegistry:
    """Broker ids -> current registration and fencing. Thread-safe."""

    def __init__(self) -> None:
        self._registrations: dict[int, BrokerRegistration] = {}
        self._fenced: set[int] = set()
        self._next_epoch = 0
        self._lock = threading.Lock()

    def register(self, broker_id: int, previous_broker_epoch: int = NO_BROKER_EPOCH, *,
                 broker_epoch: int | None = None) -> BrokerRegistration:
        """A broker (re)starts: a new broker epoch, unfenced. `unclean_shutdown` is set when the
        broker was registered before and `previous_broker_epoch` is not that registration's.
        `broker_epoch` is the epoch to give (a KRaft controller gives the offset of the
        registration's record); it must be above the broker's last one (ValueError)."""
        with self._lock:
            epoch = self._next_epoch if broker_epoch is None else broker_epoch
            last = self._registrations.get(broker_id)
            if last is not None and epoch <= last.broker_epoch:
                raise ValueError(f"broker {broker_id}: epoch {epoch} is not above its last one ({last.broker_epoch})")
            registration = BrokerRegistration(
                broker_id, epoch,
                unclean_shutdown=last is not None and previous_broker_epoch != last.broker_epoch)
            self._next_epoch = max(self._next_epoch, epoch + 1)
            self._registrations[broker_id] = registration
            self._fenced.discard(broker_id)
            return registration

    def fence(self, broker_id: int) -> None:
        """The broker's session ended (it died, or shut down): its epoch stays, it is fenced."""
        with self._lock:
            if broker_id in self._registrations:
                self._fenced.add(broker_id)

    def unfence(self, broker_id: int, broker_epoch: int) -> bool:
        """The broker's current incarnation (`broker_epoch`) is back in touch; False if stale."""
        with self._lock:
            registration = self._registrations.get(broker_id)
            if registration is None or registration.broker_epoch != broker_epoch:
                return False
            self._fenced.discard(broker_id)
            return True

    def registration(self, broker_id: int) -> BrokerRegistration | None:
        """The broker's current registration, fenced or not; None if it never registered."""
        with self._lock:
            return self._registrations.get(broker_id)

    def is_fenced(self, broker_id: int) -> bool:
        """True for a fenced or never registered broker."""
        with self._lock:
            return broker_id in self._fenced or broker_id not in self._registrations

    def is_current(self, broker_id: int, broker_epoch: int) -> bool:
        """True when `broker_epoch` is the broker's current registration and it is unfenced
        (Kafka refuses an AlterPartition naming anything else: STALE_BROKER_EPOCH,
        INELIGIBLE_REPLICA)."""
        with self._lock:
            registration = self._registrations.get(broker_id)
            return (registration is not None and registration.broker_epoch == broker_epoch
                    and broker_id not in self._fenced)

    def __repr__(self) -> str:
        with self._lock:
            brokers = {b: r.broker_epoch for b, r in sorted(self._registrations.items())}
            return f"BrokerRegistry(epochs={brokers}, fenced={sorted(self._fenced)})"

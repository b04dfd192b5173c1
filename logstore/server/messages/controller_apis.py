"""The APIs brokers send the active controller (KRaft), generated from Kafka 4.0's definitions:
BrokerRegistration (key 62), BrokerHeartbeat (key 63), AlterPartition (key 56) and
AllocateProducerIds (key 67)."""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from logstore.server.messages import RESOURCES, schema_loading

with schema_loading():
    class BrokerRegistrationRequest(ApiMessage, load_json=RESOURCES):
        """A broker (re)starts: its id, incarnation, listeners, supported features, log dirs."""

    class BrokerRegistrationResponse(ApiMessage, load_json=RESOURCES):
        """The broker epoch the controller gave the registration."""

    class BrokerHeartbeatRequest(ApiMessage, load_json=RESOURCES):
        """The broker's epoch and metadata offset, and whether it wants to be fenced or stop."""

    class BrokerHeartbeatResponse(ApiMessage, load_json=RESOURCES):
        """Whether the broker is caught up, fenced, and may finish shutting down."""

    class AlterPartitionRequest(ApiMessage, load_json=RESOURCES):
        """A partition leader's new ISR (with each member's broker epoch from v3, KIP-903)."""

    class AlterPartitionResponse(ApiMessage, load_json=RESOURCES):
        """Per partition: an error, or the ISR, leader and epochs the controller recorded."""

    class AllocateProducerIdsRequest(ApiMessage, load_json=RESOURCES):
        """A broker (at its epoch) asks for a block of producer ids no other broker hands out."""

    class AllocateProducerIdsResponse(ApiMessage, load_json=RESOURCES):
        """The block: its first producer id and its length."""


__all__ = ["AllocateProducerIdsRequest", "AllocateProducerIdsResponse", "AlterPartitionRequest", "AlterPartitionResponse", "BrokerHeartbeatRequest", "BrokerHeartbeatResponse", "BrokerRegistrationRequest",
           "BrokerRegistrationResponse"]

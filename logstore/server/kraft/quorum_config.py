"""A node's place in a KRaft cluster, read from Kafka's own `server.properties` keys:
`process.roles`, `node.id`, `controller.quorum.voters` / `controller.quorum.bootstrap.servers`,
`listeners`, `controller.listener.names`, and the broker session and snapshot settings.

The checks are Kafka's (KafkaConfig's validation): a controller's node.id is one of the
voters and its controller listener is among `listeners`; a broker-only node does not listen
on a controller listener. One rule is logstore's: the quorum has a single voter (controller
failover needs several voters, which logstore does not run), and a voter set of more than one
is refused with that reason rather than half-used.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from logstore.config import java_integer, property_int
from logstore.errors import InvalidConfigError

BROKER, CONTROLLER = "broker", "controller"
ROLES = (BROKER, CONTROLLER)
# Kafka's listener.security.protocol.map default adds the controller listener as PLAINTEXT.
PLAINTEXT = "PLAINTEXT"
DEFAULT_SECURITY_PROTOCOLS = {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT",
                              "SASL_SSL": "SASL_SSL"}
HEARTBEAT_INTERVAL_MS = 2000  # broker.heartbeat.interval.ms
SESSION_TIMEOUT_MS = 9000  # broker.session.timeout.ms
SNAPSHOT_RECORD_BYTES = 20 * 1024 * 1024  # metadata.log.max.record.bytes.between.snapshots


@dataclass(frozen=True)
class Endpoint:
    """One listener: its name (PLAINTEXT, CONTROLLER, ...), host and port."""

    name: str
    host: str
    port: int


@dataclass(frozen=True)
class QuorumConfig:
    """The node's roles, the controller quorum, its listeners and the broker session settings."""

    node_id: int
    process_roles: frozenset[str]
    voters: Mapping[int, tuple[str, int]]
    bootstrap_servers: tuple[tuple[str, int], ...]
    controller_listener_names: tuple[str, ...]
    listeners: tuple[Endpoint, ...]
    heartbeat_interval_ms: int = HEARTBEAT_INTERVAL_MS
    session_timeout_ms: int = SESSION_TIMEOUT_MS
    snapshot_record_bytes: int = SNAPSHOT_RECORD_BYTES

    @property
    def is_controller(self) -> bool:
        return CONTROLLER in self.process_roles

    @property
    def is_broker(self) -> bool:
        return BROKER in self.process_roles

    @property
    def controller_listener(self) -> Endpoint | None:
        """The listener this node serves the controller's APIs on (None on a broker-only node)."""
        if not self.is_controller:
            return None
        return next(e for e in self.listeners if e.name == self.controller_listener_names[0])

    @property
    def broker_listeners(self) -> tuple[Endpoint, ...]:
        """The listeners clients use: every listener but the controller's."""
        return tuple(e for e in self.listeners if e.name not in self.controller_listener_names)

    @property
    def controller_address(self) -> tuple[str, int]:
        """Where the active controller listens: the single voter, else the bootstrap server."""
        if self.voters:
            return next(iter(self.voters.values()))
        return self.bootstrap_servers[0]

    def settings(self) -> dict[str, str]:
        """The quorum's settings by Kafka's key names, as DescribeConfigs shows them."""
        return {
            "process.roles": ",".join(r for r in ROLES if r in self.process_roles),
            "controller.quorum.voters": ",".join(f"{v}@{h}:{p}" for v, (h, p) in self.voters.items()),
            "controller.quorum.bootstrap.servers": ",".join(f"{h}:{p}" for h, p in self.bootstrap_servers),
            "controller.listener.names": ",".join(self.controller_listener_names),
            "broker.heartbeat.interval.ms": str(self.heartbeat_interval_ms),
            "broker.session.timeout.ms": str(self.session_timeout_ms),
            "metadata.log.max.record.bytes.between.snapshots": str(self.snapshot_record_bytes),
        }

    @classmethod
    def from_properties(cls, props: Mapping[str, str], node_id: int) -> QuorumConfig | None:
        """The quorum settings of `props`; None without `process.roles` (a standalone node).

        Raises InvalidConfigError naming the key for what Kafka refuses, and for a quorum of
        more than one voter.
        """
        raw_roles = props.get("process.roles")
        if raw_roles is None:
            for key in ("controller.quorum.voters", "controller.quorum.bootstrap.servers"):
                if props.get(key, "").strip():
                    raise InvalidConfigError(f"{key} is set but process.roles is not: set process.roles to "
                                             "broker, controller or broker,controller to join a cluster")
            return None
        roles = _roles(raw_roles)
        voters = _voters(props.get("controller.quorum.voters", ""))
        bootstrap = tuple(_address("controller.quorum.bootstrap.servers", part)
                          for part in _items(props.get("controller.quorum.bootstrap.servers", "")))
        if not voters and not bootstrap:
            raise InvalidConfigError("process.roles is set: controller.quorum.voters or "
                                     "controller.quorum.bootstrap.servers must name the controller")
        if len(voters) > 1:
            raise InvalidConfigError(
                f"controller.quorum.voters names {len(voters)} voters: logstore runs a single-voter quorum "
                "(controller failover, which needs several voters, is not implemented)")
        names = tuple(n.upper() for n in _items(props.get("controller.listener.names", "")))
        if not names:
            raise InvalidConfigError("controller.listener.names must be set when process.roles is set")
        listeners = _listeners(props.get("listeners", ""), props.get("listener.security.protocol.map"), names)
        listed = {e.name for e in listeners}
        if CONTROLLER in roles:
            if not voters:
                raise InvalidConfigError("a controller needs controller.quorum.voters: logstore does not run "
                                         "a dynamic quorum (controller.quorum.bootstrap.servers alone)")
            if node_id not in voters:
                raise InvalidConfigError(f"node.id {node_id} is a controller but not in controller.quorum.voters "
                                         f"({','.join(map(str, voters))})")
            if names[0] not in listed:
                raise InvalidConfigError(f"controller.listener.names: {names[0]} is not among listeners "
                                         f"({props.get('listeners', '')!r})")
        elif listed & set(names):
            raise InvalidConfigError("controller.listener.names must not name a listener of a broker-only node "
                                     f"(listeners {props.get('listeners', '')!r})")
        if BROKER in roles and not any(e.name not in names for e in listeners):
            raise InvalidConfigError("a broker needs a listener for clients besides the controller's in listeners")
        return cls(
            node_id=node_id, process_roles=roles, voters=voters, bootstrap_servers=bootstrap,
            controller_listener_names=names, listeners=listeners,
            heartbeat_interval_ms=property_int(props, "broker.heartbeat.interval.ms", HEARTBEAT_INTERVAL_MS, lo=1),
            session_timeout_ms=property_int(props, "broker.session.timeout.ms", SESSION_TIMEOUT_MS, lo=1),
            snapshot_record_bytes=property_int(props, "metadata.log.max.record.bytes.between.snapshots",
                                               SNAPSHOT_RECORD_BYTES, lo=1),
        )


def _items(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _roles(text: str) -> frozenset[str]:
    roles = [r.lower() for r in _items(text)]
    unknown = [r for r in roles if r not in ROLES]
    if not roles or unknown or len(set(roles)) != len(roles):
        raise InvalidConfigError(f"process.roles: expected broker, controller or both, got {text!r}")
    return frozenset(roles)


def _address(key: str, text: str, *, empty_host: bool = False) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    try:
        number = java_integer(port) if sep and (host or empty_host) else -1
    except ValueError:
        number = -1
    if not 0 <= number <= 65535:
        raise InvalidConfigError(f"{key}: expected HOST:PORT, got {text!r}")
    return host.strip("[]"), number


def _voters(text: str) -> dict[int, tuple[str, int]]:
    voters: dict[int, tuple[str, int]] = {}
    for part in _items(text):
        node, sep, address = part.partition("@")
        try:
            voter = java_integer(node)
        except ValueError:
            voter = -1
        if not sep or voter < 0:
            raise InvalidConfigError(f"controller.quorum.voters: expected ID@HOST:PORT, got {part!r}")
        if voter in voters:
            raise InvalidConfigError(f"controller.quorum.voters names voter {voter} twice")
        voters[voter] = _address("controller.quorum.voters", address)
    return voters


def _listeners(text: str, protocol_map: str | None, controller_names: tuple[str, ...]) -> tuple[Endpoint, ...]:
    protocols = dict(DEFAULT_SECURITY_PROTOCOLS)
    protocols.update({n: PLAINTEXT for n in controller_names})
    if protocol_map:
        protocols = {}
        for part in _items(protocol_map):
            name, sep, protocol = part.partition(":")
            if not sep:
                raise InvalidConfigError(f"listener.security.protocol.map: expected NAME:PROTOCOL, got {part!r}")
            protocols[name.strip().upper()] = protocol.strip().upper()
    endpoints = []
    for part in _items(text):
        name, sep, address = part.partition("://")
        name = name.upper()
        if not sep:
            raise InvalidConfigError(f"listeners: expected NAME://HOST:PORT, got {part!r}")
        if protocols.get(name) != PLAINTEXT:
            raise InvalidConfigError(f"listeners: {name} maps to security protocol {protocols.get(name)}; "
                                     "logstore serves PLAINTEXT only")
        host, port = _address("listeners", address, empty_host=True)
        endpoints.append(Endpoint(name, host or "0.0.0.0", port))
    if len({e.name for e in endpoints}) != len(endpoints):
        raise InvalidConfigError(f"listeners: a listener name appears twice in {text!r}")
    return tuple(endpoints)

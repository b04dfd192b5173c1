"""ElectLeaders (key 43, v0-2) as Kafka 4.0 answers it: a PREFERRED (v0's only kind) or
UNCLEAN election for the named partitions, or for every partition when none are named, each
answered with its own error code. Brokers forward it to the active controller, which holds the
elections (`QuorumController.elect_leaders`); a standalone node leads every partition already."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from logstore.server import error_codes as ec
from logstore.server.kraft.partition_change import ElectionKind
from logstore.server.protocol import Request

UNCLEAN_ELECTION = 1  # ElectLeadersRequest.ElectionType: 0 preferred, 1 unclean


def requested(req: Request) -> tuple[ElectionKind, list[tuple[str, int]] | None]:
    """The election kind asked for and the (topic, partition)s, None for every partition."""
    body = req.body
    unclean = req.version >= 1 and body.election_type == UNCLEAN_ELECTION
    kind = ElectionKind.UNCLEAN if unclean else ElectionKind.PREFERRED
    if body.topic_partitions is None:
        return kind, None
    return kind, [(t.topic, p) for t in body.topic_partitions for p in t.partitions]


def respond(req: Request, results: Mapping[tuple[str, int], int]) -> Any:
    """The response naming each partition's error code, by topic."""
    cls = req.spec.response
    by_topic: dict[str, list] = {}
    for (topic, partition), error in results.items():
        by_topic.setdefault(topic, []).append(cls.ReplicaElectionResult.PartitionResult(
            partition_id=partition, error_code=error, error_message=None if error == ec.NONE else _message(error)))
    entries = [cls.ReplicaElectionResult(topic=t, partition_result=ps) for t, ps in by_topic.items()]
    return req.response(throttle_time_ms=0, error_code=ec.NONE, replica_election_results=entries)


def standalone(req: Request, exists: Callable[[str, int], bool]) -> Any:
    """A single node leads each of its partitions already: no election is needed anywhere."""
    _kind, wanted = requested(req)
    return respond(req, {(t, p): ec.ELECTION_NOT_NEEDED if exists(t, p) else ec.UNKNOWN_TOPIC_OR_PARTITION
                         for t, p in wanted or []})


def _message(error: int) -> str:
    """A short message for an election's error, as Kafka's ApiError gives one."""
    return {ec.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
            ec.PREFERRED_LEADER_NOT_AVAILABLE: "The preferred leader was not available.",
            ec.ELIGIBLE_LEADERS_NOT_AVAILABLE: "Eligible topic partition leaders are not available.",
            ec.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition."}.get(error, str(error))

"""Replication: leader/follower partitions, high watermark, ISR, leader epochs, and cluster helpers."""

from logstore.replication.assignment import assign_replicas, rack_alternated_brokers
from logstore.replication.controller import Controller
from logstore.replication.election import (
    Election,
    controlled_shutdown_leader,
    eligible_leader_replicas,
    isr_after_fencing,
    offline_partition_leader,
    preferred_replica_leader,
    reassigned_partition_leader,
)
from logstore.replication.follower import Follower, Step, truncation_offset
from logstore.replication.partition import (
    ACKS_ALL,
    LEADER_OFFSET_INCREMENTED,
    AppendHandle,
    EpochEndOffset,
    FetchResponse,
    Partition,
    ReplicaState,
)
from logstore.replication.transport import (
    FetchRequest,
    InProcessTransport,
    PartitionServer,
    TcpTransport,
    Transport,
)

__all__ = [
    "ACKS_ALL",
    "LEADER_OFFSET_INCREMENTED",
    "AppendHandle",
    "Controller",
    "Election",
    "EpochEndOffset",
    "FetchRequest",
    "FetchResponse",
    "Follower",
    "InProcessTransport",
    "Partition",
    "PartitionServer",
    "ReplicaState",
    "Step",
    "TcpTransport",
    "Transport",
    "assign_replicas",
    "controlled_shutdown_leader",
    "eligible_leader_replicas",
    "isr_after_fencing",
    "offline_partition_leader",
    "preferred_replica_leader",
    "rack_alternated_brokers",
    "reassigned_partition_leader",
    "truncation_offset",
]

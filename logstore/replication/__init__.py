"""Replication: leader/follower partitions, high watermark, ISR, leader epochs, and cluster helpers."""

from logstore.replication.assignment import assign_replicas, rack_alternated_brokers
from logstore.replication.brokers import BrokerRegistration, BrokerRegistry
from logstore.replication.controller import Controller
from logstore.replication.election import (
    Election,
    ReplicaLogInfo,
    UncleanRecoveryStrategy,
    controlled_shutdown_leader,
    eligible_leader_replicas,
    isr_after_fencing,
    last_known_elr,
    offline_partition_leader,
    preferred_replica_leader,
    reassigned_partition_leader,
    unclean_recovery_leader,
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
    Transport,
)

__all__ = [
    "ACKS_ALL",
    "LEADER_OFFSET_INCREMENTED",
    "AppendHandle",
    "BrokerRegistration",
    "BrokerRegistry",
    "Controller",
    "Election",
    "EpochEndOffset",
    "FetchRequest",
    "FetchResponse",
    "Follower",
    "InProcessTransport",
    "Partition",
    "ReplicaLogInfo",
    "ReplicaState",
    "Step",
    "Transport",
    "UncleanRecoveryStrategy",
    "assign_replicas",
    "controlled_shutdown_leader",
    "eligible_leader_replicas",
    "isr_after_fencing",
    "last_known_elr",
    "offline_partition_leader",
    "preferred_replica_leader",
    "rack_alternated_brokers",
    "reassigned_partition_leader",
    "truncation_offset",
    "unclean_recovery_leader",
]

"""Replication: leader/follower partitions, high watermark, ISR, leader epochs, and cluster helpers."""

from logstore.replication.assignment import assign_replicas, rack_alternated_brokers
from logstore.replication.election import (
    Election,
    controlled_shutdown_leader,
    offline_partition_leader,
    preferred_replica_leader,
    reassigned_partition_leader,
)

__all__ = [
    "Election",
    "assign_replicas",
    "controlled_shutdown_leader",
    "offline_partition_leader",
    "preferred_replica_leader",
    "rack_alternated_brokers",
    "reassigned_partition_leader",
]

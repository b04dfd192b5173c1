"""Several `logstore serve` nodes as one KRaft cluster, and the faults tests inject into it:
KafkaCluster, its nodes' stop / kill / power_loss / restart, link cuts, leader moves and per-API
control hooks (Answer, Delay, Drop, Observe)."""

from logstore.server.cluster.kafka_cluster import ClusterFaultError, KafkaCluster
from logstore.server.control_hooks import Answer, Delay, Drop, Hook, Observe

__all__ = ["Answer", "ClusterFaultError", "Delay", "Drop", "Hook", "KafkaCluster", "Observe"]

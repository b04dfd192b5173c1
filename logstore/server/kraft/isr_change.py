"""AlterPartition's checks (Kafka's ReplicationControlManager, KIP-497/841/903): which change
of a partition's ISR the active controller accepts from the partition's leader, and the error
code of one it refuses. Pure: reads the MetadataImage and its BrokerRegistry."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from logstore.clean_shutdown import NO_BROKER_EPOCH
from logstore.server import error_codes as ec
from logstore.server.kraft.metadata_image import MetadataImage
from logstore.server.kraft.metadata_records import RECOVERING


def isr_change_error(image: MetadataImage, leader_id: int, topic_id: uuid.UUID, partition_id: int, *,
                     leader_epoch: int, partition_epoch: int, new_isr: Sequence[tuple[int, int]],
                     leader_recovery_state: int = 0) -> int:
    """NONE when leader `leader_id` may set the ISR of the partition to `new_isr` ((broker id,
    broker epoch) pairs, the epoch NO_BROKER_EPOCH when not sent), else the error Kafka answers."""
    topic = image.topics.get(topic_id)
    if topic is None:
        return ec.UNKNOWN_TOPIC_ID
    partition = topic.partitions.get(partition_id)
    if partition is None:
        return ec.UNKNOWN_TOPIC_OR_PARTITION
    if leader_id != partition.leader:
        return ec.INVALID_REQUEST  # only the leader changes the ISR
    if leader_epoch > partition.leader_epoch:
        return ec.NOT_LEADER_OR_FOLLOWER  # an epoch this controller has not given yet
    if leader_epoch < partition.leader_epoch:
        return ec.FENCED_LEADER_EPOCH
    if partition_epoch != partition.partition_epoch:
        return ec.INVALID_UPDATE_VERSION
    members = [broker for broker, _ in new_isr]
    if len(set(members)) != len(members) or not set(members) <= set(partition.replicas):
        return ec.INVALID_REQUEST
    if leader_id not in members:
        return ec.INVALID_REQUEST
    if leader_recovery_state == RECOVERING and len(members) > 1:
        return ec.INVALID_REQUEST  # a recovering leader stays alone until it has recovered
    registry = image.registry
    for broker, epoch in new_isr:
        current = registry.is_current(broker, epoch) if epoch != NO_BROKER_EPOCH else not registry.is_fenced(broker)
        if not current or image.brokers[broker].in_controlled_shutdown:
            return ec.INELIGIBLE_REPLICA  # fenced, shutting down, unregistered, or an earlier incarnation
    return ec.NONE

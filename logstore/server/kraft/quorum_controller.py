"""The active controller of a single-voter quorum (Kafka's QuorumController, in miniature):
every change is a batch of metadata records appended to `__cluster_metadata-0` and then
replayed into the MetadataImage, so the log alone (with its latest snapshot) rebuilds the
controller's state on restart, and brokers fetching the log rebuild the same image.

It registers brokers (the broker epoch is the offset of the RegisterBrokerRecord; a new
registration starts fenced), unfences a broker once a heartbeat shows it caught up with the log,
fences it when its heartbeats stop for `broker.session.timeout.ms` (on the injected clock; see
`check_sessions`) or it asks to be, and creates topics (TopicRecord, then a PartitionRecord per
partition, replicas spread over the unfenced brokers). When a broker is fenced it leaves the
ISR of its partitions and loses their leadership, by `replication.election`'s rules.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from logstore.clean_shutdown import NO_BROKER_EPOCH
from logstore.clock import Clock
from logstore.errors import InvalidReplicationError
from logstore.manager import refuse_reserved
from logstore.replication.assignment import assign_replicas
from logstore.replication.brokers import BrokerRegistry
from logstore.replication.election import isr_after_fencing, offline_partition_leader
from logstore.server import error_codes as ec
from logstore.server.kraft import metadata_records as mr
from logstore.server.kraft.broker_sessions import BrokerSessions
from logstore.server.kraft.isr_change import isr_change_error
from logstore.server.kraft.metadata_image import TOPIC_RESOURCE, MetadataImage
from logstore.server.kraft.metadata_log import MetadataLog
from logstore.server.kraft.quorum_config import SESSION_TIMEOUT_MS, SNAPSHOT_RECORD_BYTES
from logstore.server.topics import TopicExistsError

PRODUCER_ID_BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
UNASSIGNED_DIRECTORY = uuid.UUID(int=0)  # DirectoryId.UNASSIGNED
MIGRATING_DIRECTORY = uuid.UUID(int=2)  # DirectoryId.MIGRATING: the broker registered no directory


@dataclass(frozen=True)
class Registration:
    """BrokerRegistration's answer: an error code and, on success, the new broker epoch."""

    error_code: int
    broker_epoch: int = NO_BROKER_EPOCH


@dataclass(frozen=True)
class HeartbeatReply:
    """BrokerHeartbeat's answer (Kafka's BrokerHeartbeatReply)."""

    error_code: int
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False


class QuorumController:
    """The metadata of the cluster whose only voter is `node_id`, kept in `data_dir`'s metadata log.

    `cluster_id` is the cluster's (meta.properties); `registry` the cluster-level BrokerRegistry
    the partitions' controllers share (a new one if not given). Call `start` before anything else.
    """

    def __init__(self, data_dir: Path, node_id: int, cluster_id: str, clock: Clock, *,
                 session_timeout_ms: int = SESSION_TIMEOUT_MS, snapshot_record_bytes: int = SNAPSHOT_RECORD_BYTES,
                 registry: BrokerRegistry | None = None):
        self.node_id = node_id
        self.cluster_id = cluster_id
        self._clock = clock
        self.sessions = BrokerSessions(clock, session_timeout_ms)
        self.snapshot_record_bytes = snapshot_record_bytes
        self.image = MetadataImage(registry)
        self.log = MetadataLog(data_dir, node_id, clock)
        self._bytes_at_snapshot = 0

    # ------------------------------------------------------------------ life cycle

    def start(self) -> None:
        """Load the latest snapshot and replay the log after it, open a new epoch, and on an
        empty log append the bootstrap records. Brokers unfenced in the log get a fresh session."""
        empty = not self.log.replay_into(self.image)
        self.log.become_leader()
        if empty:
            self._commit(mr.bootstrap_records())
        for broker_id in self.image.unfenced_brokers():
            self.sessions.touch(broker_id)

    def close(self) -> None:
        self.log.close()

    def _commit(self, records: list[mr.MetadataRecord]) -> int:
        """Append `records` as one batch and replay them as read back from the log (as a broker
        replays them, defaults filled in); returns the first one's offset."""
        offset = self.log.append(records)
        for _offset, record in self.log.records(offset):
            self.image.replay(*record)
        self.maybe_snapshot()
        return offset

    def maybe_snapshot(self) -> Path | None:
        """Write a snapshot once `metadata.log.max.record.bytes.between.snapshots` worth of
        batches has been appended since the last one (or since start); every commit asks."""
        if self.log.bytes_appended - self._bytes_at_snapshot < self.snapshot_record_bytes:
            return None
        return self.snapshot()

    def snapshot(self) -> Path:
        """Write the image as a snapshot ending at the log end now."""
        self._bytes_at_snapshot = self.log.bytes_appended
        return self.log.write_snapshot(self.image.snapshot_records())

    # ------------------------------------------------------------------ brokers

    def register_broker(self, broker_id: int, *, cluster_id: str | None, incarnation_id: uuid.UUID,
                        listeners: Sequence[Mapping], features: Sequence[Mapping] = (), rack: str | None = None,
                        log_dirs: Sequence[uuid.UUID] = (),
                        previous_broker_epoch: int = NO_BROKER_EPOCH) -> Registration:
        """A broker (re)starts: a RegisterBrokerRecord, fenced; its offset is the broker epoch.

        Refused with INCONSISTENT_CLUSTER_ID for another cluster, DUPLICATE_BROKER_REGISTRATION
        while another incarnation of the broker holds a live session, UNSUPPORTED_VERSION when
        the broker does not support the finalized metadata.version.
        """
        if cluster_id is not None and cluster_id != self.cluster_id:
            return Registration(ec.INCONSISTENT_CLUSTER_ID)
        known = self.image.brokers.get(broker_id)
        if (known is not None and known.incarnation_id != incarnation_id
                and broker_id not in self.sessions.expired() and not self.image.registry.is_fenced(broker_id)):
            return Registration(ec.DUPLICATE_BROKER_REGISTRATION)
        level = self.image.features.get(mr.METADATA_VERSION, 0)
        supported = {f["name"]: (f["minSupportedVersion"], f["maxSupportedVersion"]) for f in features}
        low, high = supported.get(mr.METADATA_VERSION, (0, 0))
        if features and not low <= level <= high:
            return Registration(ec.UNSUPPORTED_VERSION)
        epoch = self.log.end_offset
        self._commit([mr.register_broker(broker_id, epoch, incarnation_id, listeners, features, rack, log_dirs)])
        self.sessions.touch(broker_id)
        return Registration(ec.NONE, epoch)

    def heartbeat(self, broker_id: int, broker_epoch: int, *, current_metadata_offset: int,
                  want_fence: bool = False, want_shut_down: bool = False) -> HeartbeatReply:
        """A broker's heartbeat: keeps its session, unfences it once its metadata offset has
        reached its registration (unless it wants to stay fenced), fences it when it asks.
        STALE_BROKER_EPOCH for an old registration, BROKER_ID_NOT_REGISTERED for none."""
        info = self.image.brokers.get(broker_id)
        if info is None:
            return HeartbeatReply(ec.BROKER_ID_NOT_REGISTERED)
        if info.broker_epoch != broker_epoch:
            return HeartbeatReply(ec.STALE_BROKER_EPOCH)
        self.sessions.touch(broker_id)
        caught_up = current_metadata_offset >= broker_epoch
        fenced = self.image.registry.is_fenced(broker_id)
        if fenced and caught_up and not (want_fence or want_shut_down):
            self._commit([mr.fencing_change(broker_id, broker_epoch, mr.UNFENCE), *self._lead_leaderless(broker_id)])
        elif not fenced and (want_fence or want_shut_down):
            self._fence(broker_id)
        if want_shut_down:
            self.sessions.forget(broker_id)
        return HeartbeatReply(ec.NONE, is_caught_up=caught_up, is_fenced=self.image.registry.is_fenced(broker_id),
                              should_shut_down=want_shut_down)

    def check_sessions(self) -> list[int]:
        """Fence every unfenced broker whose session has expired; returns their ids."""
        fenced = [b for b in self.sessions.expired() if not self.image.registry.is_fenced(b)]
        for broker_id in fenced:
            self._fence(broker_id)
        for broker_id in self.sessions.expired():
            self.sessions.forget(broker_id)
        return fenced

    def _fence(self, broker_id: int) -> None:
        """The broker leaves every ISR (its last member stays, to lead on return) and every
        leadership, which moves to another live ISR member if there is one; then it is fenced."""
        live = set(self.image.unfenced_brokers()) - {broker_id}
        changes = []
        for info in self.image.topics.values():
            for partition_id, p in sorted(info.partitions.items()):
                if broker_id not in p.isr and p.leader != broker_id:
                    continue
                isr = isr_after_fencing(p.isr, [broker_id], eligible_leader_replicas=False)
                new_isr = [r for r in p.isr if r in isr]
                leader = mr.NO_LEADER_CHANGE
                if p.leader == broker_id:
                    leader = offline_partition_leader(p.replicas, isr, live).leader
                    leader = mr.NO_LEADER if leader is None else leader
                if new_isr != p.isr or leader != mr.NO_LEADER_CHANGE:
                    changes.append(mr.partition_change(info.topic_id, partition_id,
                                                       isr=new_isr if new_isr != p.isr else None, leader=leader))
        epoch = self.image.brokers[broker_id].broker_epoch
        self._commit([*changes, mr.fencing_change(broker_id, epoch, mr.FENCE)])

    def _lead_leaderless(self, broker_id: int) -> list[mr.MetadataRecord]:
        """Partitions without a leader that the unfenced broker may lead (it is in their ISR)."""
        return [mr.partition_change(info.topic_id, partition_id, leader=broker_id)
                for info in self.image.topics.values() for partition_id, p in sorted(info.partitions.items())
                if p.leader == mr.NO_LEADER and broker_id in p.isr and broker_id in p.replicas]

    def is_stale(self, broker_id: int, broker_epoch: int) -> bool:
        """Whether `broker_epoch` is not the broker's current registration (or it has none)."""
        info = self.image.brokers.get(broker_id)
        return info is None or info.broker_epoch != broker_epoch

    def alter_partition(self, broker_id: int, broker_epoch: int, topic_id: uuid.UUID, partition_id: int, *,
                        leader_epoch: int, partition_epoch: int, new_isr: Sequence[tuple[int, int]],
                        leader_recovery_state: int = 0) -> int:
        """A leader's new ISR (AlterPartition): a PartitionChangeRecord when it is accepted and
        changes anything; returns the error code (STALE_BROKER_EPOCH for a leader that is not
        its broker's current registration, else `isr_change.isr_change_error`'s)."""
        if self.is_stale(broker_id, broker_epoch):
            return ec.STALE_BROKER_EPOCH
        error = isr_change_error(self.image, broker_id, topic_id, partition_id, leader_epoch=leader_epoch,
                                 partition_epoch=partition_epoch, new_isr=new_isr,
                                 leader_recovery_state=leader_recovery_state)
        isr = [broker for broker, _ in new_isr]
        if error == ec.NONE and isr != self.image.topics[topic_id].partitions[partition_id].isr:
            self._commit([mr.partition_change(topic_id, partition_id, isr=isr)])
        return error

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[int, int]:
        """AllocateProducerIds: (error, first id) of a block of PRODUCER_ID_BLOCK_SIZE ids that no
        other broker gets, recorded by a ProducerIdsRecord so a restart never hands it out again.
        STALE_BROKER_EPOCH for a broker not at its current registration."""
        if self.is_stale(broker_id, broker_epoch):
            return ec.STALE_BROKER_EPOCH, -1
        start = self.image.next_producer_id
        self._commit([("ProducerIdsRecord", 0, {"brokerId": broker_id, "brokerEpoch": broker_epoch,
                                                "nextProducerId": start + PRODUCER_ID_BLOCK_SIZE})])
        return ec.NONE, start

    # ------------------------------------------------------------------ topics

    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     configs: Mapping[str, str] | None = None) -> uuid.UUID:
        """TopicRecord, a PartitionRecord per partition (replicas over the unfenced brokers, the
        first leading, all in the ISR) and a ConfigRecord per config. Raises InvalidTopicError
        for a reserved name, TopicExistsError for a taken one, InvalidReplicationError when the unfenced brokers are
        too few or the counts are not positive."""
        refuse_reserved(name)
        if name in self.image.topic_ids:
            raise TopicExistsError(f"topic {name!r} already exists")
        if num_partitions < 1 or replication_factor < 1:
            raise InvalidReplicationError("the partition count and replication factor must be positive")
        brokers = {b: self.image.brokers[b].rack for b in self.image.unfenced_brokers()}
        if replication_factor > len(brokers):
            raise InvalidReplicationError(f"replication factor {replication_factor} is larger than the "
                                          f"{len(brokers)} unfenced brokers")
        topic_id = uuid.uuid4()
        records = [mr.topic(name, topic_id)]
        for partition_id, replicas in sorted(assign_replicas(num_partitions, replication_factor, brokers).items()):
            records.append(mr.partition(topic_id, partition_id, replicas, replicas, replicas[0],
                                        [self._default_directory(b) for b in replicas]))
        records += [("ConfigRecord", 0, {"resourceType": TOPIC_RESOURCE, "resourceName": name, "name": key,
                                         "value": value}) for key, value in sorted((configs or {}).items())]
        self._commit(records)
        return topic_id

    def _default_directory(self, broker_id: int) -> uuid.UUID:
        """Kafka's ClusterControlManager.defaultDir: the broker's only log directory, if it has one."""
        dirs = self.image.brokers[broker_id].log_dirs
        if not dirs:
            return MIGRATING_DIRECTORY
        return dirs[0] if len(dirs) == 1 else UNASSIGNED_DIRECTORY

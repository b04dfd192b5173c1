"""The active controller of a single-voter quorum (Kafka's QuorumController, in miniature):
every change is a batch of metadata records appended to `__cluster_metadata-0` and then
replayed into the MetadataImage, so the log alone (with its latest snapshot) rebuilds the
controller's state on restart, and brokers fetching the log rebuild the same image.

It registers brokers (the broker epoch is the offset of the RegisterBrokerRecord; a new
registration starts fenced), unfences a broker once a heartbeat shows it caught up with the log,
fences it when its heartbeats stop for `broker.session.timeout.ms` (on the injected clock; see
`check_sessions`) or it asks to be, and creates topics (TopicRecord, then a PartitionRecord per
partition, replicas spread over the unfenced brokers). When a broker is fenced it leaves the
ISR of its partitions and loses their leadership; a broker shutting down cleanly hands them over
first (controlled shutdown). Every partition change goes through `partition_change` (Kafka's
PartitionChangeBuilder over `replication.election`'s rules): KIP-966's ELR once the
`eligible.leader.replicas.version` feature is finalized, the topic's unclean recovery strategy,
preferred and unclean elections (ElectLeaders), and an operator's `move_leader`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from logstore.clean_shutdown import NO_BROKER_EPOCH
from logstore.clock import Clock
from logstore.errors import InvalidReplicationError
from logstore.manager import refuse_reserved
from logstore.replication.assignment import assign_replicas
from logstore.replication.brokers import BrokerRegistry
from logstore.replication.election import UncleanRecoveryStrategy, isr_after_fencing
from logstore.server import error_codes as ec
from logstore.server.kraft import metadata_records as mr
from logstore.server.kraft.broker_sessions import BrokerSessions
from logstore.server.kraft.isr_change import isr_change_error
from logstore.server.kraft.metadata_image import (
    TOPIC_RESOURCE,
    MetadataImage,
    PartitionInfo,
    TopicInfo,
)
from logstore.server.kraft.metadata_log import MetadataLog
from logstore.server.kraft.partition_change import ElectionKind, ElectionPolicy, partition_change
from logstore.server.kraft.quorum_config import SESSION_TIMEOUT_MS, SNAPSHOT_RECORD_BYTES
from logstore.server.topics import TopicExistsError

PRODUCER_ID_BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
UNASSIGNED_DIRECTORY = uuid.UUID(int=0)  # DirectoryId.UNASSIGNED
MIGRATING_DIRECTORY = uuid.UUID(int=2)  # DirectoryId.MIGRATING: the broker registered no directory
MIN_INSYNC_REPLICAS = "min.insync.replicas"
UNCLEAN_LEADER_ELECTION = "unclean.leader.election.enable"
UNCLEAN_RECOVERY_STRATEGY = "unclean.recovery.strategy"
# The features UpdateFeatures changes here (metadata.version upgrades and kraft.version are not written).
UPDATABLE_FEATURES = frozenset({mr.ELIGIBLE_LEADER_REPLICAS_VERSION, "group.version", "transaction.version"})


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
                 registry: BrokerRegistry | None = None, topic_defaults: Mapping[str, object] | None = None):
        self.node_id = node_id
        self.cluster_id = cluster_id
        self._clock = clock
        self.sessions = BrokerSessions(clock, session_timeout_ms)
        self.snapshot_record_bytes = snapshot_record_bytes
        self.image = MetadataImage(registry)
        self.log = MetadataLog(data_dir, node_id, clock)
        self._bytes_at_snapshot = 0
        self._topic_defaults = dict(topic_defaults or {})
        # broker -> (log end once its controlled shutdown began, who must replay that first:
        # itself and the new leaders of what it led; the node's own broker shares the image)
        self._shutdowns: dict[int, tuple[int, set[int]]] = {}

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
        unclean = []
        if known is not None and previous_broker_epoch != known.broker_epoch \
                and self.image.eligible_leader_replicas_enabled:
            unclean = self._unclean_shutdown(broker_id)
        self._commit([*unclean, mr.register_broker(broker_id, epoch, incarnation_id, listeners, features, rack,
                                                   log_dirs)])
        self.sessions.touch(broker_id)
        return Registration(ec.NONE, epoch)

    def heartbeat(self, broker_id: int, broker_epoch: int, *, current_metadata_offset: int,
                  want_fence: bool = False, want_shut_down: bool = False) -> HeartbeatReply:
        """A broker's heartbeat: keeps its session, unfences it once its metadata offset has
        reached its registration (unless it wants to stay fenced), fences it when it asks.
        A broker that wants to shut down first gives up its leaderships and ISR places
        (controlled shutdown) and is told to shut down once it leads nothing and the live
        brokers taking over have replayed that. STALE_BROKER_EPOCH for an old registration,
        BROKER_ID_NOT_REGISTERED for none."""
        info = self.image.brokers.get(broker_id)
        if info is None:
            return HeartbeatReply(ec.BROKER_ID_NOT_REGISTERED)
        if info.broker_epoch != broker_epoch:
            return HeartbeatReply(ec.STALE_BROKER_EPOCH)
        self.sessions.touch(broker_id)
        self.sessions.caught_up_to(broker_id, current_metadata_offset)
        caught_up = current_metadata_offset >= broker_epoch
        fenced = self.image.registry.is_fenced(broker_id)
        if want_shut_down:
            return self._controlled_shutdown(broker_id, caught_up)
        if fenced and caught_up and not want_fence:
            self._commit([mr.fencing_change(broker_id, broker_epoch, mr.UNFENCE), *self._lead_leaderless(broker_id)])
        elif not fenced and want_fence:
            self._fence(broker_id)
        return HeartbeatReply(ec.NONE, is_caught_up=caught_up, is_fenced=self.image.registry.is_fenced(broker_id))

    def _controlled_shutdown(self, broker_id: int, caught_up: bool) -> HeartbeatReply:
        """Kafka's controlled shutdown: the first such heartbeat moves the broker's leaderships
        to other live ISR members and takes it out of every ISR (as fencing would, by the
        election rules), marking it in controlled shutdown; it is fenced and told to shut down
        once it leads nothing and it and the new leaders have replayed that (Kafka waits for
        every active broker; the new leaders are the ones whose knowledge keeps clients served)."""
        info = self.image.brokers[broker_id]
        if not self.image.registry.is_fenced(broker_id):
            if not info.in_controlled_shutdown:
                changes = self._leaving(broker_id)
                self._commit([*changes, mr.controlled_shutdown_change(broker_id, info.broker_epoch)])
                successors = {change[2]["leader"] for change in changes if change[2]["leader"] >= 0}
                self._shutdowns[broker_id] = (self.log.end_offset, successors | {broker_id})
            offset, brokers = self._shutdowns.get(broker_id, (0, set()))
            waiting = [b for b in brokers if b != self.node_id and self.sessions.metadata_offset(b) < offset
                       and not self.image.registry.is_fenced(b)]
            if waiting or self._leads_any(broker_id):
                return HeartbeatReply(ec.NONE, is_caught_up=caught_up, is_fenced=False)
            self._fence(broker_id)
        self._shutdowns.pop(broker_id, None)
        self.sessions.forget(broker_id)
        return HeartbeatReply(ec.NONE, is_caught_up=caught_up, is_fenced=True, should_shut_down=True)

    def metadata_fetched(self, broker_id: int, offset: int) -> None:
        """A broker fetched the metadata log at `offset`: it has replayed everything below it."""
        if broker_id in self.image.brokers:
            self.sessions.caught_up_to(broker_id, offset)

    def check_sessions(self) -> list[int]:
        """Fence every unfenced broker whose session has expired; returns their ids."""
        fenced = [b for b in self.sessions.expired() if not self.image.registry.is_fenced(b)]
        for broker_id in fenced:
            self._fence(broker_id)
        for broker_id in self.sessions.expired():
            self.sessions.forget(broker_id)
        return fenced

    def _fence(self, broker_id: int) -> None:
        """The broker leaves every ISR and leadership (`_leaving`), then it is fenced."""
        epoch = self.image.brokers[broker_id].broker_epoch
        self._commit([*self._leaving(broker_id), mr.fencing_change(broker_id, epoch, mr.FENCE)])

    def _leaving(self, broker_id: int) -> list[mr.MetadataRecord]:
        """The partition changes of the broker leaving: it leaves every ISR (with ELR off, the
        last member stays, to lead on return; with ELR on, into the ELR below min ISR) and every
        leadership, which goes where the election rules say among the other live brokers."""
        elr_on = self.image.eligible_leader_replicas_enabled

        def change(p: PartitionInfo) -> dict | None:
            if broker_id not in p.isr and p.leader != broker_id:
                return None
            kept = isr_after_fencing(p.isr, [broker_id], eligible_leader_replicas=elr_on)
            return {"isr": [r for r in p.isr if r in kept]}

        return self._changes(set(self._live()) - {broker_id}, change)

    def _lead_leaderless(self, broker_id: int) -> list[mr.MetadataRecord]:
        """Elections for the leaderless partitions the unfenced broker holds a replica of: it may
        lead from the ISR, the ELR, as last-known leader, or uncleanly, as the topic allows."""
        return self._changes(set(self._live()) | {broker_id},
                             lambda p: {} if p.leader == mr.NO_LEADER and broker_id in p.replicas else None)

    def _unclean_shutdown(self, broker_id: int) -> list[mr.MetadataRecord]:
        """KIP-966: a broker whose previous epoch is not its last registration's stopped
        uncleanly and may have lost unflushed records: it leaves every ISR and ELR."""
        return self._changes(set(self._live()) - {broker_id}, lambda p: {
            "isr": [r for r in p.isr if r != broker_id], "unclean_shutdown": [broker_id]}
            if broker_id in p.isr or broker_id in p.elr else None)

    def _changes(self, live: set[int], change: Callable[[PartitionInfo], dict | None]) -> list[mr.MetadataRecord]:
        """The PartitionChangeRecords of every partition `change` selects (giving the target ISR
        and such), leaders elected among `live` as each topic's policy says."""
        records = []
        for info, partition_id, p in self._partitions():
            options = change(p)
            if options is None:
                continue
            policy = self.policy(info.name)
            record = partition_change(info.topic_id, partition_id, p, live, policy, kind=policy.kind(), **options)
            if record is not None:
                records.append(record)
        return records

    def _partitions(self) -> list[tuple[TopicInfo, int, PartitionInfo]]:
        return [(info, partition_id, p) for info in self.image.topics.values()
                for partition_id, p in sorted(info.partitions.items())]

    def _live(self) -> list[int]:
        """Brokers that may lead or join an ISR: unfenced and not shutting down."""
        return [b for b in self.image.unfenced_brokers() if not self.image.brokers[b].in_controlled_shutdown]

    def _leads_any(self, broker_id: int) -> bool:
        return any(p.leader == broker_id for _info, _partition, p in self._partitions())

    def policy(self, topic: str) -> ElectionPolicy:
        """The topic's election settings: its configs over the cluster's defaults, and the
        finalized `eligible.leader.replicas.version`."""
        configs = self.image.configs.get((TOPIC_RESOURCE, topic), {})

        def value(key: str) -> object:
            return configs.get(key, self._topic_defaults.get(key))

        unclean = str(value(UNCLEAN_LEADER_ELECTION) or "false").strip().lower() == "true"
        return ElectionPolicy(self.image.eligible_leader_replicas_enabled, int(value(MIN_INSYNC_REPLICAS) or 1),
                              UncleanRecoveryStrategy.of(value(UNCLEAN_RECOVERY_STRATEGY),
                                                         unclean_leader_election_enable=unclean))

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
        if error == ec.NONE:
            info = self.image.topics[topic_id]
            p = info.partitions[partition_id]
            change = partition_change(topic_id, partition_id, p, self._live(), self.policy(info.name),
                                      isr=[broker for broker, _ in new_isr], recovery_state=leader_recovery_state)
            if change is not None:
                self._commit([change])
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

    # ------------------------------------------------------------------ leadership

    def move_leader(self, topic: str, partition: int, to_node: int) -> int:
        """Move the partition's leadership to `to_node`, which must be a live member of its ISR
        (or of its ELR while the ISR is empty); returns the new leader epoch (the current one
        when `to_node` leads already). Raises InvalidReplicationError for an unknown partition
        or a replica that may not lead."""
        info, p = self._partition(topic, partition)
        if p.leader == to_node:
            return p.leader_epoch
        change = partition_change(info.topic_id, partition, p, self._live(), self.policy(topic), to=to_node)
        if change is None or change[2]["leader"] != to_node:
            raise InvalidReplicationError(f"broker {to_node} may not lead {topic}-{partition}: not a live "
                                          f"in-sync replica (ISR {p.isr}, ELR {p.elr})")
        self._commit([change])
        return p.leader_epoch

    def elect_leaders(self, kind: ElectionKind, partitions: Sequence[tuple[str, int]] | None) -> dict[tuple[str, int], int]:
        """ElectLeaders: a PREFERRED or UNCLEAN election for each (topic, partition) (every
        partition when None, answering only those it elected for); the error code of each, as
        Kafka's controller answers: ELECTION_NOT_NEEDED where the preferred replica leads
        already (PREFERRED) or a leader exists (UNCLEAN), PREFERRED_LEADER_NOT_AVAILABLE or
        ELIGIBLE_LEADERS_NOT_AVAILABLE where no election can be held."""
        wanted = partitions if partitions is not None else [
            (info.name, partition_id) for info, partition_id, _p in self._partitions()]
        results, records = {}, []
        for topic, partition in wanted:
            results[(topic, partition)] = error = self._elect_one(kind, topic, partition, records)
            if partitions is None and error == ec.ELECTION_NOT_NEEDED:
                del results[(topic, partition)]
        if records:
            self._commit(records)
        return results

    def _elect_one(self, kind: ElectionKind, topic: str, partition: int, records: list) -> int:
        try:
            info, p = self._partition(topic, partition)
        except InvalidReplicationError:
            return ec.UNKNOWN_TOPIC_OR_PARTITION
        if (kind is ElectionKind.PREFERRED and p.leader == p.replicas[0]) or \
                (kind is ElectionKind.UNCLEAN and p.leader != mr.NO_LEADER):
            return ec.ELECTION_NOT_NEEDED
        change = partition_change(info.topic_id, partition, p, self._live(), self.policy(topic), kind=kind)
        if change is None or change[2]["leader"] == mr.NO_LEADER_CHANGE:
            return ec.PREFERRED_LEADER_NOT_AVAILABLE if kind is ElectionKind.PREFERRED else \
                ec.ELIGIBLE_LEADERS_NOT_AVAILABLE
        records.append(change)
        return ec.NONE

    def _partition(self, topic: str, partition: int) -> tuple[TopicInfo, PartitionInfo]:
        info = self.image.topic(topic)
        p = None if info is None else info.partitions.get(partition)
        if p is None:
            raise InvalidReplicationError(f"no partition {topic}-{partition} in the cluster")
        return info, p

    # ------------------------------------------------------------------ features

    def update_feature(self, name: str, level: int) -> None:
        """Finalize feature `name` at `level` (a FeatureLevelRecord; 0 removes it), as
        `kafka-features upgrade` does, e.g. `eligible.leader.replicas.version` 1 turns KIP-966's
        ELR on. Turning ELR off clears every partition's ELR and last-known ELR."""
        self._commit(self._feature_records(name, level))

    def _feature_records(self, name: str, level: int) -> list[mr.MetadataRecord]:
        records = [mr.feature_level(name, level)]
        if name == mr.ELIGIBLE_LEADER_REPLICAS_VERSION and level == 0:
            records += [mr.partition_change(info.topic_id, partition_id, elr=[], last_known_elr=[])
                        for info, partition_id, p in self._partitions() if p.elr or p.last_known_elr]
        return records

    def update_features(self, updates: Sequence[tuple[str, int, bool]], *,
                        validate_only: bool = False) -> dict[str, tuple[int, str | None]]:
        """UpdateFeatures: (feature, level, downgrade allowed) each; all are finalized together
        or none is. Each answers NONE or INVALID_UPDATE_VERSION (Kafka's checks: a feature this
        controller finalizes, a level every registered broker supports, no downgrade unless
        allowed; metadata.version and kraft.version do not change here)."""
        results = {name: self._feature_error(name, level, downgrade) for name, level, downgrade in updates}
        if not validate_only and all(error == ec.NONE for error, _ in results.values()):
            records = [r for name, level, _ in updates for r in self._feature_records(name, level)]
            if records:
                self._commit(records)
        return results

    def _feature_error(self, name: str, level: int, downgrade: bool) -> tuple[int, str | None]:
        if name not in UPDATABLE_FEATURES:
            return ec.INVALID_UPDATE_VERSION, f"the controller does not update feature {name}"
        if level < self.image.features.get(name, 0) and not downgrade:
            return ec.INVALID_UPDATE_VERSION, f"{name} may not go down to {level} without a downgrade type"
        for broker_id, info in sorted(self.image.brokers.items()):
            ranges = {f["name"]: (f["minSupportedVersion"], f["maxSupportedVersion"]) for f in info.features}
            low, high = ranges.get(name, (0, 0))
            if level and not low <= level <= high:
                return ec.INVALID_UPDATE_VERSION, f"broker {broker_id} does not support {name} level {level}"
        return ec.NONE, None

    # ------------------------------------------------------------------ topics

    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     configs: Mapping[str, str] | None = None) -> uuid.UUID:
        """TopicRecord, a PartitionRecord per partition (replicas over the unfenced brokers, the
        first leading, all in the ISR) and a ConfigRecord per config. Raises InvalidTopicError
        for a reserved name, TopicExistsError for a taken one, InvalidReplicationError when the unfenced brokers are
        too few or the counts are not positive."""
        refuse_reserved(name)
        UncleanRecoveryStrategy.of((configs or {}).get(UNCLEAN_RECOVERY_STRATEGY))  # InvalidConfigError
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

"""The groups of the node and their offsets, as Kafka's GroupMetadataManager and
OffsetMetadataManager keep them: loaded from `__consumer_offsets` at start-up, group records
stored, offsets committed (transactional ones on their marker), fetched, expired and deleted.
GroupCoordinator adds the rebalance protocol and the timers on top. Typed calls only."""

from __future__ import annotations

import logging

from logstore.errors import LogstoreError
from logstore.server import error_codes as ec
from logstore.server.consumer_protocol import CONSUMER_PROTOCOL_TYPE, subscribed_topics
from logstore.server.context import ServerContext
from logstore.server.coordinator_partitions import CoordinatorPartitions
from logstore.server.coordinator_records import (
    OFFSETS_TOPIC,
    OffsetAndMetadata,
    StoredGroup,
    group_record,
    offset_record,
    partition_for,
    replay_groups,
)
from logstore.server.group_metadata import (
    COMPLETING,
    DEAD,
    EMPTY,
    STABLE,
    Group,
    Member,
    expired_offsets,
    group_id_fits,
    group_tombstones,
)
from logstore.server.group_results import OffsetCommitEntry, PartitionOffset

logger = logging.getLogger("logstore.server")


class GroupStore:
    """The node's groups and their committed offsets, persisted in __consumer_offsets."""

    def __init__(self, ctx: ServerContext):
        self._ctx = ctx
        self._groups: dict[str, Group] = {}
        config = ctx.config
        # a single node coordinates every partition; a cluster's node those it leads (load on election)
        self.coordinated = CoordinatorPartitions(ctx, OFFSETS_TOPIC, config.offsets_topic_num_partitions,
                                                 config.offsets_topic_replication_factor, replay_groups,
                                                 self._install, self._unload)
        self.coordinated.load_standalone()

    def _install(self, partition: int, stored_groups: dict[str, StoredGroup]) -> None:
        """Take on the groups replayed from one __consumer_offsets partition."""
        now = self._now_ms()
        for stored in stored_groups.values():
            if stored.deleted and not stored.offsets and stored.consumer is None:
                continue
            group = Group(stored.group_id, generation=stored.generation, protocol_type=stored.protocol_type,
                          protocol=stored.protocol, leader=stored.leader, offsets=stored.offsets,
                          pending_txn=stored.pending_txn, state_timestamp=stored.state_timestamp)
            for m in stored.members:
                group.members[m.member_id] = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                                    m.session_timeout, m.rebalance_timeout,
                                                    stored.protocol_type or "", [(stored.protocol or "", m.subscription)],
                                                    now, m.assignment)
            group.state = STABLE if group.members else EMPTY  # state_timestamp: the stored last change
            if stored.consumer is not None:  # a KIP-848 group: its members' sessions start now
                group.consumer, group.protocol_type = stored.consumer, CONSUMER_PROTOCOL_TYPE
                group.state = STABLE if stored.consumer.members else EMPTY
                stored.consumer.resume(now)
            self._groups[group.group_id] = group

    def _unload(self, partition: int) -> list[Group]:
        """Forget the groups of a partition another node now leads: the removed groups."""
        count = self.coordinated.count()
        gone = [g for g in self._groups.values() if partition_for(g.group_id, count) == partition]
        for group in gone:
            del self._groups[group.group_id]
        return gone

    # ------------------------------------------------------------------ storage

    def offsets_partition(self, group_id: str) -> int:
        """The __consumer_offsets partition of `group_id` (on a single node the topic is created on first use)."""
        return self.coordinated.partition_of(group_id)

    def coordinator_error(self, group_id: str) -> int:
        """NONE where this node coordinates `group_id`, else NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS (what a group request is answered then)."""
        return self.coordinated.error(group_id)

    async def replicated(self, group_id: str) -> int:
        """After a write for `group_id`: wait until the ISR of its partition holds it (an error code)."""
        return await self.coordinated.replicated(group_id)

    def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]], now_ms: int, *,
                producer_id: int = -1, producer_epoch: int = -1) -> int:
        return self.coordinated.append(group_id, records, now_ms, producer_id=producer_id,
                                       producer_epoch=producer_epoch)

    async def _write(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> tuple[int, int]:
        """Append `records` of `group_id` and wait until the ISR of its partition holds them, as
        Kafka's coordinator appends with acks=-1: (error code, log end offset after them or -1)."""
        try:
            end = self._append(group_id, records, self._now_ms())
        except LogstoreError as exc:
            return ec.for_exception(exc), -1
        return await self.coordinated.replicated(group_id, end), end

    def _apply_offsets(self, group: Group, offsets: dict[tuple[str, int], OffsetAndMetadata | None],
                       position: int) -> None:
        """Make offsets written below `position` (None: deleted) the committed ones, unless a
        later write already applied its own (Kafka's olderThan check)."""
        if self._groups.get(group.group_id) is not group:  # deleted or unloaded meanwhile
            return
        for tp, om in offsets.items():
            if group.offset_positions.get(tp, -1) < position:
                group.offset_positions[tp] = position
                if om is None:
                    group.offsets.pop(tp, None)
                else:
                    group.offsets[tp] = om

    def _now_ms(self) -> int:
        return self._ctx.clock.time_ms()

    def _store_group(self, group: Group) -> None:
        self._append(group.group_id, [group_record(group.group_id, group.stored())], self._now_ms())

    def _group(self, group_id: str, create: bool = False) -> Group | None:
        group = self._groups.get(group_id)
        if group is None and create:
            group = self._groups[group_id] = Group(group_id, state_timestamp=self._now_ms())
        return group

    def _transition(self, group: Group, state: str) -> None:
        group.state, group.state_timestamp = state, self._now_ms()

    # ------------------------------------------------------------------ offsets

    def check_member(self, group_id: str, member_id: str, generation: int,
                     group_instance_id: str | None = None) -> int:
        """NONE if `member_id` (static as `group_instance_id`) at `generation` may commit for
        `group_id` (or a simple commit), else the error. A rebalance does not stop a member of
        the current generation: it commits what it processed before it rejoins, as in Kafka."""
        group = self._group(group_id)
        if group is not None and group.consumer is not None:  # a KIP-848 member commits at its member epoch
            return group.consumer.commit_error(member_id, generation)
        if generation < 0 and not member_id and group_instance_id is None:
            return ec.NONE if group is None or not group.members else ec.UNKNOWN_MEMBER_ID
        error = ec.UNKNOWN_MEMBER_ID if group is None else group.member_error(member_id, group_instance_id)
        if error != ec.NONE:
            return error
        if generation != group.generation:
            return ec.ILLEGAL_GENERATION
        return ec.NONE

    def commit(self, group_id: str, offsets: dict[tuple[str, int], OffsetAndMetadata], *,
               producer_id: int, producer_epoch: int) -> int:
        """Write a transaction's offsets, pending until its marker (complete_transaction); returns
        an error code. TxnOffsetCommit waits for the ISR itself (`replicated`)."""
        records = [offset_record(group_id, t, p, om) for (t, p), om in offsets.items()]
        try:
            self._append(group_id, records, self._now_ms(), producer_id=producer_id, producer_epoch=producer_epoch)
        except LogstoreError as exc:
            return ec.for_exception(exc)
        self._group(group_id, create=True).pending_txn.setdefault(producer_id, {}).update(offsets)
        return ec.NONE

    async def _commit(self, group_id: str, offsets: dict[tuple[str, int], OffsetAndMetadata]) -> int:
        """Write plain offsets and apply them once the ISR holds them, in Kafka's order: OffsetFetch
        never returns an offset a failover could lose, and a failed or timed-out commit leaves
        the committed offsets as they were."""
        before = self._groups.get(group_id)
        error, end = await self._write(group_id, [offset_record(group_id, t, p, om) for (t, p), om in offsets.items()])
        unchanged = before is None or self._groups.get(group_id) is before  # not deleted or unloaded meanwhile
        if error == ec.NONE and unchanged and self.coordinated.owns(group_id):
            self._apply_offsets(self._group(group_id, create=True), offsets, end)
        return error

    async def delete_offsets(self, group_id: str,
                             partitions: list[tuple[str, int]]) -> tuple[int, dict[tuple[str, int], int]]:
        """OffsetDelete as Kafka's coordinator rules it: (group error, error per partition).
        An Empty group loses any offsets; a consumer group only those of topics no member
        subscribes to (GROUP_SUBSCRIBED_TO_TOPIC); another non-empty group none (NON_EMPTY_GROUP).
        The offsets go, and the answer comes, once the ISR holds their tombstones."""
        if self.coordinator_error(group_id) != ec.NONE:
            return self.coordinator_error(group_id), {}
        group = self._group(group_id)
        if group is None or group.state == DEAD:
            return ec.GROUP_ID_NOT_FOUND, {}
        subscribed: frozenset[str] = frozenset()
        if group.state != EMPTY:
            if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
                return ec.NON_EMPTY_GROUP, {}
            subscribed = frozenset().union(*(subscribed_topics(m.metadata(group.protocol)) or frozenset()
                                             for m in group.members.values()))
            if group.consumer is not None:
                subscribed = frozenset(group.consumer.subscribed_names(t for t, _ in partitions))
        errors = {tp: ec.GROUP_SUBSCRIBED_TO_TOPIC if tp[0] in subscribed else ec.NONE for tp in partitions}
        deleted = [tp for tp, error in errors.items() if error == ec.NONE and tp in group.offsets]
        if not deleted:
            return await self.replicated(group_id), errors
        error, end = await self._write(group_id, [offset_record(group_id, t, p, None) for t, p in deleted])
        if error != ec.NONE:
            return error, {}
        self._apply_offsets(group, dict.fromkeys(deleted), end)
        return ec.NONE, errors

    def complete_transaction(self, producer_id: int, committed: bool) -> None:
        """Apply or drop the offsets `producer_id` committed in its transaction (after the marker,
        so a plain commit written before it and acknowledged later does not undo them)."""
        for group in self._groups.values():
            pending = group.pending_txn.pop(producer_id, None)
            if pending and committed:
                log = self.coordinated.log(self.offsets_partition(group.group_id))
                self._apply_offsets(group, pending, 0 if log is None else log.log_end_offset)

    def offsets_to_commit(self, entries: list[OffsetCommitEntry]) -> tuple[dict[tuple[str, int], OffsetAndMetadata],
                                                                           dict[tuple[str, int], int]]:
        """The offsets of an (Txn)OffsetCommit that may be written, and the error of each one
        that may not, as Kafka refuses them: UNKNOWN_TOPIC_OR_PARTITION for a partition the
        node does not have, OFFSET_METADATA_TOO_LARGE past offset.metadata.max.bytes."""
        now = self._now_ms()
        offsets, errors = {}, {}
        for e in entries:
            tp = (e.topic, e.partition)
            metadata = e.metadata or ""
            if not self._ctx.partition_exists(*tp):
                errors[tp] = ec.UNKNOWN_TOPIC_OR_PARTITION
            elif len(metadata) > self._ctx.config.offset_metadata_max_bytes:
                errors[tp] = ec.OFFSET_METADATA_TOO_LARGE
            else:
                offsets[tp] = OffsetAndMetadata(e.offset, e.leader_epoch, metadata, now)
        return offsets, errors

    async def commit_offsets(self, group_id: str, member_id: str, generation: int, instance_id: str | None,
                             entries: list[OffsetCommitEntry]) -> tuple[int, dict[tuple[str, int], int]]:
        """OffsetCommit: the error of the whole commit and those of single partitions, answered
        once the ISR holds the commit."""
        offsets, errors = self.offsets_to_commit(entries)
        group = self._group(group_id)
        if not group_id_fits(group_id):  # an empty id is a simple commit, as in Kafka
            error = ec.INVALID_GROUP_ID
        elif self.coordinator_error(group_id) != ec.NONE:
            error = self.coordinator_error(group_id)
        else:
            error = self.check_member(group_id, member_id, generation, instance_id)
        if error == ec.NONE and group is not None and group.state == COMPLETING:
            error = ec.REBALANCE_IN_PROGRESS  # joined the new generation but not yet given its partitions
        if error == ec.NONE:
            error = await self._commit(group_id, offsets) if offsets else await self.replicated(group_id)
        return error, errors

    def fetch_member_error(self, group_id: str, member_id: str | None, member_epoch: int) -> int:
        """OffsetFetch v9's check of the member that asks: a consumer group's member must be at
        its member epoch (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID); others are not checked, as in Kafka."""
        group = self._group(group_id)
        return ec.NONE if group is None or group.consumer is None else group.consumer.fetch_error(member_id,
                                                                                                 member_epoch)

    def fetch_offsets(self, group_id: str, wanted: dict[str, list[int]] | None,
                      require_stable: bool) -> dict[str, list[PartitionOffset]]:
        """OffsetFetch of `wanted` partitions by topic (None: every committed one). With
        `require_stable`, a partition with a transactional commit pending is UNSTABLE_OFFSET_COMMIT."""
        group = self._group(group_id)
        committed = group.offsets if group else {}
        pending = {tp for txn in group.pending_txn.values() for tp in txn} if group else set()
        if wanted is None:
            wanted = {}
            for t, p in sorted(committed):
                wanted.setdefault(t, []).append(p)
        found = {}
        for name, partitions in wanted.items():
            entries = []
            for p in partitions:
                om = committed.get((name, p))
                error = ec.UNSTABLE_OFFSET_COMMIT if require_stable and (name, p) in pending else ec.NONE
                entries.append(PartitionOffset(p, om.offset if om and error == ec.NONE else -1,
                                               om.leader_epoch if om else -1, om.metadata if om else "", error))
            found[name] = entries
        return found

    def expire_offsets(self, now_ms: int) -> int:
        """Drop committed offsets older than `offsets.retention.minutes` (group_metadata's
        expired_offsets). Tombstones go to __consumer_offsets; an Empty group left without
        offsets is Dead and deleted. Returns the number of offsets removed."""
        removed = 0
        retention_ms = self._ctx.config.offsets_retention_minutes * 60_000
        for group in list(self._groups.values()):
            expired = expired_offsets(group, now_ms, retention_ms)
            dead = group.state == EMPTY and not group.members and not group.pending_members and \
                len(expired) == len(group.offsets) and not any(group.pending_txn.values())
            if not expired and not dead:
                continue
            records = [offset_record(group.group_id, t, p, None) for t, p in expired]
            if dead:
                records += group_tombstones(group)
            try:
                end = self._append(group.group_id, records, now_ms)
            except LogstoreError as exc:
                logger.warning("expiring offsets of group %r failed, tried again at the next check: %s",
                               group.group_id, exc)
                continue
            self._apply_offsets(group, dict.fromkeys(expired), end)
            removed += len(expired)
            if dead:
                self._transition(group, DEAD)
                del self._groups[group.group_id]
        return removed

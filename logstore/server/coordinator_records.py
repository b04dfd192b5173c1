"""The coordinators' persistent state as typed records, in Kafka's bytes: OffsetCommit and
GroupMetadata records in `__consumer_offsets`, TransactionLog records in `__transaction_state`
(Kafka's GroupMetadataManager / TransactionStateManager storage), written through the engine
and replayed at start-up. Transactional offset commits become visible with their COMMIT
marker, as in Kafka. The coordinators hold and decide; this module alone knows the records."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from logstore.internal_topics.coordinator_schemas import OFFSETS_TOPIC, TRANSACTION_TOPIC
from logstore.internal_topics.records import (
    decode_offsets_record,
    decode_transaction_log_record,
    encode_offsets_record,
    encode_transaction_log_record,
)
from logstore.log import Log
from logstore.records import Record, build_batch
from logstore.records.control import COMMIT, CONTROL_KEY
from logstore.server.consumer_group import ConsumerGroup
from logstore.server.consumer_group_storage import CONSUMER_RECORD_TYPES, apply_record, record_type

OFFSET_COMMIT_VERSION = 3  # the value version Kafka 3.x writes without a flexible feature
GROUP_METADATA_VERSION = 3
TXN_LOG_VERSION = 0
READ_CHUNK_BYTES = 8 * 1024 * 1024


def java_string_hash(text: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed int32."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str, partitions: int) -> int:
    """The internal-topic partition of a group or transactional id (Kafka's Utils.abs(hashCode) % n)."""
    return (java_string_hash(key) & 0x7FFFFFFF) % partitions


@dataclass
class OffsetAndMetadata:
    """A committed offset as __consumer_offsets keeps it."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # only in version 1 records: the offset's own expiry time


@dataclass
class StoredMember:
    """A member as the GroupMetadata record keeps it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass
class GroupMetadata:
    """A group as the GroupMetadata record keeps it (no state: members mean Stable, none Empty)."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    state_timestamp: int
    members: list[StoredMember]


@dataclass
class TxnMetadata:
    """One transactional id's producer and its current transaction, as a TransactionLog record
    keeps it; `state` is Kafka's TransactionState code (EMPTY, ONGOING, ...)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int = 0
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    update_ms: int = -1


@dataclass
class StoredGroup:
    """What replaying __consumer_offsets tells about one group."""

    group_id: str
    protocol_type: str | None = None
    generation: int = 0
    protocol: str | None = None
    leader: str | None = None
    members: list[StoredMember] = field(default_factory=list)
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    pending_txn: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = field(default_factory=dict)
    state_timestamp: int = -1
    deleted: bool = False
    consumer: ConsumerGroup | None = None  # a KIP-848 group's state, from its own records


def offset_record(group: str, topic: str, partition: int, value: OffsetAndMetadata | None) -> tuple[bytes, bytes | None]:
    """The (key, value) of an OffsetCommit record; value None writes a tombstone."""
    fields = None if value is None else {"offset": value.offset, "leaderEpoch": value.leader_epoch,
                                         "metadata": value.metadata, "commitTimestamp": value.commit_timestamp}
    return encode_offsets_record("OffsetCommit", {"group": group, "topic": topic, "partition": partition},
                                 OFFSET_COMMIT_VERSION, fields)


def group_record(group: str, value: GroupMetadata | None) -> tuple[bytes, bytes | None]:
    """The (key, value) of a GroupMetadata record; value None writes the group's tombstone."""
    if value is None:
        return encode_offsets_record("GroupMetadata", {"group": group}, None, None)
    fields = {"protocolType": value.protocol_type, "generation": value.generation, "protocol": value.protocol,
              "leader": value.leader, "currentStateTimestamp": value.state_timestamp,
              "members": [{"memberId": m.member_id, "groupInstanceId": m.group_instance_id, "clientId": m.client_id,
                           "clientHost": m.client_host, "rebalanceTimeout": m.rebalance_timeout,
                           "sessionTimeout": m.session_timeout, "subscription": m.subscription,
                           "assignment": m.assignment} for m in value.members]}
    return encode_offsets_record("GroupMetadata", {"group": group}, GROUP_METADATA_VERSION, fields)


def transaction_record(txn: TxnMetadata) -> tuple[bytes, bytes]:
    """The (key, value) of a TransactionLog record of `txn` (its partitions grouped by topic)."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(txn.partitions):
        by_topic.setdefault(topic, []).append(partition)
    return encode_transaction_log_record({"transactionalId": txn.transactional_id}, TXN_LOG_VERSION, {
        "producerId": txn.producer_id, "producerEpoch": txn.producer_epoch,
        "transactionTimeoutMs": txn.timeout_ms, "transactionStatus": txn.state,
        "transactionPartitions": [{"topic": t, "partitionIds": ps} for t, ps in by_topic.items()],
        "transactionLastUpdateTimestampMs": txn.update_ms, "transactionStartTimestampMs": txn.start_ms})


def append_records(log: Log, records: list[tuple[bytes, bytes | None]], now_ms: int, *,
                   producer_id: int = -1, producer_epoch: int = -1, leader_epoch: int = 0) -> None:
    """Append coordinator records as one batch (transactional when a producer id is given),
    stamped with the partition's `leader_epoch`."""
    items = [Record(i, now_ms, key, value) for i, (key, value) in enumerate(records)]
    if producer_id < 0:
        log.append(items, origin="coordinator", leader_epoch=leader_epoch)
        return
    batch = build_batch(items, producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=0,
                        is_transactional=True)
    log.append(bytearray(batch), origin="coordinator", leader_epoch=leader_epoch)


def _apply(groups: dict[str, StoredGroup], key: bytes, value: bytes | None, producer_id: int = -1) -> None:
    record = decode_offsets_record(key, value)
    fields: dict[str, Any] = record.key
    group = groups.setdefault(fields["group"], StoredGroup(fields["group"]))
    if record.name in ("OffsetCommit", "LegacyOffsetCommit"):
        tp = (fields["topic"], fields["partition"])
        offsets = group.offsets if producer_id < 0 else group.pending_txn.setdefault(producer_id, {})
        if record.value is None:
            offsets.pop(tp, None)
            return
        v = record.value
        offsets[tp] = OffsetAndMetadata(v["offset"], v.get("leaderEpoch", -1), v["metadata"],
                                        v["commitTimestamp"], v.get("expireTimestamp", -1))
        group.deleted = False
    elif record.name == "GroupMetadata":
        if record.value is None:  # the group is gone; offsets have tombstones of their own
            groups[group.group_id] = StoredGroup(group.group_id, offsets=group.offsets,
                                                 pending_txn=group.pending_txn, deleted=True)
            return
        v = record.value
        group.deleted = False
        group.protocol_type, group.generation = v["protocolType"], v["generation"]
        group.protocol, group.leader = v["protocol"], v["leader"]
        group.state_timestamp = v.get("currentStateTimestamp", -1)
        group.members = [StoredMember(m["memberId"], m.get("groupInstanceId"), m["clientId"], m["clientHost"],
                                      m.get("rebalanceTimeout", m["sessionTimeout"]), m["sessionTimeout"],
                                      m["subscription"], m["assignment"]) for m in v["members"]]


def _batches(log: Log):
    """Every batch of `log`, from its log start to its end, read in chunks."""
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        batches = list(log.read(offset, READ_CHUNK_BYTES).batches())
        if not batches:
            return
        for batch in batches:
            offset = batch.next_offset
            yield batch


def replay_transactions(log: Log) -> dict[str, TxnMetadata]:
    """Every transactional id's last state in one __transaction_state partition (a tombstone
    forgets the id)."""
    txns: dict[str, TxnMetadata] = {}
    for batch in _batches(log):
        if batch.is_control:
            continue
        for r in batch.records():
            record = decode_transaction_log_record(r.key, r.value)
            txn_id = record.key["transactionalId"]
            if record.value is None:
                txns.pop(txn_id, None)
                continue
            v = record.value
            parts = {(t["topic"], p) for t in v["transactionPartitions"] or [] for p in t["partitionIds"]}
            txns[txn_id] = TxnMetadata(txn_id, v["producerId"], v["producerEpoch"], v["transactionTimeoutMs"],
                                       v["transactionStatus"], parts, v["transactionStartTimestampMs"],
                                       v["transactionLastUpdateTimestampMs"])
    return txns


def replay_groups(log: Log) -> dict[str, StoredGroup]:
    """Every group's state in one __consumer_offsets partition, from its log start to its end;
    offsets of transactions without a marker yet stay pending under their producer id, and a
    consumer group's records (KIP-848) make its `consumer` state."""
    groups: dict[str, StoredGroup] = {}
    consumer: dict[str, ConsumerGroup | None] = {}
    pending: dict[int, list[tuple[bytes, bytes | None]]] = {}
    for batch in _batches(log):
        records = batch.records()
        if batch.is_control:
            kept = pending.pop(batch.producer_id, [])
            if records and records[0].key is not None and CONTROL_KEY.unpack_from(records[0].key)[1] == COMMIT:
                for key, value in kept:
                    _apply(groups, key, value)
        elif batch.is_transactional:
            pending.setdefault(batch.producer_id, []).extend((r.key, r.value) for r in records)
        else:
            for r in records:
                if r.key is None:
                    continue
                if record_type(r.key) in CONSUMER_RECORD_TYPES:  # a KIP-848 group's record
                    apply_record(consumer, r.key, r.value)
                else:
                    _apply(groups, r.key, r.value)
    for producer_id, records in pending.items():
        for key, value in records:
            if key is not None:
                _apply(groups, key, value, producer_id)
    for group_id, state in consumer.items():
        if state is not None:
            groups.setdefault(group_id, StoredGroup(group_id)).consumer = state
    return groups


__all__ = ["OFFSETS_TOPIC", "TRANSACTION_TOPIC", "GroupMetadata", "OffsetAndMetadata", "StoredGroup", "StoredMember",
           "TxnMetadata", "append_records", "group_record", "offset_record", "partition_for", "replay_groups",
           "replay_transactions", "transaction_record"]

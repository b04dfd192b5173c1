"""Kafka DumpLogSegments-compatible output for the files beside a segment's batches: offset
and time indexes (with the tool's sanity checks and reports), transaction indexes, producer
snapshots, leader-epoch and offset checkpoints. Pure, as `logstore.tools.dump`: bytes or
decoded values in, strings, dicts or decoded entries out. Layouts: docs/FORMAT.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from index.offset_index import OFFSET_INDEX_DTYPE
from index.time_index import TIME_INDEX_DTYPE
from logstore.errors import CorruptSnapshotError
from logstore.producer_append import decrement_sequence
from logstore.producer_snapshot import (
    SNAPSHOT_COUNT_PAST_END,
    SNAPSHOT_NEGATIVE_COUNT,
    SNAPSHOT_TRUNCATED,
    SNAPSHOT_UNKNOWN_VERSION,
    read_snapshot_rows,
)
from logstore.tools.dump import optional_long
from logstore.txn_index import parse_aborted_txns

# The names Kafka's snapshot schema gives the fields producer_snapshot names otherwise.
SNAPSHOT_KAFKA_NAMES = {"count": "producer_entries", "producer_epoch": "epoch"}
BUFFER_UNDERFLOW = "java.nio.BufferUnderflowException"


@dataclass(frozen=True, slots=True)
class TxnIndexEntry:
    """One `.txnindex` entry as stored, its version included (txn_index.AbortedTxn leaves it out)."""

    version: int
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


@dataclass(frozen=True, slots=True)
class ProducerSnapshotEntry:
    """One producer of a `.snapshot` file, as Kafka's ProducerStateManager.readSnapshot sees it."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int

    @property
    def first_sequence(self) -> int:
        """The first sequence of the producer's last batch (Kafka's decrementSequence)."""
        return decrement_sequence(self.last_sequence, self.offset_delta)



def offset_index_line(offset: int, position: int) -> str:
    """One `.index` entry."""
    return f"offset: {offset} position: {position}"


def time_index_line(timestamp: int, offset: int) -> str:
    """One `.timeindex` entry."""
    return f"timestamp: {timestamp} offset: {offset}"


def aborted_txn_line(txn: TxnIndexEntry) -> str:
    """One `.txnindex` entry."""
    return (
        f"version: {txn.version} producerId: {txn.producer_id} firstOffset: {txn.first_offset}"
        f" lastOffset: {txn.last_offset} lastStableOffset: {txn.last_stable_offset}"
    )


def aborted_txn_json(txn: TxnIndexEntry) -> dict[str, Any]:
    """The `--json` object of one `.txnindex` entry."""
    return {
        "type": "aborted_txn",
        "version": txn.version,
        "producerId": txn.producer_id,
        "firstOffset": txn.first_offset,
        "lastOffset": txn.last_offset,
        "lastStableOffset": txn.last_stable_offset,
    }


def snapshot_entry_line(entry: ProducerSnapshotEntry) -> str:
    """One producer of a `.snapshot` (Kafka prints the last batch only when lastOffset >= 0)."""
    current_txn = entry.current_txn_first_offset if entry.current_txn_first_offset >= 0 else None
    line = (
        f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch}"
        f" coordinatorEpoch: {entry.coordinator_epoch}"
        f" currentTxnFirstOffset: {optional_long(current_txn)} lastTimestamp: {entry.timestamp} "
    )
    if entry.last_offset >= 0:
        line += (
            f"firstSequence: {entry.first_sequence} lastSequence: {entry.last_sequence}"
            f" lastOffset: {entry.last_offset} offsetDelta: {entry.offset_delta}"
            f" timestamp: {entry.timestamp}"
        )
    return line


def snapshot_entry_json(entry: ProducerSnapshotEntry) -> dict[str, Any]:
    """The `--json` object of one producer in a `.snapshot`."""
    obj: dict[str, Any] = {
        "type": "producer",
        "producerId": entry.producer_id,
        "producerEpoch": entry.producer_epoch,
        "coordinatorEpoch": entry.coordinator_epoch,
        "currentTxnFirstOffset": entry.current_txn_first_offset if entry.current_txn_first_offset >= 0 else None,
        "lastTimestamp": entry.timestamp,
    }
    if entry.last_offset >= 0:
        obj.update(
            firstSequence=entry.first_sequence,
            lastSequence=entry.last_sequence,
            lastOffset=entry.last_offset,
            offsetDelta=entry.offset_delta,
            timestamp=entry.timestamp,
        )
    return obj


def leader_epoch_line(epoch: int, start_offset: int) -> str:
    """One `leader-epoch-checkpoint` entry (Kafka's tool does not dump these files)."""
    return f"epoch: {epoch} startOffset: {start_offset}"


def offset_checkpoint_line(topic: str, partition: int, offset: int) -> str:
    """One entry of a data-directory offset checkpoint (Kafka's tool does not dump these)."""
    return f"topic: {topic} partition: {partition} offset: {offset}"


def read_offset_index(data: bytes | memoryview, base_offset: int) -> tuple[np.ndarray, np.ndarray]:
    """Absolute offsets and positions of every 8-byte slot (a partial last slot is ignored)."""
    slots = np.frombuffer(data, dtype=OFFSET_INDEX_DTYPE, count=len(data) // OFFSET_INDEX_DTYPE.itemsize)
    return slots["relative_offset"].astype(np.int64) + base_offset, slots["position"].astype(np.int64)


def read_time_index(data: bytes | memoryview, base_offset: int) -> tuple[np.ndarray, np.ndarray]:
    """Timestamps and absolute offsets of every 12-byte slot (a partial last slot is ignored)."""
    slots = np.frombuffer(data, dtype=TIME_INDEX_DTYPE, count=len(data) // TIME_INDEX_DTYPE.itemsize)
    return slots["timestamp"].astype(np.int64), slots["relative_offset"].astype(np.int64) + base_offset


def offset_index_sanity_error(offsets: np.ndarray, length: int, base_offset: int, path: str) -> str | None:
    """Kafka's OffsetIndex.sanityCheck message for an index that fails it, else None."""
    if len(offsets) and int(offsets[-1]) < base_offset:
        return (
            f"Corrupt index found, index file {path} has non-zero size but the last offset is "
            f"{int(offsets[-1])} which is less than the base offset {base_offset}"
        )
    if length % OFFSET_INDEX_DTYPE.itemsize:
        return (
            f"Index file {path} is corrupt, found {length} bytes which is neither positive nor "
            f"a multiple of {OFFSET_INDEX_DTYPE.itemsize}"
        )
    return None


def time_index_sanity_error(
    timestamps: np.ndarray, offsets: np.ndarray, length: int, base_offset: int, path: str
) -> str | None:
    """Kafka's TimeIndex.sanityCheck message for a time index that fails it, else None."""
    if len(timestamps) and int(timestamps[-1]) < int(timestamps[0]):
        return (
            f"Corrupt time index found, time index file ({path}) has non-zero size but the last "
            f"timestamp is {int(timestamps[-1])} which is less than the first timestamp {int(timestamps[0])}"
        )
    if len(offsets) and int(offsets[-1]) < base_offset:
        return (
            f"Corrupt time index found, time index file ({path}) has non-zero size but the last "
            f"offset is {int(offsets[-1])} which is less than the first offset {base_offset}"
        )
    if length % TIME_INDEX_DTYPE.itemsize:
        return (
            f"Time index file {path} is corrupt, found {length} bytes which is neither positive "
            f"nor a multiple of {TIME_INDEX_DTYPE.itemsize}"
        )
    return None


def sparse_entry_count(offsets: np.ndarray, base_offset: int) -> int:
    """Slots before the first zero-filled one (a slot after the first holding the base offset).

    Kafka's tool stops there: a preallocated index left by a crash is zero-filled at the end.
    """
    if len(offsets) <= 1:
        return len(offsets)
    zero = np.flatnonzero(offsets[1:] == base_offset)
    return int(zero[0]) + 1 if len(zero) else len(offsets)


def lookup_position(offsets: np.ndarray, positions: np.ndarray, target: int) -> int:
    """Position of the largest indexed offset <= target, or 0 (the segment start)."""
    slot = int(np.searchsorted(offsets, target, side="right")) - 1
    return int(positions[slot]) if slot >= 0 else 0


def read_aborted_txns(data: bytes | memoryview, path: str) -> list[TxnIndexEntry]:
    """Every whole 34-byte `.txnindex` entry (txn_index's parser); raises CorruptTxnIndexError
    (a CorruptRecordError) with Kafka's message on an unknown version."""
    entries = parse_aborted_txns(data, path)
    return [TxnIndexEntry(*row) for row in entries.tolist()]


def kafka_snapshot_message(error: CorruptSnapshotError) -> str:
    """Kafka's text for a snapshot that producer_snapshot.read_snapshot_rows refused."""
    facts = error.facts
    schema = "Snapshot failed schema validation: Error reading field "
    if error.reason == SNAPSHOT_TRUNCATED and "field" in facts:
        return f"{schema}'{SNAPSHOT_KAFKA_NAMES.get(facts['field'], facts['field'])}': {BUFFER_UNDERFLOW}"
    if error.reason == SNAPSHOT_TRUNCATED:
        field = SNAPSHOT_KAFKA_NAMES.get(facts["entry_field"], facts["entry_field"])
        return f"{schema}'producer_entries': Error reading field '{field}': {BUFFER_UNDERFLOW}"
    if error.reason == SNAPSHOT_NEGATIVE_COUNT:
        return f"{schema}'producer_entries': Array size {facts['count']} cannot be negative"
    if error.reason == SNAPSHOT_COUNT_PAST_END:
        return (f"{schema}'producer_entries': Error reading array of size {facts['count']},"
                f" only {facts['available']} bytes available")
    if error.reason == SNAPSHOT_UNKNOWN_VERSION:
        return f"Snapshot contained an unknown file version {facts['version']}"
    return (f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {facts['stored']}."
            f" Computed crc: {facts['computed']}")


def read_producer_snapshot(data: bytes | memoryview) -> list[ProducerSnapshotEntry]:
    """Decode a producer `.snapshot` as Kafka does; raises CorruptSnapshotError with Kafka's message."""
    try:
        rows = read_snapshot_rows(data, exact=False)
    except CorruptSnapshotError as exc:
        raise CorruptSnapshotError(kafka_snapshot_message(exc), reason=exc.reason, facts=exc.facts,
                                   position=exc.position) from exc
    return [ProducerSnapshotEntry(*row) for row in rows.tolist()]


def index_mismatch_report(path: str, mismatches: Sequence[tuple[int, int]]) -> list[str]:
    """Kafka's stderr report of offset-index entries that do not point at their batch."""
    return [f"Mismatches in :{path}"] + [
        f"  Index offset: {index_offset}, log offset: {log_offset}"
        for index_offset, log_offset in reversed(mismatches)
    ]


def time_index_report(
    path: str,
    mismatches: Sequence[tuple[int, int]],
    out_of_order: Sequence[tuple[int, int]],
    not_found: Sequence[tuple[int, int]],
) -> list[str]:
    """Kafka's stderr report of time-index problems, in Kafka's order."""
    lines = []
    if mismatches:
        lines.append(f"Found timestamp mismatch in :{path}")
        lines += [f"  Index timestamp: {a}, log timestamp: {b}" for a, b in mismatches]
    if out_of_order:
        lines.append(f"Found out of order timestamp in :{path}")
        lines += [f"  Index timestamp: {a}, Previously indexed timestamp: {b}" for a, b in out_of_order]
    if not_found:
        lines.append("The following indexed offsets are not found in the log.")
        lines += [f"Indexed offset: {a}, found log offset: {b}" for a, b in not_found]
    return lines


def non_consecutive_report(path: str, pairs: Sequence[tuple[int, int]]) -> list[str]:
    """Kafka's stderr report of record offsets that skip (normal after compaction)."""
    return [f"Non-consecutive offsets in {path}"] + [
        f"  {first} is followed by {second}" for first, second in reversed(pairs)
    ]

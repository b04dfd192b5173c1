"""Producer state: idempotent-producer sequences, producer epochs and open transactions, as
Kafka's ProducerStateManager keeps them, with `.snapshot` files in Kafka's format
(FORMAT.md "Producer-state snapshot").

The Log drives it per batch, never per record:

    analysis = psm.analyze([BatchInfo.from_header(h, marker) ...], origin)  # validates, no mutation
    if analysis.duplicate: answer with its offsets, write nothing
    ... write the batches ...
    psm.apply(analysis, txn_index, next_offset)   # commit producer state, index aborted txns

Recovery replays batches with `load_batch` (per segment) or `rebuild` (past the newest snapshot).
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Protocol

import numpy as np
from crc32c import crc32c

from logstore.checkpoint import atomic_write
from logstore.clock import SystemClock
from logstore.errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
    UnknownProducerIdError,
)
from logstore.log_files import DELETED_SUFFIX, SNAPSHOT_SUFFIX, offset_prefix, segment_file_name
from logstore.records import RecordBatch, parse_control_record
from logstore.records.control import ABORT
from logstore.records.header import (
    CONTROL_BIT,
    INT32_MAX,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TRANSACTIONAL_BIT,
)
from logstore.txn_index import AbortedTxn, TransactionIndex

log = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5  # Kafka keeps the metadata of each producer's last five batches
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # broker's producer.id.expiration.ms

ORIGIN_CLIENT = "client"
ORIGIN_COORDINATOR = "coordinator"
ORIGIN_REPLICATION = "replication"
ORIGINS = (ORIGIN_CLIENT, ORIGIN_COORDINATOR, ORIGIN_REPLICATION)

SNAPSHOT_VERSION = 1
# FORMAT.md: int16 version, uint32 crc (CRC-32C of every byte after it), int32 entry count,
# then 46-byte entries; all big-endian.
SNAPSHOT_HEADER_DTYPE = np.dtype([("version", ">i2"), ("crc", ">u4"), ("count", ">i4")])
SNAPSHOT_ENTRY_DTYPE = np.dtype(
    [
        ("producer_id", ">i8"),
        ("producer_epoch", ">i2"),
        ("last_sequence", ">i4"),
        ("last_offset", ">i8"),
        ("offset_delta", ">i4"),
        ("timestamp", ">i8"),
        ("coordinator_epoch", ">i4"),
        ("current_txn_first_offset", ">i8"),
    ]
)
SNAPSHOT_HEADER_SIZE = SNAPSHOT_HEADER_DTYPE.itemsize  # 10
SNAPSHOT_ENTRY_SIZE = SNAPSHOT_ENTRY_DTYPE.itemsize  # 46
SNAPSHOT_CRC_END = 6  # the CRC covers bytes [6, end)


# ---- sequence arithmetic (sequences wrap from INT32_MAX to 0) -----------------------------


def increment_sequence(sequence: int, increment: int) -> int:
    """`sequence + increment`, wrapping past INT32_MAX to 0."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    """`sequence - decrement`, wrapping below 0 to INT32_MAX."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


# ---- value types ---------------------------------------------------------------------------


class EndTxnMarker(NamedTuple):
    """The payload of a COMMIT/ABORT control record."""

    control_type: int  # records.control's ABORT or COMMIT
    coordinator_epoch: int

    @property
    def is_abort(self) -> bool:
        return self.control_type == ABORT


class BatchHeaderLike(Protocol):
    """The batch header fields producer state needs (logstore.records.BatchHeader has them)."""

    base_offset: int
    last_offset_delta: int
    attributes: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int


class BatchInfo(NamedTuple):
    """One batch as producer state sees it. `marker` is the end-transaction marker of a
    control batch (None for data batches and for an empty control batch)."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    is_transactional: bool = False
    is_control: bool = False
    marker: EndTxnMarker | None = None

    @classmethod
    def from_header(cls, header: BatchHeaderLike, marker: EndTxnMarker | None = None) -> BatchInfo:
        """Build from a batch header (offsets as assigned) and, for control batches, its marker."""
        return cls(
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            header.base_offset,
            header.base_offset + header.last_offset_delta,
            header.max_timestamp,
            bool(header.attributes & TRANSACTIONAL_BIT),
            bool(header.attributes & CONTROL_BIT),
            marker,
        )

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        """The batch's last sequence (NO_SEQUENCE when it has none)."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset - self.base_offset)


def end_txn_marker(batch: RecordBatch) -> tuple[EndTxnMarker, int] | None:
    """The COMMIT/ABORT marker of a control batch and the marker record's timestamp, or None
    for an empty control batch. Raises InvalidRecordError for another control record type."""
    records = batch.records()
    if not records:
        return None
    control = parse_control_record(records[0])
    if control.kind not in ("commit", "abort"):
        raise InvalidRecordError(
            f"control batch at offset {batch.base_offset} of producer {batch.producer_id} holds "
            f"control record type {control.type_id}, not an end-transaction marker"
        )
    return EndTxnMarker(control.type_id, control.coordinator_epoch), records[0].timestamp


def batch_info(batch: RecordBatch) -> BatchInfo:
    """The producer-state view of a record batch; decodes only a producer's control batch."""
    info = BatchInfo.from_header(batch)
    if info.is_control and info.has_producer_id:
        found = end_txn_marker(batch)
        if found is not None:
            marker, timestamp = found
            info = info._replace(marker=marker, max_timestamp=timestamp)
    return info


def committed_batches(
    batches: Iterable[RecordBatch], aborted: Iterable[AbortedTxn]
) -> Iterator[RecordBatch]:
    """The data batches a READ_COMMITTED consumer keeps: drops control batches and every
    transactional batch of a producer between an aborted transaction's first offset and its
    ABORT marker (Kafka's consumer-side filter)."""
    pending = sorted(aborted, key=lambda t: t.first_offset)
    next_txn = 0
    aborting: set[int] = set()
    for batch in batches:
        if batch.producer_id >= 0:
            while next_txn < len(pending) and pending[next_txn].first_offset <= batch.last_offset:
                aborting.add(pending[next_txn].producer_id)
                next_txn += 1
            if batch.is_control:
                found = end_txn_marker(batch)
                if found is not None and found[0].is_abort:
                    aborting.discard(batch.producer_id)
            elif batch.is_transactional and batch.producer_id in aborting:
                continue
        if not batch.is_control:
            yield batch


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """What is remembered of one of a producer's recent batches."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker at `last_offset`."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(slots=True)
class TxnMetadata:
    """An ongoing (or completed but not yet replicated) transaction."""

    producer_id: int
    first_offset: int
    last_offset: int | None = None


@dataclass(slots=True)
class ProducerStateEntry:
    """Per producer id: epoch, coordinator epoch, the last batches (newest last), last
    timestamp and the first offset of its open transaction (None when none)."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = NO_TIMESTAMP
    current_txn_first_offset: int | None = None
    batch_metadata: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )

    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self.batch_metadata[0].first_offset if self.batch_metadata else -1

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    def without_batches(self) -> ProducerStateEntry:
        """A copy with the same epochs, timestamp and open transaction but no batches."""
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            self.coordinator_epoch,
            self.last_timestamp,
            self.current_txn_first_offset,
        )

    def maybe_update_producer_epoch(self, producer_epoch: int) -> bool:
        """Adopt a new epoch, forgetting the batches of the old one; True if it changed."""
        if self.producer_epoch != producer_epoch:
            self.batch_metadata.clear()
            self.producer_epoch = producer_epoch
            return True
        return False

    def add_batch(
        self,
        producer_epoch: int,
        last_seq: int,
        last_offset: int,
        offset_delta: int,
        timestamp: int,
    ) -> None:
        """Remember a batch (the oldest of five is dropped)."""
        self.maybe_update_producer_epoch(producer_epoch)
        self.batch_metadata.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def update(self, nxt: ProducerStateEntry) -> None:
        """Merge the result of an append (`nxt`) into this entry."""
        self.maybe_update_producer_epoch(nxt.producer_epoch)
        self.batch_metadata.extend(nxt.batch_metadata)
        self.coordinator_epoch = nxt.coordinator_epoch
        self.current_txn_first_offset = nxt.current_txn_first_offset
        self.last_timestamp = nxt.last_timestamp

    def end_transaction(self, producer_epoch: int, coordinator_epoch: int, timestamp: int) -> None:
        """State after a COMMIT/ABORT marker: no open transaction."""
        self.maybe_update_producer_epoch(producer_epoch)
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = None
        self.last_timestamp = timestamp

    def find_duplicate_batch(
        self, producer_epoch: int, first_seq: int, last_seq: int
    ) -> BatchMetadata | None:
        """The remembered batch with exactly this epoch and sequence range, if any."""
        if producer_epoch != self.producer_epoch:
            return None
        for meta in self.batch_metadata:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return meta
        return None


# ---- validation of one producer's batches within an append ---------------------------------


class ProducerAppendInfo:
    """Validates one producer's batches of an append against its state before the append and
    accumulates the resulting entry and the transactions it starts (Kafka's ProducerAppendInfo)."""

    def __init__(self, producer_id: int, current_entry: ProducerStateEntry, origin: str):
        if origin not in ORIGINS:
            raise ValueError(f"origin must be one of {ORIGINS}, not {origin!r}")
        self.producer_id = producer_id
        self.origin = origin
        self.current_entry = current_entry
        self.updated_entry = current_entry.without_batches()
        self.started_transactions: list[TxnMetadata] = []

    def _check_producer_epoch(self, producer_epoch: int, offset: int) -> None:
        current = self.updated_entry.producer_epoch
        if producer_epoch < current:
            message = (
                f"epoch of producer {self.producer_id} at offset {offset} is {producer_epoch}, "
                f"older than the last seen epoch {current}"
            )
            if self.origin == ORIGIN_REPLICATION:
                log.warning(message)
            else:
                raise InvalidProducerEpochError(message)

    def _check_sequence(self, producer_epoch: int, first_seq: int, offset: int) -> None:
        updated = self.updated_entry
        if producer_epoch != updated.producer_epoch:
            if first_seq != 0:
                if updated.producer_epoch != NO_PRODUCER_EPOCH:
                    raise OutOfOrderSequenceError(
                        f"invalid sequence {first_seq} for new epoch {producer_epoch} of producer "
                        f"{self.producer_id} at offset {offset} (current epoch {updated.producer_epoch})"
                    )
                raise UnknownProducerIdError(
                    f"no state for producer {self.producer_id} at offset {offset} but its first "
                    f"sequence is {first_seq}, not 0 (its last batch may have been deleted)"
                )
            return
        if not updated.is_empty():
            current_last_seq = updated.last_seq
        elif producer_epoch == self.current_entry.producer_epoch:
            current_last_seq = self.current_entry.last_seq
        else:
            current_last_seq = NO_SEQUENCE
        # With no known epoch (all of the producer's data deleted) any sequence is accepted.
        if not (
            self.current_entry.producer_epoch == NO_PRODUCER_EPOCH
            or _in_sequence(current_last_seq, first_seq)
        ):
            raise OutOfOrderSequenceError(
                f"out of order sequence for producer {self.producer_id} at offset {offset}: "
                f"{first_seq} (incoming), {current_last_seq} (current end sequence)"
            )

    def append(self, batch: BatchInfo) -> CompletedTxn | None:
        """Validate and account one batch; returns the transaction a marker completes.

        Raises InvalidProducerEpochError, OutOfOrderSequenceError, UnknownProducerIdError,
        InvalidTxnStateError or TransactionCoordinatorFencedError (never for replication).
        """
        if batch.is_control:
            if batch.marker is None:
                return None  # an empty control batch: its transaction was cleaned away
            return self.append_end_txn_marker(
                batch.marker, batch.producer_epoch, batch.base_offset, batch.max_timestamp
            )
        self.append_data_batch(
            batch.producer_epoch,
            batch.base_sequence,
            batch.last_sequence,
            batch.max_timestamp,
            batch.base_offset,
            batch.last_offset,
            batch.is_transactional,
        )
        return None

    def append_data_batch(
        self,
        epoch: int,
        first_seq: int,
        last_seq: int,
        last_timestamp: int,
        first_offset: int,
        last_offset: int,
        is_transactional: bool,
    ) -> None:
        """Validate a data batch (epoch always, sequence for client appends) and record it."""
        self._check_producer_epoch(epoch, first_offset)
        if self.origin == ORIGIN_CLIENT:
            self._check_sequence(epoch, first_seq, first_offset)
        self.updated_entry.add_batch(
            epoch, last_seq, last_offset, last_offset - first_offset, last_timestamp
        )
        open_txn = self.updated_entry.current_txn_first_offset
        if open_txn is not None and not is_transactional:
            raise InvalidTxnStateError(
                f"expected a transactional write from producer {self.producer_id} at offset "
                f"{first_offset}: its transaction from offset {open_txn} is still open"
            )
        if open_txn is None and is_transactional:
            self.updated_entry.current_txn_first_offset = first_offset
            self.started_transactions.append(TxnMetadata(self.producer_id, first_offset))

    def append_end_txn_marker(
        self, marker: EndTxnMarker, producer_epoch: int, offset: int, timestamp: int
    ) -> CompletedTxn | None:
        """Validate a COMMIT/ABORT marker and close the open transaction (None if none was open)."""
        self._check_producer_epoch(producer_epoch, offset)
        if self.updated_entry.coordinator_epoch > marker.coordinator_epoch:
            message = (
                f"coordinator epoch {marker.coordinator_epoch} of the marker for producer "
                f"{self.producer_id} at offset {offset} is older than "
                f"{self.updated_entry.coordinator_epoch}"
            )
            if self.origin != ORIGIN_REPLICATION:
                raise TransactionCoordinatorFencedError(message)
            log.info(message)
        first = self.updated_entry.current_txn_first_offset
        completed = (
            CompletedTxn(self.producer_id, first, offset, marker.is_abort)
            if first is not None
            else None
        )
        self.updated_entry.end_transaction(producer_epoch, marker.coordinator_epoch, timestamp)
        return completed


class AppendAnalysis(NamedTuple):
    """The outcome of `ProducerStateManager.analyze` for one append."""

    updated_producers: dict[int, ProducerAppendInfo]
    completed_txns: list[CompletedTxn]
    duplicate: BatchMetadata | None


# ---- snapshot files ------------------------------------------------------------------------


def snapshot_path(log_dir: Path | str, offset: int) -> Path:
    """`<dir>/<offset, 20 digits>.snapshot`."""
    return Path(log_dir) / segment_file_name(offset, SNAPSHOT_SUFFIX)


def list_snapshot_files(log_dir: Path | str) -> dict[int, Path]:
    """{offset: path} of the regular `*.snapshot` files in a directory."""
    directory = Path(log_dir)
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return {}
    found: dict[int, Path] = {}
    for entry in entries:
        name = entry.name
        if name.endswith(SNAPSHOT_SUFFIX) and entry.is_file():
            offset = offset_prefix(name)
            if offset is not None:
                found[offset] = directory / name
    return found


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """The `.snapshot` bytes for these entries, in the order given."""
    rows = [
        (
            e.producer_id,
            e.producer_epoch,
            e.last_seq,
            e.last_data_offset,
            e.last_offset_delta,
            e.last_timestamp,
            e.coordinator_epoch,
            -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
        )
        for e in entries
    ]
    header = np.zeros(1, dtype=SNAPSHOT_HEADER_DTYPE)
    header["version"] = SNAPSHOT_VERSION
    header["count"] = len(rows)
    body = np.array(rows, dtype=SNAPSHOT_ENTRY_DTYPE).tobytes()
    data = bytearray(header.tobytes() + body)
    crc = crc32c(memoryview(data)[SNAPSHOT_CRC_END:])
    data[2:SNAPSHOT_CRC_END] = crc.to_bytes(4, "big")
    return bytes(data)


def decode_snapshot(data: bytes, path: Path | str | None = None) -> list[ProducerStateEntry]:
    """Parse `.snapshot` bytes; raises CorruptSnapshotError on a bad version, size or CRC."""
    where = f"{path}: " if path is not None else ""
    if len(data) < SNAPSHOT_HEADER_SIZE:
        raise CorruptSnapshotError(
            f"{where}snapshot of {len(data)} bytes is shorter than its header"
        )
    header = np.frombuffer(data, dtype=SNAPSHOT_HEADER_DTYPE, count=1)[0]
    if int(header["version"]) != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"{where}unknown snapshot version {int(header['version'])}")
    stored, computed = int(header["crc"]), crc32c(memoryview(data)[SNAPSHOT_CRC_END:])
    if stored != computed:
        raise CorruptSnapshotError(
            f"{where}snapshot CRC mismatch: stored {stored}, computed {computed}"
        )
    count = int(header["count"])
    if count < 0 or SNAPSHOT_HEADER_SIZE + count * SNAPSHOT_ENTRY_SIZE != len(data):
        raise CorruptSnapshotError(
            f"{where}snapshot claims {count} entries but holds {len(data) - SNAPSHOT_HEADER_SIZE} bytes"
        )
    rows = np.frombuffer(data, dtype=SNAPSHOT_ENTRY_DTYPE, count=count, offset=SNAPSHOT_HEADER_SIZE)
    entries = []
    for pid, epoch, seq, last_offset, delta, ts, coord, txn_first in rows.tolist():
        entry = ProducerStateEntry(pid, epoch, coord, ts, txn_first if txn_first >= 0 else None)
        if last_offset >= 0:
            entry.batch_metadata.append(BatchMetadata(seq, last_offset, delta, ts))
        entries.append(entry)
    return entries


def write_snapshot_file(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Write a snapshot via a temporary file and a rename; with `sync`, crash-safely (fsync the
    file and the directory). An unsynced snapshot lost in a crash fails its CRC and is skipped."""
    if sync:
        atomic_write(path, data)
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


# ---- Java HashMap iteration order ----------------------------------------------------------
# Kafka writes snapshot entries in the iteration order of a java.util.HashMap<Long, ...>:
# bucket by bucket, and inside a bucket in insertion order. The table starts at 16 buckets and
# doubles whenever the size exceeds 3/4 of it (it never shrinks), or when a bucket reaches
# 8 entries while the table is under 64 buckets. Emulating it makes our files byte-identical.

_JAVA_INITIAL_CAPACITY = 16
_JAVA_LOAD_FACTOR_NUM, _JAVA_LOAD_FACTOR_DEN = 3, 4
_JAVA_TREEIFY_THRESHOLD = 8
_JAVA_MIN_TREEIFY_CAPACITY = 64


def java_long_hash(value: int) -> int:
    """java.util.HashMap's spread hash of a java.lang.Long key, as an unsigned 32-bit int."""
    v = value & 0xFFFF_FFFF_FFFF_FFFF
    h = (v ^ (v >> 32)) & 0xFFFF_FFFF
    return h ^ (h >> 16)


class _JavaHashMapOrder:
    """Tracks a HashMap's table capacity so keys can be listed in its iteration order."""

    def __init__(self) -> None:
        self.capacity = _JAVA_INITIAL_CAPACITY

    def on_insert(self, key: int, existing_keys: Iterable[int], new_size: int) -> None:
        """Account for inserting a new `key` into a map that becomes `new_size` long."""
        mask = self.capacity - 1
        bucket = java_long_hash(key) & mask
        in_bucket = sum(1 for k in existing_keys if java_long_hash(k) & mask == bucket)
        if in_bucket >= _JAVA_TREEIFY_THRESHOLD and self.capacity < _JAVA_MIN_TREEIFY_CAPACITY:
            self.capacity *= 2
        if new_size * _JAVA_LOAD_FACTOR_DEN > self.capacity * _JAVA_LOAD_FACTOR_NUM:
            self.capacity *= 2

    def order(self, keys_in_insertion_order: Iterable[int]) -> list[int]:
        """The keys in the map's iteration order."""
        mask = self.capacity - 1
        return sorted(keys_in_insertion_order, key=lambda k: java_long_hash(k) & mask)


# ---- the manager ---------------------------------------------------------------------------


class ProducerStateManager:
    """The producer state of one partition directory, its snapshots and its transactions.

    `read_only=True` never writes, renames or deletes a file (state changes stay in memory).
    """

    def __init__(
        self,
        log_dir: Path | str,
        *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        clock: object | None = None,
        read_only: bool = False,
    ):
        self.log_dir = Path(log_dir)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.clock = clock if clock is not None else SystemClock()
        self.read_only = read_only
        self._producers: dict[int, ProducerStateEntry] = {}
        self._table = _JavaHashMapOrder()
        self._ongoing: dict[int, TxnMetadata] = {}  # by first offset
        self._unreplicated: dict[int, TxnMetadata] = {}  # completed, marker above the HW
        self._snapshots: dict[int, Path] = list_snapshot_files(self.log_dir)
        self._last_map_offset = 0
        self._last_snap_offset = 0

    # ---- producers -----------------------------------------------------------------------

    @property
    def producers(self) -> Mapping[int, ProducerStateEntry]:
        """The active producers by id (do not mutate the entries)."""
        return self._producers

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        """The state of `producer_id`, or None."""
        return self._producers.get(producer_id)

    def is_empty(self) -> bool:
        """No producers and no unreplicated transactions."""
        return not self._producers and not self._unreplicated

    def _add_producer(self, entry: ProducerStateEntry) -> None:
        pid = entry.producer_id
        if pid not in self._producers:
            self._table.on_insert(pid, self._producers.keys(), len(self._producers) + 1)
        self._producers[pid] = entry

    def _load_producer_entry(self, entry: ProducerStateEntry) -> None:
        self._add_producer(entry)
        if entry.current_txn_first_offset is not None:
            first = entry.current_txn_first_offset
            self._ongoing[first] = TxnMetadata(entry.producer_id, first)

    def _is_expired(self, now_ms: int, entry: ProducerStateEntry) -> bool:
        return (
            entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        )

    def remove_expired_producers(self, now_ms: int | None = None) -> list[int]:
        """Forget producers idle for `producer.id.expiration.ms` with no open transaction."""
        now = self.clock.time_ms() if now_ms is None else now_ms
        expired = [pid for pid, e in self._producers.items() if self._is_expired(now, e)]
        for pid in expired:
            del self._producers[pid]
        return expired

    # ---- appends -------------------------------------------------------------------------

    def prepare_update(self, producer_id: int, origin: str) -> ProducerAppendInfo:
        """A validator for `producer_id`'s next batches, starting from its current state."""
        current = self._producers.get(producer_id) or ProducerStateEntry(producer_id)
        return ProducerAppendInfo(producer_id, current, origin)

    def find_duplicate_batch(self, batch: BatchInfo) -> BatchMetadata | None:
        """The earlier batch this one retries (same producer, epoch and sequences), if any."""
        entry = self._producers.get(batch.producer_id)
        if entry is None:
            return None
        return entry.find_duplicate_batch(
            batch.producer_epoch, batch.base_sequence, batch.last_sequence
        )

    def analyze(self, batches: Iterable[BatchInfo], origin: str) -> AppendAnalysis:
        """Validate an append's batches (offsets already assigned) without changing any state.

        For client appends, a batch that duplicates one of its producer's last five stops the
        analysis: the result's `duplicate` holds the original batch. Raises the producer errors.
        """
        updated: dict[int, ProducerAppendInfo] = {}
        completed: list[CompletedTxn] = []
        for batch in batches:
            if not batch.has_producer_id:
                continue
            if origin == ORIGIN_CLIENT:
                duplicate = self.find_duplicate_batch(batch)
                if duplicate is not None:
                    return AppendAnalysis(updated, completed, duplicate)
            info = updated.get(batch.producer_id)
            if info is None:
                info = updated[batch.producer_id] = self.prepare_update(batch.producer_id, origin)
            txn = info.append(batch)
            if txn is not None:
                completed.append(txn)
        return AppendAnalysis(updated, completed, None)

    def update(self, append_info: ProducerAppendInfo) -> None:
        """Commit one producer's validated append."""
        if append_info.producer_id == NO_PRODUCER_ID:
            raise ValueError("cannot update the state of producer id -1")
        current = self._producers.get(append_info.producer_id)
        if current is not None:
            current.update(append_info.updated_entry)
        else:
            self._add_producer(append_info.updated_entry)
        for txn in append_info.started_transactions:
            self._ongoing[txn.first_offset] = txn

    def apply(
        self, analysis: AppendAnalysis, txn_index: TransactionIndex | None, next_offset: int
    ) -> None:
        """Commit an analysed append written to the log: update producers, index every aborted
        transaction in `txn_index` (the active segment's), and move the map end to `next_offset`."""
        for info in analysis.updated_producers.values():
            self.update(info)
        self._complete_all(analysis.completed_txns, txn_index)
        self.update_map_end_offset(next_offset)

    def _complete_all(
        self, completed: Iterable[CompletedTxn], txn_index: TransactionIndex | None
    ) -> None:
        for txn in completed:
            lso = self.last_stable_offset(txn)
            # A read-only manager fills only an index kept in memory, never a file.
            if txn.is_aborted and txn_index is not None and (
                txn_index.in_memory or not self.read_only
            ):
                txn_index.append(
                    AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso)
                )
            self.complete_txn(txn)

    def load_batch(self, batch: BatchInfo, txn_index: TransactionIndex | None = None) -> None:
        """Replay one batch during segment recovery (replication origin, no sequence checks),
        indexing an aborted transaction it completes; moves the map end past the batch."""
        if batch.has_producer_id:
            info = self.prepare_update(batch.producer_id, ORIGIN_REPLICATION)
            txn = info.append(batch)
            self.update(info)
            if txn is not None:
                self._complete_all([txn], txn_index)
        self.update_map_end_offset(batch.last_offset + 1)

    def load_batches(self, batches: Iterable[BatchInfo]) -> None:
        """Replay batches past the newest snapshot (Kafka's loadProducersFromRecords):
        replication origin, producers updated together, transaction index untouched."""
        loaded: dict[int, ProducerAppendInfo] = {}
        completed: list[CompletedTxn] = []
        for batch in batches:
            if not batch.has_producer_id:
                continue
            info = loaded.get(batch.producer_id)
            if info is None:
                info = loaded[batch.producer_id] = self.prepare_update(
                    batch.producer_id, ORIGIN_REPLICATION
                )
            txn = info.append(batch)
            if txn is not None:
                completed.append(txn)
        for info in loaded.values():
            self.update(info)
        for txn in completed:
            self.complete_txn(txn)

    # ---- transactions and the last stable offset -----------------------------------------

    def last_stable_offset(self, completed_txn: CompletedTxn) -> int:
        """The LSO to store with `completed_txn` in the transaction index: the first offset of
        the earliest other producer's open transaction, else just past the marker."""
        for first in sorted(self._ongoing):
            txn = self._ongoing[first]
            if txn.producer_id != completed_txn.producer_id:
                return first
        return completed_txn.last_offset + 1

    def complete_txn(self, completed_txn: CompletedTxn) -> None:
        """Move a transaction from ongoing to completed-awaiting-replication."""
        txn = self._ongoing.pop(completed_txn.first_offset, None)
        if txn is None:
            raise ValueError(
                f"attempted to complete transaction {completed_txn} which was not started"
            )
        txn.last_offset = completed_txn.last_offset
        self._unreplicated[completed_txn.first_offset] = txn

    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest undecided transaction or decided-but-unreplicated one."""
        firsts = list(self._ongoing) + list(self._unreplicated)
        return min(firsts) if firsts else None

    def first_undecided_offset(self) -> int | None:
        """The first offset of the earliest open transaction, or None."""
        return min(self._ongoing) if self._ongoing else None

    def ongoing_transactions(self) -> list[TxnMetadata]:
        """Open transactions by first offset."""
        return [self._ongoing[k] for k in sorted(self._ongoing)]

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Forget completed transactions whose marker is now below the high watermark."""
        self._remove_unreplicated(high_watermark)

    def _remove_unreplicated(self, offset: int) -> None:
        for first, txn in list(self._unreplicated.items()):
            if txn.last_offset is not None and txn.last_offset < offset:
                del self._unreplicated[first]

    # ---- offsets, snapshots, truncation ---------------------------------------------------

    @property
    def map_end_offset(self) -> int:
        """The offset up to which the state reflects the log (exclusive)."""
        return self._last_map_offset

    def update_map_end_offset(self, offset: int) -> None:
        """Declare the state complete up to `offset` (exclusive)."""
        self._last_map_offset = offset

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the known snapshot files, ascending."""
        return sorted(self._snapshots)

    def latest_snapshot_offset(self) -> int | None:
        return max(self._snapshots) if self._snapshots else None

    def oldest_snapshot_offset(self) -> int | None:
        return min(self._snapshots) if self._snapshots else None

    def snapshot_entries(self) -> list[ProducerStateEntry]:
        """The producers in the order Kafka would write them to a snapshot."""
        return [self._producers[pid] for pid in self._table.order(self._producers)]

    def take_snapshot(self, *, sync: bool = True) -> Path | None:
        """Write `<map end offset>.snapshot` unless one at that offset or later exists; returns it.
        `sync=False` skips the fsyncs (Kafka's roll-time snapshot, flushed with the segments)."""
        if self._last_map_offset <= self._last_snap_offset or self.read_only:
            return None
        path = snapshot_path(self.log_dir, self._last_map_offset)
        write_snapshot_file(path, encode_snapshot(self.snapshot_entries()), sync=sync)
        self._snapshots[self._last_map_offset] = path
        self._last_snap_offset = self._last_map_offset
        return path

    def _remove_snapshot(self, offset: int) -> None:
        path = self._snapshots.pop(offset, None)
        if path is not None and not self.read_only:
            path.unlink(missing_ok=True)

    def delete_snapshots_before(self, offset: int) -> None:
        """Delete snapshot files below `offset`."""
        for snap in [o for o in self._snapshots if o < offset]:
            self._remove_snapshot(snap)

    def mark_snapshot_for_deletion(self, offset: int) -> Path | None:
        """Forget the snapshot at `offset` (its segment left the log) and rename its file
        `.snapshot.deleted`, to be removed with the segment's files (Kafka's
        removeAndMarkSnapshotForDeletion). Returns the renamed file, or None when there was
        no snapshot (or its file was already gone)."""
        path = self._snapshots.pop(offset, None)
        if path is None or self.read_only:
            return None
        target = path.with_name(path.name + DELETED_SUFFIX)
        try:
            os.replace(path, target)
        except FileNotFoundError:
            return None
        return target

    def remove_stray_snapshots(self, segment_base_offsets: Iterable[int]) -> None:
        """Delete snapshots that match no segment, except the largest stray one when it lies
        past the last segment's base (the one written at clean shutdown)."""
        bases = set(segment_base_offsets)
        self._snapshots = list_snapshot_files(self.log_dir)
        stray: int | None = None
        for offset in sorted(self._snapshots):
            if offset not in bases:
                if stray is not None:
                    self._remove_snapshot(stray)
                stray = offset
        if stray is not None and bases and stray < max(bases):
            self._remove_snapshot(stray)

    def _clear(self) -> None:
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()

    def _load_from_snapshot(self, log_start_offset: int, now_ms: int) -> None:
        while self._snapshots:
            offset = max(self._snapshots)
            path = self._snapshots[offset]
            try:
                entries = decode_snapshot(path.read_bytes(), path)
            except CorruptSnapshotError as exc:
                log.warning("failed to load producer snapshot %s: %s", path, exc)
                self._remove_snapshot(offset)
                continue
            for entry in entries:
                if not self._is_expired(now_ms, entry):
                    self._load_producer_entry(entry)
            self._last_snap_offset = self._last_map_offset = offset
            return
        self._last_snap_offset = self._last_map_offset = log_start_offset

    def truncate_and_reload(
        self, log_start_offset: int, log_end_offset: int, now_ms: int | None = None
    ) -> None:
        """Drop snapshots outside (log_start_offset, log_end_offset] and, unless the state
        already ends at `log_end_offset`, reload it from the newest snapshot left."""
        now = self.clock.time_ms() if now_ms is None else now_ms
        for offset in list(self._snapshots):
            if offset > log_end_offset or offset <= log_start_offset:
                self._remove_snapshot(offset)
        if log_end_offset != self._last_map_offset:
            self._clear()
            self._load_from_snapshot(log_start_offset, now)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """Forget unreplicated transactions below the new log start and move the map end up."""
        self._remove_unreplicated(log_start_offset)
        if self._last_map_offset < log_start_offset:
            self._last_map_offset = log_start_offset
        latest = self.latest_snapshot_offset()
        self._last_snap_offset = latest if latest is not None else log_start_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget everything, delete every snapshot, and restart the map at `offset`."""
        self._clear()
        for snap in list(self._snapshots):
            self._remove_snapshot(snap)
        self._last_snap_offset = 0
        self._last_map_offset = offset

    def rebuild(
        self,
        segments: list[tuple[int, Callable[[], Iterable[BatchInfo]]]],
        log_start_offset: int,
        last_offset: int,
        *,
        clean_shutdown: bool = False,
    ) -> None:
        """Bring the state to `last_offset` from the newest usable snapshot plus a replay of the
        log after it (Kafka's rebuildProducerState), snapshotting at the last two segment bases.

        `segments` are (base offset, batches-of-that-segment) pairs, ascending. After a clean
        shutdown with no snapshot at all, empty snapshots are written instead of a full scan.
        """
        bases = [base for base, _ in segments]
        to_snapshot = set(bases[-2:]) | {last_offset}
        if self.latest_snapshot_offset() is None and clean_shutdown:
            for offset in sorted(to_snapshot):
                self.update_map_end_offset(offset)
                self.take_snapshot()
            return
        empty_before = self.is_empty() and self._last_map_offset >= last_offset
        self.truncate_and_reload(log_start_offset, last_offset)
        if last_offset > self._last_map_offset and not empty_before:
            for i, (base, batches) in enumerate(segments):
                end = bases[i + 1] if i + 1 < len(bases) else None
                if base >= last_offset or (end is not None and end <= self._last_map_offset):
                    continue
                start = max(base, self._last_map_offset, log_start_offset)
                self.update_map_end_offset(start)
                if base in to_snapshot:
                    self.take_snapshot()
                self.load_batches(
                    b for b in batches() if b.last_offset >= start and b.base_offset < last_offset
                )
        self.update_map_end_offset(last_offset)
        self.take_snapshot()

    def update_parent_dir(self, log_dir: Path | str) -> None:
        """Follow a renamed partition directory."""
        self.log_dir = Path(log_dir)
        self._snapshots = {o: self.log_dir / p.name for o, p in self._snapshots.items()}

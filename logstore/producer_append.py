"""One producer's batches within an append, as Kafka's ProducerAppendInfo validates them: the
batch facts producer state needs (BatchInfo), each producer's entry (its last five batches,
epoch and open transaction), sequence arithmetic and the completed transactions an append ends.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from logstore.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
    UnknownProducerIdError,
)
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
from logstore.txn_index import AbortedTxn

log = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5  # Kafka keeps the metadata of each producer's last five batches

ORIGIN_CLIENT = "client"
ORIGIN_COORDINATOR = "coordinator"
ORIGIN_REPLICATION = "replication"
ORIGINS = (ORIGIN_CLIENT, ORIGIN_COORDINATOR, ORIGIN_REPLICATION)


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

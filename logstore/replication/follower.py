"""Follower: the fetcher of one follower replica (Kafka's ReplicaFetcherThread for one
partition). `step()` does one round -- truncate after a leader change, or fetch and append --
so tests and the simulation drive it deterministically; `start()` runs it on a thread.

Truncation uses the leader-epoch protocol (KIP-101/279/320): the follower asks the leader
where its latest epoch ends (OffsetsForLeaderEpoch) and truncates there, never to its own
high watermark. With `truncate_on_fetch=True` it skips that round and truncates when a fetch
answers with a diverging epoch instead (KIP-320, what Kafka 2.7+ followers do).
`truncate_to_hw=True` restores the pre-KIP-101 rule (truncate to the local HW, no epoch
checks) to reproduce the data loss and divergence stories of seed 001.

Invalid or corrupt fetched records fail the round (logged, kept in `last_error`) and the next
round retries, as Kafka's fetcher backs off on them; the thread also survives any other error.
"""

from __future__ import annotations

import logging
import threading
from enum import Enum

from logstore.epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from logstore.errors import (
    CorruptRecordError,
    FencedLeaderEpochError,
    FetchOffsetOutOfRangeError,
    InvalidRecordError,
    NotLeaderOrFollowerError,
    ReplicaNotAvailableError,
    UnknownLeaderEpochError,
)
from logstore.replication.partition import EpochEndOffset, Partition
from logstore.replication.transport import FetchRequest, Transport

log = logging.getLogger(__name__)

DEFAULT_FETCH_MAX_BYTES = 1024 * 1024  # Kafka's replica.fetch.max.bytes
DEFAULT_FETCH_BACKOFF_S = 1.0  # Kafka's replica.fetch.backoff.ms
_RETRIABLE = (NotLeaderOrFollowerError, UnknownLeaderEpochError, ReplicaNotAvailableError)


class Step(Enum):
    """What one `Follower.step()` did."""

    IDLE = "idle"  # not a follower (leader, or no role yet)
    TRUNCATED = "truncated"  # reconciled the log with the new leader's epochs
    FETCHED = "fetched"  # appended records (or none) and took the leader's HW and start
    DIVERGED = "diverged"  # the leader answered with a diverging epoch; truncated
    OUT_OF_RANGE = "out_of_range"  # restarted the log from the leader's end or start
    FENCED = "fenced"  # this replica's epoch is stale; waits for the controller
    RETRY = "retry"  # leader unreachable, not leader (yet) or epoch unknown to it
    FAILED = "failed"  # an error no rule handles: logged, kept in `last_error`, retried


def truncation_offset(leader: EpochEndOffset, partition: Partition) -> tuple[int, bool]:
    """Kafka's follower rule (AbstractFetcherThread.getOffsetTruncationState): where to
    truncate given the leader's (epoch, end offset), and whether truncation is complete."""
    log = partition.log
    leo = log.log_end_offset
    if leader.end_offset == UNDEFINED_EPOCH_OFFSET:
        return min(log.high_watermark, leo), True
    if leader.leader_epoch == UNDEFINED_EPOCH:
        return min(leader.end_offset, leo), True
    local_epoch, local_end = partition.epochs.end_offset_for(leader.leader_epoch, leo)
    if local_end == UNDEFINED_EPOCH_OFFSET:
        return min(leader.end_offset, leo), True
    if local_epoch != leader.leader_epoch:
        # We never had the leader's epoch: cut to where our smaller epoch ends and ask again.
        return min(local_end, leo), False
    return min(local_end, leader.end_offset, leo), True


class Follower:
    """Fetches one partition from its leader through `transport` into `partition`."""

    def __init__(
        self,
        partition: Partition,
        transport: Transport,
        *,
        max_bytes: int = DEFAULT_FETCH_MAX_BYTES,
        truncate_to_hw: bool = False,
        truncate_on_fetch: bool = False,
    ):
        if truncate_to_hw and truncate_on_fetch:
            raise ValueError("truncate_to_hw and truncate_on_fetch exclude each other")
        self.partition = partition
        self.transport = transport
        self.max_bytes = max_bytes
        self.truncate_to_hw = truncate_to_hw
        self.truncate_on_fetch = truncate_on_fetch
        self._truncated_epoch: int | None = None
        self._fetched_epoch: int | None = None
        self._seen: tuple[int, int] | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.last_error: Exception | None = None  # the error of the last round, if it failed

    @property
    def needs_truncation(self) -> bool:
        """True until the log was reconciled with the current leader epoch."""
        state = self.partition.follower_state()
        return state is not None and self._truncated_epoch != state[1]

    @property
    def fetched_in_current_epoch(self) -> bool:
        """True once a fetch from the current leader was applied (the HW is then the leader's
        view; before it, a restarted follower's HW is only its checkpoint)."""
        state = self.partition.follower_state()
        return state is not None and self._fetched_epoch == state[1]

    def step(self) -> Step:
        """One round: truncate if the leader epoch changed, else one fetch. FAILED when the
        fetched records are invalid or corrupt (see `last_error`); other errors propagate."""
        state = self.partition.follower_state()
        if state is None:
            return Step.IDLE
        try:
            result = self._round(*state)
        except (InvalidRecordError, CorruptRecordError) as exc:
            return self._failed(exc)
        self.last_error = None
        return result

    def _round(self, leader_id: int, epoch: int) -> Step:
        try:
            if self._truncated_epoch != epoch:
                self._truncate(leader_id, epoch)
                self._truncated_epoch = epoch
                return Step.TRUNCATED
            return self._fetch(leader_id, epoch)
        except FencedLeaderEpochError:
            return Step.FENCED
        except _RETRIABLE:
            return Step.RETRY

    def _failed(self, exc: Exception) -> Step:
        self.last_error = exc
        partition = self.partition
        log.error("replica %d: fetching %s-%d at offset %d failed; retrying", partition.replica_id,
                  partition.topic, partition.partition, partition.log_end_offset, exc_info=exc)
        return Step.FAILED

    # ---------------------------------------------------------------- truncation

    def _truncate(self, leader_id: int, epoch: int) -> None:
        partition = self.partition
        if self.truncate_to_hw:
            partition.truncate_to(epoch, partition.high_watermark)  # the pre-KIP-101 rule
            return
        if self.truncate_on_fetch:
            return  # the first fetch carries our last epoch; the leader answers if we diverge
        for _ in range(len(partition.epochs) + 1):
            latest = partition.epochs.latest_epoch()
            if latest is None:
                partition.truncate_to(epoch, partition.high_watermark)  # no epochs to compare
                return
            answer = self.transport.offsets_for_leader_epoch(leader_id, partition.topic, partition.partition,
                                                             epoch, latest)
            offset, complete = truncation_offset(answer, partition)
            partition.truncate_to(epoch, offset)
            if complete:
                return

    # ---------------------------------------------------------------- fetch

    def _fetch(self, leader_id: int, epoch: int) -> Step:
        partition = self.partition
        log = partition.log
        last_epoch = UNDEFINED_EPOCH
        if not self.truncate_to_hw:
            latest = partition.epochs.latest_epoch()
            last_epoch = UNDEFINED_EPOCH if latest is None else latest
        request = FetchRequest(partition.topic, partition.partition, partition.replica_id, log.log_end_offset,
                               self.max_bytes, UNDEFINED_EPOCH if self.truncate_to_hw else epoch, last_epoch,
                               log.log_start_offset, partition.broker_epoch)
        try:
            response = self.transport.fetch(leader_id, request)
        except FetchOffsetOutOfRangeError as exc:
            return self._handle_out_of_range(epoch, request.fetch_offset, exc)
        if response.diverging_epoch is not None:
            offset, _ = truncation_offset(response.diverging_epoch, partition)
            partition.truncate_to(epoch, offset)
            return Step.DIVERGED
        if partition.append_fetched(epoch, response):
            self._fetched_epoch = epoch
        return Step.FETCHED

    def _handle_out_of_range(self, epoch: int, fetch_offset: int, exc: FetchOffsetOutOfRangeError) -> Step:
        """Ahead of the leader (only after an unclean election, or with HW truncation): cut
        back to its end. Behind its start (retention ran there): restart at its start."""
        if fetch_offset > exc.log_end_offset:
            self.partition.truncate_to(epoch, exc.log_end_offset)
        else:
            self.partition.truncate_fully_and_start_at(epoch, exc.log_start_offset)
        return Step.OUT_OF_RANGE

    # ---------------------------------------------------------------- thread

    def start(self, interval_s: float = 0.01, backoff_s: float = DEFAULT_FETCH_BACKOFF_S) -> None:
        """Run `step()` on a daemon thread, waiting `interval_s` between idle rounds and
        `backoff_s` after a failed one; any error fails the round, never the thread."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, args=(interval_s, backoff_s), daemon=True,
                                        name=f"follower-{self.partition.replica_id}-{self.partition.topic}")
        self._thread.start()

    def _run(self, interval_s: float, backoff_s: float) -> None:
        while not self._stop.is_set():
            try:
                result = self.step()
            except Exception as exc:  # a dead fetcher would keep the replica out of the ISR for good
                result = self._failed(exc)
            if result is Step.FAILED:
                self._stop.wait(backoff_s)
            elif result is not Step.FETCHED or not self._last_fetch_moved():
                self._stop.wait(interval_s)

    def _last_fetch_moved(self) -> bool:
        log = self.partition.log
        seen, self._seen = self._seen, (log.log_end_offset, log.high_watermark)
        return seen != self._seen

    def stop(self) -> None:
        """Stop the thread (after its current round) and wait for it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

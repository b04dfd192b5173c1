"""Partition: one replica of a replicated partition -- a local Log in the leader or follower
role -- with the leader's view of every remote replica (Kafka's Partition and Replica).

The leader keeps, per remote replica, its log end offset (LEO), log start offset, last fetch
time and last caught-up time. The high watermark (HW) is the minimum LEO over the ISR (and
over replicas caught up within `replica.lag.time.max.ms`, which are about to join it); it
moves on produce and on fetch, so a follower learns a new HW one fetch round later (seed 001).
Followers fetch with `fetch()`; `logstore.replication.follower.Follower` drives that side.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

from logstore.checkpoint import (
    REPLICATION_OFFSET_CHECKPOINT,
    read_offsets_checkpoint,
    write_offsets_checkpoint,
)
from logstore.clean_shutdown import NO_BROKER_EPOCH, read_marker
from logstore.clock import Clock
from logstore.config import LogConfig
from logstore.epoch import UNDEFINED_EPOCH, LeaderEpochFileCache, check_current_leader_epoch
from logstore.errors import (
    FetchOffsetOutOfRangeError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
)
from logstore.log import Log
from logstore.log_like import LogLike
from logstore.log_results import AppendInfo
from logstore.policies import RetentionPass
from logstore.records import read_batch_header

LEADER = "leader"
FOLLOWER = "follower"
UNKNOWN_OFFSET = -1  # a remote replica's LEO before its first fetch (Kafka's UnknownOffset)
ACKS_ALL = -1
#: The reason recorded when a follower takes its leader's log start offset (Kafka's LeaderOffsetIncremented).
LEADER_OFFSET_INCREMENTED = "leader_offset_incremented"
_ACKS = (ACKS_ALL, 0, 1)
_CHECKPOINT_LOCK = threading.Lock()


class EpochEndOffset(NamedTuple):
    """OffsetsForLeaderEpoch's answer: the largest epoch <= the one asked and where it ends."""

    leader_epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """The leader's answer to a follower fetch: raw batches and the leader's offsets, or (with
    no records) the epoch and end offset where the follower's log diverges (KIP-320)."""

    records: bytes
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    diverging_epoch: EpochEndOffset | None = None


@dataclass(slots=True)
class ReplicaState:
    """The leader's view of one remote replica."""

    replica_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    broker_epoch: int = NO_BROKER_EPOCH  # of the broker that sent the last fetch (KIP-903)

    def is_caught_up(self, leader_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
        """At the leader's LEO, or caught up to it within the last `max_lag_ms`."""
        return self.log_end_offset == leader_end_offset or now_ms - self.last_caught_up_time_ms <= max_lag_ms


class AppendHandle:
    """A produce in flight: done at once for acks=0/1; for acks=all when the HW passes
    `last_offset` (or failed when leadership is lost or the ISR is too small by then)."""

    def __init__(self, info: AppendInfo, acks: int, leader_epoch: int):
        self.info = info
        self.acks = acks
        self.leader_epoch = leader_epoch
        self.error: Exception | None = None
        self._done = threading.Event()

    @property
    def first_offset(self) -> int:
        """Offset of the first record written."""
        return self.info.first_offset

    @property
    def last_offset(self) -> int:
        """Offset of the last record written."""
        return self.info.last_offset

    @property
    def done(self) -> bool:
        """True once the append is acknowledged or failed."""
        return self._done.is_set()

    @property
    def is_committed(self) -> bool:
        """True once acknowledged without error."""
        return self._done.is_set() and self.error is None

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until done (or `timeout_s`); True if done."""
        return self._done.wait(timeout_s)

    def result(self, timeout_s: float | None = None) -> AppendInfo:
        """The AppendInfo once acknowledged; raises the failure, or TimeoutError."""
        if not self._done.wait(timeout_s):
            raise TimeoutError(f"append of offsets {self.first_offset}..{self.last_offset} not acknowledged yet")
        if self.error is not None:
            raise self.error
        return self.info

    def _finish(self, error: Exception | None = None) -> None:
        self.error = error
        self._done.set()

    def __repr__(self) -> str:
        state = "pending" if not self.done else ("committed" if self.error is None else f"failed: {self.error!r}")
        return f"AppendHandle({self.first_offset}..{self.last_offset}, acks={self.acks}, {state})"


IsrChangeCallback = Callable[["Partition", int, frozenset[int]], bool]


class Partition:
    """One local replica. Thread-safe (one lock). Build with `Partition.open` (a Log with
    Kafka's partition state) or directly around any LogLike and its epoch cache.

    `retention` (e.g. retention.apply_retention) runs on the log when a fetch moves its log
    start offset, deleting the segments wholly below it at once; without it they stay until
    the next retention pass. `previous_broker_epoch` is what the data directory's clean-shutdown
    marker named when the log was opened (`Partition.open` reads it); left out, a clean stop
    counts as unclean at registration, which is safe (the replica only leaves the ELR).
    """

    def __init__(
        self,
        log: LogLike,
        replica_id: int,
        *,
        clock: Clock | None = None,
        on_isr_change: IsrChangeCallback | None = None,
        retention: RetentionPass | None = None,
        previous_broker_epoch: int = NO_BROKER_EPOCH,
    ):
        self.log = log
        self.replica_id = replica_id
        self.clock = clock or log.clock
        self.on_isr_change = on_isr_change
        self.retention = retention
        self._previous_broker_epoch = previous_broker_epoch
        self.broker_epoch = NO_BROKER_EPOCH  # set by the controller when the broker registers
        log.high_watermark_follows_log_end = False
        self.role: str | None = None
        self.leader_id: int | None = None
        self.leader_epoch = UNDEFINED_EPOCH
        self.assigned: tuple[int, ...] = ()
        self.isr: frozenset[int] = frozenset()
        self.leader_epoch_start_offset = UNKNOWN_OFFSET
        self.hw_needs_min_isr = False  # KIP-966: set by make_leader when the controller keeps ELR
        self._remotes: dict[int, ReplicaState] = {}
        self._pending: list[AppendHandle] = []
        self._lock = threading.RLock()
        self._isr_changed = threading.Condition(self._lock)

    @classmethod
    def open(
        cls,
        path: str | Path,
        replica_id: int,
        config: LogConfig | dict[str, Any] | None = None,
        *,
        clock: Clock | None = None,
        on_isr_change: IsrChangeCallback | None = None,
        retention: RetentionPass | None = None,
    ) -> Partition:
        """Open the partition directory `path` as a replica: a Log with producer state and the
        leader-epoch cache, the HW from the data directory's replication-offset-checkpoint and the
        broker epoch of its clean-shutdown marker."""
        marker_epoch = read_marker(Path(path).parent)  # before Log.open takes the marker away
        log = Log.open(path, config, clock=clock)
        partition = cls(log, replica_id, clock=clock, on_isr_change=on_isr_change, retention=retention,
                        previous_broker_epoch=NO_BROKER_EPOCH if marker_epoch is None else marker_epoch)
        checkpoint = read_offsets_checkpoint(log.dir.parent / REPLICATION_OFFSET_CHECKPOINT)
        log.high_watermark = checkpoint.get((log.topic, log.partition), 0)
        return partition

    # ------------------------------------------------------------------ state

    @property
    def epochs(self) -> LeaderEpochFileCache:
        """The log's leader-epoch cache (read it; the log changes it)."""
        return self.log.leader_epoch_cache

    @property
    def topic(self) -> str:
        """The log's topic."""
        return self.log.topic

    @property
    def partition(self) -> int:
        """The log's partition number."""
        return self.log.partition

    @property
    def high_watermark(self) -> int:
        """This replica's HW (the partition HW when leader)."""
        return self.log.high_watermark

    @property
    def log_end_offset(self) -> int:
        """This replica's LEO."""
        return self.log.log_end_offset

    @property
    def previous_broker_epoch(self) -> int:
        """The broker epoch of the last clean stop (KIP-903), for registration: NO_BROKER_EPOCH
        unless the log was opened after a clean shutdown."""
        return self._previous_broker_epoch if self.log.had_clean_shutdown else NO_BROKER_EPOCH

    @property
    def is_leader(self) -> bool:
        """True in the leader role."""
        return self.role == LEADER

    def replica_broker_epoch(self, replica_id: int) -> int:
        """The broker epoch the last fetch of `replica_id` carried (NO_BROKER_EPOCH: none known)."""
        with self._lock:
            state = self._remotes.get(replica_id)
            return NO_BROKER_EPOCH if state is None else state.broker_epoch

    def remote_replica(self, replica_id: int) -> ReplicaState:
        """The leader's view of `replica_id` (a copy). NotLeaderOrFollowerError if unknown."""
        with self._lock:
            state = self._remotes.get(replica_id)
            if state is None:
                raise NotLeaderOrFollowerError(
                    f"replica {self.replica_id} of {self.topic}-{self.partition} tracks no replica {replica_id}")
            return replace(state)

    @property
    def _config(self) -> LogConfig:
        return self.log.config

    def checkpoint_high_watermark(self) -> None:
        """Write this replica's HW into the data directory's replication-offset-checkpoint
        (Kafka does this every `replica.high.watermark.checkpoint.interval.ms`)."""
        path = Path(self.log.dir).parent / REPLICATION_OFFSET_CHECKPOINT
        with _CHECKPOINT_LOCK:  # partitions of one data directory share the file
            offsets = read_offsets_checkpoint(path)
            offsets[(self.topic, self.partition)] = self.log.high_watermark
            write_offsets_checkpoint(path, offsets)

    # ------------------------------------------------------------------ role changes

    def make_leader(self, leader_epoch: int, isr: Iterable[int], assigned: Iterable[int], *,
                    eligible_leader_replicas: bool = False) -> bool:
        """Become leader in `leader_epoch` (a LeaderAndIsr): the epoch starts at the LEO in the
        epoch cache, remote replica states reset; with `eligible_leader_replicas` (KIP-966) the HW
        moves only while the ISR holds min.insync.replicas. False (no change) for an older epoch."""
        with self._lock:
            if leader_epoch < self.leader_epoch:
                return False
            now = self.clock.time_ms()
            self.hw_needs_min_isr = eligible_leader_replicas
            self.isr = frozenset(isr) | {self.replica_id}
            self.assigned = tuple(assigned)
            self._isr_changed.notify_all()
            if self.role == LEADER and leader_epoch == self.leader_epoch:
                return True
            self._fail_pending(NotLeaderOrFollowerError(
                f"replica {self.replica_id} of {self.topic}-{self.partition} changed role"))
            leo = self.log.log_end_offset
            self.role, self.leader_id, self.leader_epoch = LEADER, self.replica_id, leader_epoch
            self.log.assign_epoch_start_offset(leader_epoch, leo)
            self.leader_epoch_start_offset = leo
            self._remotes = {
                r: ReplicaState(r, last_caught_up_time_ms=now if r in self.isr else 0, last_fetch_time_ms=now,
                                last_fetch_leader_log_end_offset=leo)
                for r in self.assigned if r != self.replica_id
            }
            self._maybe_increment_high_watermark(now)
            return True

    def make_follower(self, leader_id: int, leader_epoch: int) -> bool:
        """Follow `leader_id` in `leader_epoch`. The Follower truncates with the leader-epoch
        protocol before fetching again. False (no change) for an older epoch."""
        with self._lock:
            if leader_epoch < self.leader_epoch:
                return False
            if self.role == FOLLOWER and leader_epoch == self.leader_epoch and leader_id == self.leader_id:
                return True
            self._fail_pending(NotLeaderOrFollowerError(
                f"replica {self.replica_id} of {self.topic}-{self.partition} is now a follower of {leader_id}"))
            self.role, self.leader_id, self.leader_epoch = FOLLOWER, leader_id, leader_epoch
            self._remotes = {}
            self.isr = frozenset()
            self.leader_epoch_start_offset = UNKNOWN_OFFSET
            return True

    def update_isr(self, isr: Iterable[int]) -> None:
        """The controller changed the ISR (e.g. removed a failed broker); the HW may move."""
        with self._lock:
            if self.role != LEADER:
                return
            new_isr = frozenset(isr) | {self.replica_id}
            for removed in self.isr - new_isr:
                if removed in self._remotes:
                    # Not eligible to hold the HW back as "about to join" until it catches up.
                    self._remotes[removed].last_caught_up_time_ms = 0
            self.isr = new_isr
            self._isr_changed.notify_all()
            now = self.clock.time_ms()
            self._maybe_increment_high_watermark(now)
            self._complete_pending()

    def _fail_pending(self, error: Exception) -> None:
        pending, self._pending = self._pending, []
        for handle in pending:
            handle._finish(error)

    # ------------------------------------------------------------------ leader: produce

    def append(self, records: Any, acks: int = ACKS_ALL) -> AppendHandle:
        """Append as leader with `acks` -1 (done when the HW passes the batch), 1 or 0 (done at
        once). Raises NotLeaderOrFollowerError, and NotEnoughReplicasError for acks=all when
        the ISR is smaller than `min.insync.replicas`."""
        if acks not in _ACKS:
            raise ValueError(f"acks must be -1, 0 or 1, not {acks!r}")
        with self._lock:
            self._require_leader()
            min_isr = self._config.min_insync_replicas
            if acks == ACKS_ALL and len(self.isr) < min_isr:
                raise NotEnoughReplicasError(
                    f"{self.topic}-{self.partition}: ISR {sorted(self.isr)} is smaller than "
                    f"min.insync.replicas={min_isr}")
            info = self.log.append(records, leader_epoch=self.leader_epoch)
            handle = AppendHandle(info, acks, self.leader_epoch)
            if acks == ACKS_ALL:
                self._pending.append(handle)
            else:
                handle._finish()
            self._maybe_increment_high_watermark(self.clock.time_ms())
            self._complete_pending()
            return handle

    def _require_leader(self) -> None:
        if self.role != LEADER:
            raise NotLeaderOrFollowerError(
                f"replica {self.replica_id} is not the leader of {self.topic}-{self.partition} "
                f"(leader {self.leader_id}, epoch {self.leader_epoch})")

    def _complete_pending(self) -> None:
        hw = self.log.high_watermark
        done = [h for h in self._pending if h.last_offset < hw]
        if not done:
            return
        self._pending = [h for h in self._pending if h.last_offset >= hw]
        min_isr = self._config.min_insync_replicas
        for handle in done:
            if len(self.isr) >= min_isr:
                handle._finish()
            else:
                handle._finish(NotEnoughReplicasAfterAppendError(
                    f"{self.topic}-{self.partition}: offsets {handle.first_offset}..{handle.last_offset} "
                    f"committed with ISR {sorted(self.isr)} below min.insync.replicas={min_isr}"))

    def _maybe_increment_high_watermark(self, now: int) -> bool:
        """HW = min LEO over the ISR and the replicas caught up within the lag time; only up,
        and with `hw_needs_min_isr` only while the ISR holds min.insync.replicas."""
        if self.hw_needs_min_isr and len(self.isr) < self._config.min_insync_replicas:
            return False  # an eligible leader replica must hold everything below the HW
        leo = self.log.log_end_offset
        lag = self._config.replica_lag_time_max_ms
        new_hw = leo
        for state in self._remotes.values():
            joining = state.log_end_offset != UNKNOWN_OFFSET and state.is_caught_up(leo, now, lag)
            if state.replica_id in self.isr or joining:
                new_hw = min(new_hw, state.log_end_offset)
        if new_hw > self.log.high_watermark:
            self.log.high_watermark = new_hw
            return True
        return False

    # ------------------------------------------------------------------ leader: fetch

    def _check_epoch(self, current_leader_epoch: int) -> None:
        check_current_leader_epoch(current_leader_epoch, self.leader_epoch,
                                   f"{self.topic}-{self.partition} on replica {self.replica_id}")

    def offsets_for_leader_epoch(self, current_leader_epoch: int, leader_epoch: int) -> EpochEndOffset:
        """Kafka's OffsetsForLeaderEpoch on the leader: the largest epoch <= `leader_epoch` and
        its end offset. Raises the fenced/unknown epoch errors, NotLeaderOrFollowerError."""
        with self._lock:
            self._require_leader()
            self._check_epoch(current_leader_epoch)
            return EpochEndOffset(*self.epochs.end_offset_for(leader_epoch, self.log.log_end_offset))

    def fetch(
        self,
        replica_id: int,
        fetch_offset: int,
        max_bytes: int,
        current_leader_epoch: int,
        last_fetched_epoch: int = UNDEFINED_EPOCH,
        *,
        log_start_offset: int = UNKNOWN_OFFSET,
        replica_epoch: int = NO_BROKER_EPOCH,
    ) -> FetchResponse:
        """A follower fetch: records from `fetch_offset` up to the LEO, the HW and the log start
        offset after the follower's state was updated; or the diverging epoch when
        `last_fetched_epoch` does not end at or after `fetch_offset` here (KIP-320).
        `replica_epoch` is the follower's broker epoch, sent on with an ISR expansion (KIP-903).

        Raises NotLeaderOrFollowerError, FencedLeaderEpochError, UnknownLeaderEpochError and
        FetchOffsetOutOfRangeError (with the leader's log start and end offsets).
        """
        with self._lock:
            self._require_leader()
            self._check_epoch(current_leader_epoch)
            state = self._remotes.get(replica_id)
            if state is None:
                raise NotLeaderOrFollowerError(
                    f"replica {replica_id} is not assigned to {self.topic}-{self.partition} "
                    f"(assigned: {list(self.assigned)})")
            log = self.log
            start, end = log.log_start_offset, log.log_end_offset
            diverging = self.epochs.diverging(last_fetched_epoch, fetch_offset, end)
            if diverging is not None:
                return FetchResponse(b"", log.high_watermark, start, end, EpochEndOffset(*diverging))
            if fetch_offset < start or fetch_offset > end:
                raise FetchOffsetOutOfRangeError(
                    f"fetch offset {fetch_offset} from replica {replica_id} is out of range for "
                    f"{self.topic}-{self.partition}: valid offsets are [{start}, {end}]",
                    log_start_offset=start, log_end_offset=end)
            try:
                result = log.read(fetch_offset, max_bytes)
            except OffsetOutOfRangeError as exc:  # the start moved (DeleteRecords, retention) meanwhile
                raise FetchOffsetOutOfRangeError(
                    f"{exc} (fetch from replica {replica_id})",
                    log_start_offset=log.log_start_offset, log_end_offset=log.log_end_offset) from exc
            now = self.clock.time_ms()
            self._update_follower_state(state, fetch_offset, log_start_offset, end, now)
            state.broker_epoch = replica_epoch
            self._maybe_expand_isr(state)
            if self._maybe_increment_high_watermark(now):
                self._complete_pending()
            return FetchResponse(result.records, log.high_watermark, log.log_start_offset, log.log_end_offset)

    def _update_follower_state(self, state: ReplicaState, fetch_offset: int, log_start_offset: int,
                               leader_end: int, now: int) -> None:
        """Kafka's Replica.updateFetchState: the follower is caught up if it fetched at the
        LEO, or at least at the LEO of its previous fetch (then: caught up at that time)."""
        if fetch_offset >= leader_end:
            state.last_caught_up_time_ms = max(state.last_caught_up_time_ms, now)
        elif fetch_offset >= state.last_fetch_leader_log_end_offset:
            state.last_caught_up_time_ms = max(state.last_caught_up_time_ms, state.last_fetch_time_ms)
        state.log_end_offset = fetch_offset
        state.log_start_offset = log_start_offset
        state.last_fetch_leader_log_end_offset = leader_end
        state.last_fetch_time_ms = now

    def _maybe_expand_isr(self, state: ReplicaState) -> None:
        """A follower joins the ISR once its LEO reaches the HW and the current epoch's start."""
        if state.replica_id in self.isr:
            return
        if state.log_end_offset >= self.log.high_watermark and \
                state.log_end_offset >= self.leader_epoch_start_offset:
            self._alter_isr(self.isr | {state.replica_id})

    def maybe_shrink_isr(self) -> frozenset[int]:
        """Drop ISR followers that have not caught up for `replica.lag.time.max.ms`; returns
        the replicas removed. The HW may move up afterwards."""
        with self._lock:
            if self.role != LEADER:
                return frozenset()
            now = self.clock.time_ms()
            leo = self.log.log_end_offset
            lag = self._config.replica_lag_time_max_ms
            out = frozenset(r for r, s in self._remotes.items()
                            if r in self.isr and not s.is_caught_up(leo, now, lag))
            if out and self._alter_isr(self.isr - out):
                self._maybe_increment_high_watermark(now)
                self._complete_pending()
                return out
            return frozenset()

    def _alter_isr(self, new_isr: frozenset[int]) -> bool:
        """Ask the controller (if any) to accept `new_isr` (Kafka's AlterPartition)."""
        if self.on_isr_change is not None and not self.on_isr_change(self, self.leader_epoch, new_isr):
            return False
        self.isr = new_isr
        self._isr_changed.notify_all()
        return True

    def wait_for_isr(self, size: int, timeout_s: float | None = None) -> bool:
        """Block until this leader's ISR has at least `size` replicas (e.g. before acks=all
        appends under `min.insync.replicas`); False on timeout."""
        with self._isr_changed:
            return self._isr_changed.wait_for(lambda: self.role == LEADER and len(self.isr) >= size, timeout_s)

    # ------------------------------------------------------------------ follower side

    def follower_state(self) -> tuple[int, int] | None:
        """(leader id, leader epoch) when following, else None."""
        with self._lock:
            if self.role != FOLLOWER or self.leader_id is None:
                return None
            return self.leader_id, self.leader_epoch

    def append_fetched(self, leader_epoch: int, response: FetchResponse) -> bool:
        """Apply a fetch response as a follower of `leader_epoch`: append the batches, set
        HW = min(LEO, leader HW), take the leader's log start offset (and run `retention` if it
        moved). False (nothing applied) if the role or epoch changed meanwhile."""
        with self._lock:
            if self.role != FOLLOWER or self.leader_epoch != leader_epoch:
                return False
            log = self.log
            if response.records:
                first = read_batch_header(response.records)
                end = log.log_end_offset
                below_start = end <= max(log.log_start_offset, response.log_start_offset)
                if below_start and first.base_offset < end <= first.last_offset:
                    # A log start inside this batch (DeleteRecords): a log that is empty, or holds
                    # nothing the leader keeps, restarts at the batch. Kafka restarts an empty one
                    # (appendRecordsToFollowerOrFutureReplica) and fails the partition otherwise.
                    log.truncate_fully_and_start_at(first.base_offset)
                log.append_as_follower(response.records)
            log.high_watermark = min(log.log_end_offset, response.high_watermark)
            if response.log_start_offset > log.log_start_offset:
                self._follow_log_start_offset(response.log_start_offset)
            return True

    def _follow_log_start_offset(self, leader_log_start_offset: int) -> None:
        # Never past this replica's HW, which the log start offset may not pass.
        offset = min(leader_log_start_offset, self.log.high_watermark)
        if self.log.maybe_increment_log_start_offset(offset, LEADER_OFFSET_INCREMENTED) \
                and self.retention is not None:
            self.retention(self.log)

    def truncate_to(self, leader_epoch: int, offset: int) -> bool:
        """Truncate the local log to `offset` as a follower of `leader_epoch` (False if the role
        or epoch changed meanwhile, or nothing was above `offset`)."""
        with self._lock:
            if self.role != FOLLOWER or self.leader_epoch != leader_epoch:
                return False
            return bool(self.log.truncate_to(offset))

    def truncate_fully_and_start_at(self, leader_epoch: int, offset: int) -> bool:
        """Empty the local log and restart it at `offset` (a follower behind the leader's start)."""
        with self._lock:
            if self.role != FOLLOWER or self.leader_epoch != leader_epoch:
                return False
            self.log.truncate_fully_and_start_at(offset)
            return True

    def close(self) -> None:
        """A clean stop: fail pending appends and close the log, which writes the clean-shutdown
        marker with this replica's broker epoch (Kafka's CleanShutdownFileHandler)."""
        with self._lock:
            self._fail_pending(NotLeaderOrFollowerError(f"replica {self.replica_id} closed"))
            self.log.close(broker_epoch=self.broker_epoch)

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.partition}, replica={self.replica_id}, role={self.role}, "
                f"epoch={self.leader_epoch}, leo={self.log_end_offset}, hw={self.high_watermark}, "
                f"isr={sorted(self.isr)})")

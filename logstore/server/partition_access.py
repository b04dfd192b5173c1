"""The seam between the request handlers and a partition's data: what Produce, Fetch,
ListOffsets, OffsetForLeaderEpoch and DeleteRecords need of a partition this node leads.

Today every partition is a `Log` in the node's data directory (`LocalPartition`); a partition
replicated to other nodes will sit behind the same Protocol, its appends answered once its
followers have them. Appends and reads are coroutines so that either may wait: for replicas,
or, as here, for the data directory's disk thread, so that no pwrite, pread or fsync stalls
the event loop.
"""

from __future__ import annotations

import functools
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, Protocol

from logstore.epoch import check_current_leader_epoch
from logstore.file_slice import FileSlice
from logstore.log import Log
from logstore.log_results import AppendInfo, FetchResult
from logstore.server.disk_calls import on_disk
from logstore.server.fetch_response import INLINE_RECORDS_BYTES

if TYPE_CHECKING:
    from logstore.file_records import TimestampAndOffset

LEADER_EPOCH = 0  # one node: the leader epoch never changes


class PartitionAccess(Protocol):
    """One partition as its leader serves it to clients."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def last_stable_offset(self) -> int: ...

    async def append(self, records: Any) -> AppendInfo:
        """Append a client's batches as the leader; raises the LogstoreError that refused them."""
        ...

    def check_acks_all(self) -> None:
        """Before an acks=all append: raises NotEnoughReplicasError when the ISR is smaller than
        `min.insync.replicas` (nothing is written then)."""
        ...

    async def acknowledged(self, end_offset: int, timeout_s: float) -> bool:
        """After an acks=all append: whether every in-sync replica held the records below
        `end_offset` within `timeout_s` (Kafka's delayed produce; False: REQUEST_TIMED_OUT);
        NotLeaderOrFollowerError once this node no longer leads at the epoch appended at."""
        ...

    async def read(self, offset: int, max_bytes: int, *, isolation: str, min_one_batch: bool) -> FetchResult:
        """Whole batches from `offset` as a consumer at `isolation` may see them
        ('high_watermark' or 'read_committed'; a follower: 'log_end'); raises OffsetOutOfRangeError. The records are
        bytes, or a FileSlice to send from the segment file (the caller closes it)."""
        ...

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """A request's CurrentLeaderEpoch against this partition's: raises FencedLeaderEpochError
        (older), UnknownLeaderEpochError (newer); -1 passes."""
        ...

    def diverging_epoch(self, fetch_offset: int, last_fetched_epoch: int) -> tuple[int, int] | None:
        """A follower's fetch whose last fetched epoch parts from this log before `fetch_offset`:
        the (epoch, end offset) it should truncate by (Fetch's DivergingEpoch), else None."""
        ...

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets' answer for `timestamp` (or -1, -2, -3, -4); ValueError for others."""
        ...

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch's answer: (largest epoch <= `leader_epoch`, its end offset)."""
        ...

    def delete_records_before(self, offset: int) -> int:
        """Move the log start offset up to `offset`; returns the new low watermark."""
        ...


class LocalPartition:
    """A partition this node leads from its `Log`, at `leader_epoch` (0 on a single node; in a
    cluster, the epoch the controller gave the leadership). Appends and reads run on `disk`, the
    data directory's executor: one thread keeps them in the order they were asked."""

    __slots__ = ("_disk", "_leader_epoch", "_log")

    def __init__(self, log: Log, disk: Executor, leader_epoch: int = LEADER_EPOCH):
        self._log = log
        self._disk = disk
        self._leader_epoch = leader_epoch

    @property
    def topic(self) -> str:
        return self._log.topic

    @property
    def partition(self) -> int:
        return self._log.partition

    @property
    def log_start_offset(self) -> int:
        return self._log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        return self._log.last_stable_offset

    async def append(self, records: Any) -> AppendInfo:
        return await on_disk(self._disk, functools.partial(self._log.append, records, leader_epoch=self._leader_epoch))

    def check_acks_all(self) -> None:
        """A partition no other node holds: its ISR is this node, whatever min.insync.replicas says."""

    async def acknowledged(self, end_offset: int, timeout_s: float) -> bool:
        """Alone, appended is committed."""
        return True

    async def read(self, offset: int, max_bytes: int, *, isolation: str, min_one_batch: bool) -> FetchResult:
        return await on_disk(self._disk, functools.partial(self._read, offset, max_bytes, isolation=isolation,
                                                           min_one_batch=min_one_batch))

    def _read(self, offset: int, max_bytes: int, *, isolation: str, min_one_batch: bool) -> FetchResult:
        """The read, zero-copy; records of up to INLINE_RECORDS_BYTES are read here, on the disk
        thread, as the response joins them to the bytes around them anyway."""
        result = self._log.read(offset, max_bytes, isolation=isolation, min_one_batch=min_one_batch, zero_copy=True)
        records = result.records
        if isinstance(records, FileSlice) and len(records) <= INLINE_RECORDS_BYTES:
            with records:
                return result._replace(records=records.read())
        return result

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        check_current_leader_epoch(current_leader_epoch, self._leader_epoch, f"{self.topic}-{self.partition}")

    def diverging_epoch(self, fetch_offset: int, last_fetched_epoch: int) -> tuple[int, int] | None:
        return self._log.leader_epoch_cache.diverging(last_fetched_epoch, fetch_offset, self._log.log_end_offset)

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        return self._log.offset_for_timestamp(timestamp)

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        return self._log.leader_epoch_cache.end_offset_for(leader_epoch, self._log.log_end_offset)

    def delete_records_before(self, offset: int) -> int:
        return self._log.delete_records_before(offset)

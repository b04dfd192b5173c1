"""`__cluster_metadata-0`: the KRaft metadata log of a single-voter quorum, on disk as Kafka's
raft layer keeps it: a partition directory of record batches (metadata records framed as
ApiMessageAndVersion, each batch stamped with the leader epoch), a LeaderChangeMessage control
batch opening every epoch, the `quorum-state` file naming the leader and epoch, and snapshots
`<end offset>-<epoch>.checkpoint` (internal_topics.snapshot's format).

With one voter, every append is committed once flushed: the high watermark is the log end.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from logstore.checkpoint import atomic_write
from logstore.clock import Clock
from logstore.config import LogConfig
from logstore.errors import CorruptRecordError
from logstore.internal_topics import (
    build_snapshot,
    decode_metadata_record,
    encode_control_record,
    encode_metadata_record,
    read_snapshot,
)
from logstore.internal_topics.metadata_schemas import CONTROL_TYPES, METADATA_TOPIC
from logstore.log import Log
from logstore.log_files import (
    CHECKPOINT_SUFFIX,
    kraft_snapshot_file_name,
    parse_kraft_snapshot_name,
)
from logstore.log_loader import LoadState
from logstore.log_results import FetchResult
from logstore.records import Record, build_batch, iter_batches
from logstore.server.kraft.metadata_records import MetadataRecord

METADATA_PARTITION_DIR = f"{METADATA_TOPIC}-0"
QUORUM_STATE_FILE = "quorum-state"
QUORUM_STATE_VERSION = 0  # kraft.version 0: a static voter set (controller.quorum.voters)
LEADER_CHANGE_VERSION = 0
READ_CHUNK_BYTES = 1 << 20
_CONTROL_NAMES = frozenset(t.message.name for t in CONTROL_TYPES.values())


class MetadataLog:
    """The metadata partition of `data_dir`, written by this node as the only voter `node_id`."""

    def __init__(self, data_dir: Path, node_id: int, clock: Clock):
        self.dir = Path(data_dir) / METADATA_PARTITION_DIR
        self.node_id = node_id
        self._clock = clock
        self.bytes_appended = 0  # by this process: what snapshots are scheduled by
        # The raft layer owns this log, not a LogManager: its recovery runs from the start.
        self._log = Log.open(self.dir, LogConfig({}), clock=clock, load_state=LoadState())
        latest = self._log.leader_epoch_cache.latest_epoch()
        snapshot = self.latest_snapshot()
        self.epoch = max(latest if latest is not None else 0, snapshot[1] if snapshot else 0,
                         read_quorum_state(self.dir).get("leaderEpoch", 0))

    @property
    def end_offset(self) -> int:
        return self._log.log_end_offset

    @property
    def start_offset(self) -> int:
        return self._log.log_start_offset

    def become_leader(self) -> None:
        """Start a new epoch led by this node: the quorum state first (a restart never reuses
        an epoch), then the LeaderChangeMessage that opens the epoch in the log."""
        self.epoch += 1
        voters = [{"voterId": self.node_id}]
        atomic_write(self.dir / QUORUM_STATE_FILE, json.dumps({
            "clusterId": "", "leaderId": self.node_id, "leaderEpoch": self.epoch, "votedId": -1,
            "appliedOffset": 0, "currentVoters": voters, "data_version": QUORUM_STATE_VERSION},
            separators=(",", ":")).encode())
        key, value = encode_control_record("LEADER_CHANGE", {
            "version": LEADER_CHANGE_VERSION, "leaderId": self.node_id, "voters": voters, "grantingVoters": voters})
        self._write([Record(self.end_offset, self._clock.time_ms(), key, value)], is_control=True)

    def append(self, records: list[MetadataRecord]) -> int:
        """Append `records` as one batch at the current epoch, flushed (so committed); returns
        the offset of the first. Raises InvalidRecordError for a record that does not encode."""
        base, now = self.end_offset, self._clock.time_ms()
        values = [encode_metadata_record(kind, version, fields) for kind, version, fields in records]
        self._write([Record(base + i, now, None, v) for i, v in enumerate(values)], is_control=False)
        return base

    def _write(self, records: list[Record], *, is_control: bool) -> None:
        batch = build_batch(records, base_offset=records[0].offset, partition_leader_epoch=self.epoch,
                            is_control=is_control)
        self._log.append_as_follower(batch)
        self.bytes_appended += len(batch)
        self._log.flush()
        self._log.high_watermark = self._log.log_end_offset

    def append_fetched(self, data: bytes | memoryview) -> int:
        """Append batches fetched from the active controller (a broker's replica of the log),
        offsets and epochs kept, flushed; returns the log end before them."""
        start = self.end_offset
        self._log.append_as_follower(data)
        self._log.flush()
        self._log.high_watermark = self._log.log_end_offset
        return start

    def replay_into(self, image) -> bool:
        """Replay the newest snapshot and the log after it into `image`; False when both hold
        no metadata record (an empty log). Raises CorruptRecordError for a damaged file."""
        start, records = self.read_latest_snapshot()
        for record in records:
            image.replay(*record)
        found = bool(records)
        for _offset, record in self.records(max(start, self.start_offset)):
            image.replay(*record)
            found = True
        return found

    def read(self, offset: int, max_bytes: int) -> FetchResult:
        """Whole batches from `offset` (a Fetch of the metadata partition); OffsetOutOfRangeError
        outside the log."""
        return self._log.read(offset, max_bytes)

    def records(self, offset: int) -> Iterator[tuple[int, MetadataRecord]]:
        """The metadata records from `offset` on, as (offset, record); control records left out.
        Raises CorruptRecordError for a record that does not decode."""
        while offset < self.end_offset:
            result = self._log.read(offset, READ_CHUNK_BYTES)
            for batch in iter_batches(result.records):
                if not batch.is_control:
                    for record in batch.records():
                        if record.offset >= offset:
                            decoded = _decode(record)
                            yield record.offset, (decoded.name, decoded.version, decoded.value)
                offset = batch.next_offset

    # ------------------------------------------------------------------ snapshots

    def latest_snapshot(self) -> tuple[int, int] | None:
        """(end offset, epoch) of the newest snapshot file, if any."""
        ids = [parse_kraft_snapshot_name(p.name) for p in self.dir.glob(f"*{CHECKPOINT_SUFFIX}")]
        ids = [i for i in ids if i is not None]
        return max(ids) if ids else None

    def read_latest_snapshot(self) -> tuple[int, list[MetadataRecord]]:
        """The newest snapshot's end offset and metadata records; (0, []) without one.
        Raises CorruptRecordError for a damaged snapshot file."""
        latest = self.latest_snapshot()
        if latest is None:
            return 0, []
        path = self.dir / kraft_snapshot_file_name(*latest)
        records = [r for _, r in read_snapshot(path.read_bytes()) if r.name not in _CONTROL_NAMES]
        return latest[0], [(r.name, r.version, r.value) for r in records]

    def write_snapshot(self, records: list[MetadataRecord]) -> Path:
        """Write the image holding every record below the log end as a snapshot, named by the
        log end and the epoch of the last record (write to a temporary name, fsync, rename)."""
        end = self.end_offset
        last_epoch = self._log.leader_epoch_cache.latest_epoch() or self.epoch
        now = self._clock.time_ms()
        data = build_snapshot(records, epoch=last_epoch, last_contained_log_timestamp=now, timestamp=now)
        path = self.dir / kraft_snapshot_file_name(end, last_epoch)
        atomic_write(path, data)
        return path

    def close(self) -> None:
        self._log.close()

    def abandon(self) -> None:
        """Let go of the log unflushed, as a killed node does (Log.abandon)."""
        self._log.abandon()


def read_quorum_state(directory: Path) -> dict:
    """The `quorum-state` file's fields ({} when absent). Raises CorruptRecordError if unreadable."""
    path = directory / QUORUM_STATE_FILE
    try:
        state = json.loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    except ValueError as exc:
        raise CorruptRecordError(f"{path}: not a quorum-state file ({exc})") from None
    if not isinstance(state, dict):
        raise CorruptRecordError(f"{path}: not a quorum-state file")
    return state


def _decode(record: Record):
    try:
        return decode_metadata_record(record.value)
    except CorruptRecordError as exc:
        raise CorruptRecordError(f"{METADATA_PARTITION_DIR} offset {record.offset}: {exc}") from exc

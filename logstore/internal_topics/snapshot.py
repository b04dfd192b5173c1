"""KRaft snapshot files (`<end offset>-<epoch>.checkpoint` in __cluster_metadata-0, and the
`bootstrap.checkpoint` Kafka's storage tool writes): record batches whose first batch is a
control batch opening with a SnapshotHeaderRecord, then metadata record batches, and a last
control batch holding a SnapshotFooterRecord. Offsets count from 0 inside the file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from logstore.errors import CorruptRecordError
from logstore.internal_topics.records import (
    InternalRecord,
    decode_control_record,
    decode_metadata_record,
    encode_control_record,
    encode_metadata_record,
)
from logstore.records import Record, build_batch, iter_batches

SNAPSHOT_HEADER, SNAPSHOT_FOOTER = "SnapshotHeaderRecord", "SnapshotFooterRecord"
SNAPSHOT_RECORD_VERSION = 0


def read_snapshot(buffer) -> list[tuple[int, InternalRecord]]:
    """Decode every record of a snapshot file as (offset, record), control records included.

    Raises CorruptRecordError for a torn or malformed batch, a bad CRC, a record that does
    not decode, or a file that does not open with a snapshot header and close with a footer.
    """
    batches = iter_batches(buffer)
    out: list[tuple[int, InternalRecord]] = []
    for batch in batches:
        batch.validate()
        decode = _decode_control if batch.is_control else _decode_metadata
        for record in batch.records():
            out.append((record.offset, decode(record, batch.position)))
    if batches.torn:
        raise CorruptRecordError("snapshot ends in a partial batch", position=batches.valid_end)
    if not out or out[0][1].name != SNAPSHOT_HEADER:
        raise CorruptRecordError("snapshot does not start with a SnapshotHeaderRecord", position=0)
    if out[-1][1].name != SNAPSHOT_FOOTER:
        raise CorruptRecordError("snapshot does not end with a SnapshotFooterRecord",
                                 position=batches.valid_end)
    return out


def _decode_control(record: Record, batch_position: int) -> InternalRecord:
    try:
        return decode_control_record(record.key, record.value)
    except CorruptRecordError as exc:
        raise CorruptRecordError(f"offset {record.offset}: {exc}", position=batch_position) from exc


def _decode_metadata(record: Record, batch_position: int) -> InternalRecord:
    try:
        return decode_metadata_record(record.value)
    except CorruptRecordError as exc:
        raise CorruptRecordError(f"offset {record.offset}: {exc}", position=batch_position) from exc


def build_snapshot(records: Iterable[tuple[int | str, int, Mapping]], *, epoch: int,
                   last_contained_log_timestamp: int, timestamp: int) -> bytes:
    """Build a snapshot file's bytes: a header control batch, one batch of the metadata
    records given as (type id or name, version, fields), and a footer control batch.

    Raises InvalidRecordError for a record that does not encode.
    """
    header = encode_control_record(SNAPSHOT_HEADER, {
        "version": SNAPSHOT_RECORD_VERSION, "lastContainedLogTimestamp": last_contained_log_timestamp})
    values = [encode_metadata_record(kind, version, fields) for kind, version, fields in records]
    footer = encode_control_record(SNAPSHOT_FOOTER, {"version": SNAPSHOT_RECORD_VERSION})
    parts = [_control_batch(header, 0, epoch, timestamp)]
    if values:
        parts.append(build_batch([Record(1 + i, timestamp, None, v) for i, v in enumerate(values)],
                                 base_offset=1, partition_leader_epoch=epoch))
    parts.append(_control_batch(footer, 1 + len(values), epoch, timestamp))
    return b"".join(parts)


def _control_batch(key_value: tuple[bytes, bytes], offset: int, epoch: int, timestamp: int) -> bytes:
    key, value = key_value
    return build_batch([Record(offset, timestamp, key, value)], base_offset=offset,
                       partition_leader_epoch=epoch, is_control=True)

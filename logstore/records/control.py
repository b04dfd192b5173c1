"""Transaction control records (docs/FORMAT.md "Record": control batches): COMMIT/ABORT markers."""

from __future__ import annotations

import struct
from typing import NamedTuple

from logstore.errors import CorruptRecordError, InvalidRecordError
from logstore.records.builder import build_batch
from logstore.records.header import NO_PARTITION_LEADER_EPOCH, NO_SEQUENCE
from logstore.records.record import Record

# key: int16 version, int16 type; value: int16 version, int32 coordinatorEpoch.
CONTROL_KEY = struct.Struct(">hh")
END_TXN_MARKER_VALUE = struct.Struct(">hi")
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
ABORT, COMMIT = 0, 1
_TYPE_IDS = {"abort": ABORT, "commit": COMMIT}
_TYPE_NAMES = {ABORT: "abort", COMMIT: "commit"}


class ControlRecord(NamedTuple):
    """A parsed control record: kind ('commit', 'abort' or 'unknown'), its raw type id,
    and for COMMIT/ABORT the marker's version and coordinator epoch (else None)."""

    kind: str
    type_id: int
    version: int | None
    coordinator_epoch: int | None


def build_control_batch(kind: str, *, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                        timestamp: int, base_offset: int = 0,
                        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH) -> bytes:
    """Build a transactional control batch holding one COMMIT or ABORT marker.

    Raises InvalidRecordError for an unknown kind or out-of-range fields.
    """
    if kind not in _TYPE_IDS:
        raise InvalidRecordError(f"control kind must be 'commit' or 'abort', not {kind!r}")
    try:
        key = CONTROL_KEY.pack(CONTROL_KEY_VERSION, _TYPE_IDS[kind])
        value = END_TXN_MARKER_VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)
    except struct.error as exc:
        raise InvalidRecordError(f"control record field out of range: {exc}") from None
    return build_batch([Record(base_offset, timestamp, key, value)], base_offset=base_offset,
                       producer_id=producer_id, producer_epoch=producer_epoch,
                       base_sequence=NO_SEQUENCE, is_transactional=True, is_control=True,
                       partition_leader_epoch=partition_leader_epoch)


def parse_control_record(record: Record) -> ControlRecord:
    """Parse a record of a control batch; CorruptRecordError for a malformed key or value."""
    key = record.key
    if key is None or len(key) < CONTROL_KEY.size:
        raise CorruptRecordError("control record key shorter than 4 bytes", position=None)
    version, type_id = CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"negative control record key version {version}")
    kind = _TYPE_NAMES.get(type_id)
    if kind is None:
        return ControlRecord("unknown", type_id, None, None)
    value = record.value
    if value is None or len(value) < END_TXN_MARKER_VALUE.size:
        raise CorruptRecordError("end transaction marker value shorter than 6 bytes")
    marker_version, coordinator_epoch = END_TXN_MARKER_VALUE.unpack_from(value)
    if marker_version < 0:
        raise CorruptRecordError(f"negative end transaction marker version {marker_version}")
    return ControlRecord(kind, type_id, marker_version, coordinator_epoch)

"""Fetch responses as pieces for the socket: the fields around each partition's records are
encoded here, the records themselves are passed through as read, never copied into one
response buffer (the schema encoder copies every byte, then slices a copy of its buffer).
Records that are a FileSlice of a segment file stay one: the connection sends them from the
file with sendfile (Kafka's FileRecords.transferTo), the framing written around them.

Byte for byte what kafka-python's FetchResponse encoder writes for versions 4 to 17 (Kafka's
FetchResponse.json; from 13 topics by id), tested against it; of a partition's tagged fields only DivergingEpoch
is written, for a follower whose log parts from its leader's (CurrentLeader and SnapshotId are
for KIP-951 clients and the metadata log's snapshots, which these fetches do not serve).
"""

from __future__ import annotations

import struct
from typing import Any

from logstore.file_slice import FileSlice
from logstore.server.protocol import Piece

FLEXIBLE_VERSION = 12  # compact strings, arrays and bytes; tagged fields
TOPIC_ID_VERSION = 13  # topics named by their id (KIP-516)
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_TOP_V7 = struct.Struct(">ihi")  # throttle time, error code, session id
_PARTITION = struct.Struct(">ihqq")  # index, error code, high watermark, last stable offset
_I64 = struct.Struct(">q")
_ABORTED = struct.Struct(">qq")  # producer id, first offset
_DIVERGING = struct.Struct(">BBBiqB")  # one tagged field, tag 0, its size 13: epoch, end offset, no tags
NO_TAGS = b"\x00"
INLINE_RECORDS_BYTES = 4096  # smaller records are copied into the surrounding piece


def encode_fetch_response(version: int, correlation_id: int, response: Any) -> list[Piece]:
    """The size-prefixed response as a list of pieces to write in order: buffers, and the
    records' FileSlices as they are (closed by whoever sends them)."""
    flexible = version >= FLEXIBLE_VERSION
    pieces: list[Piece] = []
    out = bytearray(4)  # the size, filled in last
    out += _I32.pack(correlation_id)
    if flexible:
        out += NO_TAGS
    if version >= 7:
        out += _TOP_V7.pack(response.throttle_time_ms, response.error_code, response.session_id)
    else:
        out += _I32.pack(response.throttle_time_ms)
    _length(out, len(response.responses), flexible)
    for topic in response.responses:
        if version >= TOPIC_ID_VERSION:
            out += topic.topic_id.bytes
        else:
            _string(out, topic.topic, flexible)
        _length(out, len(topic.partitions), flexible)
        for p in topic.partitions:
            out += _PARTITION.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset)
            if version >= 5:
                out += _I64.pack(p.log_start_offset)
            _aborted(out, p.aborted_transactions, flexible)
            if version >= 11:
                out += _I32.pack(p.preferred_read_replica)
            records = p.records
            if records is None:
                out += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                _length(out, len(records), flexible)
                if len(records) <= INLINE_RECORDS_BYTES and not isinstance(records, FileSlice):
                    out += records
                else:
                    pieces += (out, records)
                    out = bytearray()
            if flexible:
                _partition_tags(out, p)
        if flexible:
            out += NO_TAGS
    if flexible:
        out += NO_TAGS
    pieces.append(out)
    _I32.pack_into(pieces[0], 0, sum(map(len, pieces)) - 4)
    return pieces


def _partition_tags(out: bytearray, p: Any) -> None:
    """A partition's tagged fields: DivergingEpoch (tag 0) when it is not its default (-1, -1)."""
    diverging = getattr(p, "diverging_epoch", None)
    if diverging is None or diverging.end_offset < 0:
        out += NO_TAGS
    else:
        out += _DIVERGING.pack(1, 0, _DIVERGING.size - 3, diverging.epoch, diverging.end_offset, 0)


def _length(out: bytearray, n: int, flexible: bool) -> None:
    """An array's or bytes' length: compact (unsigned varint of n + 1) or int32."""
    if flexible:
        _varint(out, n + 1)
    else:
        out += _I32.pack(n)


def _string(out: bytearray, text: str, flexible: bool) -> None:
    data = text.encode()
    if flexible:
        _varint(out, len(data) + 1)
    else:
        out += _I16.pack(len(data))
    out += data


def _aborted(out: bytearray, aborted: list | None, flexible: bool) -> None:
    if aborted is None:
        out += b"\x00" if flexible else b"\xff\xff\xff\xff"
        return
    _length(out, len(aborted), flexible)
    for a in aborted:
        out += _ABORTED.pack(a.producer_id, a.first_offset)
        if flexible:
            out += NO_TAGS


def _varint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)

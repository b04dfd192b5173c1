"""logstore.dump: Kafka DumpLogSegments text for single batches, records and entries."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from logstore import dump
from logstore.errors import CorruptRecordError, CorruptSnapshotError
from logstore.records import Record, RecordBatch, build_batch, read_batch
from logstore.records.crc import crc32c


def test_batch_line_has_kafkas_fields_in_kafkas_order():
    batch = RecordBatch(build_batch([Record(5, 1000, b"k", b"v"), Record(6, 1001, None, None)],
                                    base_offset=5, partition_leader_epoch=3))
    assert dump.batch_line(batch, 42) == (
        "baseOffset: 5 lastOffset: 6 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 "
        "producerEpoch: -1 partitionLeaderEpoch: 3 isTransactional: false isControl: false "
        "deleteHorizonMs: OptionalLong.empty position: 42 CreateTime: 1001 "
        f"size: {batch.size_in_bytes} magic: 2 compresscodec: none crc: {batch.crc} isvalid: true"
    )


def test_record_line_prints_key_and_payload_only_when_present():
    batch = RecordBatch(build_batch([Record(0, 7, b"k", b"v", (("a", b"1"), ("b", None))),
                                     Record(1, 8, None, b"p"), Record(2, 9, b"t", None)]))
    lines = [dump.record_line(batch, r, print_data=True) for r in batch.records()]
    assert lines == [
        "| offset: 0 CreateTime: 7 keySize: 1 valueSize: 1 sequence: -1 headerKeys: [a,b] key: k payload: v",
        "| offset: 1 CreateTime: 8 keySize: -1 valueSize: 1 sequence: -1 headerKeys: [] payload: p",
        "| offset: 2 CreateTime: 9 keySize: 1 valueSize: -1 sequence: -1 headerKeys: [] key: t",
    ]


def test_skip_record_metadata_keeps_kafkas_prefixes():
    batch = RecordBatch(build_batch([Record(0, 7, b"k", b"v"), Record(1, 8, None, b"p")]))
    records = batch.records()
    assert dump.record_line(batch, records[0], print_data=True, skip_metadata=True) == "| key: k payload: v"
    assert dump.record_line(batch, records[1], print_data=True, skip_metadata=True) == " payload: p"


def test_sequences_wrap_past_int32_max_as_kafka_does():
    batch = RecordBatch(build_batch([Record(i, 1, b"k", b"v") for i in range(3)],
                                    producer_id=7, producer_epoch=1, base_sequence=2**31 - 2))
    assert dump.batch_last_sequence(batch) == 0
    assert [dump.record_sequence(batch, r.offset) for r in batch.records()] == [2**31 - 2, 2**31 - 1, 0]
    assert dump.decrement_sequence(0, 2) == 2**31 - 2


def test_log_append_time_stamps_every_record_with_the_batch_max_timestamp():
    raw = bytearray(build_batch([Record(0, 5, b"k", b"v")], timestamp_type="LogAppendTime",
                                max_timestamp=99))
    batch = RecordBatch(raw)
    assert dump.record_line(batch, batch.records()[0], print_data=False).startswith(
        "| offset: 0 LogAppendTime: 99 ")


def test_delete_horizon_prints_as_java_optional_long():
    assert dump.optional_long(None) == "OptionalLong.empty"
    assert dump.optional_long(12) == "OptionalLong[12]"


def test_control_records_decode_end_transaction_markers():
    key = struct.pack(">hh", 0, 1)
    value = struct.pack(">hi", 0, 5)
    assert dump.control_fields(key, value) == {"endTxnMarker": "COMMIT", "coordinatorEpoch": 5}
    assert dump.control_fields(struct.pack(">hh", 0, 2), b"") == {
        "controlType": "LEADER_CHANGE", "controlTypeId": 2}
    with pytest.raises(CorruptRecordError):
        dump.control_fields(b"\x00", None)


def test_invalid_utf8_becomes_replacement_characters_like_java():
    assert dump.java_string(b"a\xffb") == "a\ufffdb"


def test_batch_spans_stop_before_a_torn_tail_and_reject_tiny_lengths():
    one = build_batch([Record(0, 1, b"k", b"v")])
    two = one + build_batch([Record(1, 1, b"k", b"v")], base_offset=1)
    assert list(dump.iter_batch_spans(two + two[:30])) == [(0, len(one)), (len(one), len(one))]
    assert list(dump.iter_batch_spans(two + b"\x00" * 17)) == [(0, len(one)), (len(one), len(one))]
    bad = bytearray(one + b"\x00" * 20)
    struct.pack_into(">i", bad, len(one) + 8, 13)
    with pytest.raises(CorruptRecordError, match="smaller than minimum record overhead"):
        list(dump.iter_batch_spans(bad))


def test_index_helpers_stop_at_the_first_zero_filled_slot():
    data = struct.pack(">iiiiii", 3, 100, 7, 200, 0, 0)
    offsets, positions = dump.read_offset_index(data, 10)
    assert offsets.tolist() == [13, 17, 10] and positions.tolist() == [100, 200, 0]
    assert dump.sparse_entry_count(offsets, 10) == 2
    assert dump.lookup_position(offsets[:2], positions[:2], 16) == 100
    assert dump.lookup_position(offsets[:2], positions[:2], 12) == 0


def test_sanity_checks_use_kafkas_messages():
    offsets = np.array([5], dtype=np.int64)
    assert "neither positive nor a multiple of 8" in dump.offset_index_sanity_error(offsets, 9, 0, "/x")
    assert dump.offset_index_sanity_error(offsets, 8, 0, "/x") is None
    ts = np.array([10, 0], dtype=np.int64)
    assert "last timestamp is 0 which is less than the first timestamp 10" in dump.time_index_sanity_error(
        ts, np.array([1, 0]), 24, 0, "/x")


def _snapshot(entries: list[tuple]) -> bytes:
    body = struct.pack(">i", len(entries)) + b"".join(struct.pack(">qhiqiqiq", *e) for e in entries)
    return struct.pack(">hI", 1, crc32c(body)) + body


def test_producer_snapshot_lines_match_kafkas_format():
    data = _snapshot([(42, 3, 9, 120, 4, 1700, 7, 110), (43, 0, -1, -1, 0, 5, -1, -1)])
    first, second = dump.read_producer_snapshot(data)
    assert dump.snapshot_entry_line(first) == (
        "producerId: 42 producerEpoch: 3 coordinatorEpoch: 7 currentTxnFirstOffset: OptionalLong[110] "
        "lastTimestamp: 1700 firstSequence: 5 lastSequence: 9 lastOffset: 120 offsetDelta: 4 timestamp: 1700"
    )
    assert dump.snapshot_entry_line(second) == (
        "producerId: 43 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
        "lastTimestamp: 5 "
    )


@pytest.mark.parametrize(("data", "message"), [
    (b"", "Snapshot failed schema validation: Error reading field 'version': java.nio.BufferUnderflowException"),
    (struct.pack(">hIi", 1, 0, 3), "Error reading array of size 3, only 0 bytes available"),
    (struct.pack(">hIi", 1, 0, 1) + bytes(9),
     "Error reading field 'producer_entries': Error reading field 'epoch': java.nio.BufferUnderflowException"),
    (struct.pack(">hIi", 1, 0, -1), "Error reading field 'producer_entries': Array size -1 cannot be negative"),
    (struct.pack(">hIi", 2, 0, 0), "Snapshot contained an unknown file version 2"),
    (struct.pack(">hIi", 1, 1, 0), "Snapshot is corrupt (CRC is no longer valid). Stored crc: 1."),
])
def test_corrupt_snapshots_raise_kafkas_messages(data, message):
    with pytest.raises(CorruptSnapshotError, match=message.replace("(", r"\(").replace(")", r"\)")):
        dump.read_producer_snapshot(data)


def test_aborted_txns_ignore_a_partial_entry_and_reject_unknown_versions():
    entry = struct.pack(">hqqqq", 0, 7, 10, 20, 30)
    (txn,) = dump.read_aborted_txns(entry + b"\x00" * 5, "/x")
    assert dump.aborted_txn_line(txn) == (
        "version: 0 producerId: 7 firstOffset: 10 lastOffset: 20 lastStableOffset: 30")
    with pytest.raises(CorruptRecordError, match="Unexpected aborted transaction version 1"):
        dump.read_aborted_txns(struct.pack(">hqqqq", 1, 7, 10, 20, 30), "/x")


def test_reports_list_pairs_newest_first_like_kafkas_scala_lists():
    assert dump.index_mismatch_report("/p", [(1, 2), (3, 4)]) == [
        "Mismatches in :/p", "  Index offset: 3, log offset: 4", "  Index offset: 1, log offset: 2"]
    assert dump.non_consecutive_report("/p", [(1, 3)]) == ["Non-consecutive offsets in /p", "  1 is followed by 3"]


@pytest.mark.parametrize("options", [
    {},
    {"producer_id": 3, "producer_epoch": 0, "base_sequence": 2**31 - 2},
    {"timestamp_type": "LogAppendTime", "max_timestamp": 77},
    {"compression": "zstd"},
])
def test_bulk_record_lines_equal_the_per_record_lines(options):
    records = [Record(0, 5, b"k", b"v", (("a", b"1"), ("b", None))), Record(1, 9, None, None),
               Record(2, 3, "ключ".encode(), b"\xff\xfe"), Record(3, 4, b"", b"")]
    batch = RecordBatch(build_batch(records, **options))
    for print_data in (False, True):
        assert dump.record_lines(batch, print_data=print_data) == [
            dump.record_line(batch, r, print_data=print_data) for r in batch.records()]


def test_delete_horizon_batches_print_it():
    batch = RecordBatch(build_batch([Record(0, 5, b"k", None)], delete_horizon_ms=123))
    assert "deleteHorizonMs: OptionalLong[123] " in dump.batch_line(batch, 0)


def test_legacy_messages_print_offset_lines_and_their_crc_with_kafkas_brace():
    from logstore.records.legacy import build_legacy_entry

    batch = read_batch(build_legacy_entry([Record(3, 5, b"k", None)], magic=0))
    assert dump.batch_line(batch, 0) == (
        f"offset: 3 position: 0 NoTimestampType: -1 size: {batch.size_in_bytes} magic: 0 "
        f"compresscodec: none crc: {batch.crc} isvalid: true")
    entry = dump.LegacyEntry(True, batch.crc)
    assert dump.record_line(batch, batch.records()[0], print_data=True, legacy=entry) == (
        f"| offset: 3 NoTimestampType: -1 keySize: 1 valueSize: -1 isValid: true crc: {batch.crc}}} key: k")

"""compaction.decode: segment bytes to plan columns, and Kafka-shaped rebuilt batches."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.decode import decode, empty_batch, rebuild_batches
from compaction.offset_map import hash_key
from logstore.records import (
    Record,
    RecordBatch,
    build_batch,
    build_control_batch,
    build_legacy_entry,
    iter_batches,
)
from logstore.records.control import ABORT
from logstore.records.header import NO_TIMESTAMP


def _arr(data: bytes) -> np.ndarray:
    return np.frombuffer(data, np.uint8)


records_st = st.lists(
    st.tuples(st.one_of(st.none(), st.binary(max_size=20)), st.one_of(st.none(), st.binary(max_size=300)),
              st.integers(0, 10**6), st.lists(st.tuples(st.text(max_size=3), st.one_of(st.none(), st.binary(max_size=3))), max_size=2)),
    min_size=1, max_size=12)


@settings(max_examples=80, deadline=None)
@given(records_st, st.sampled_from(["none", "gzip", "lz4", "zstd", "snappy"]), st.data())
def test_decode_then_rebuild_matches_records_and_kafkas_builder(recs, codec, data):
    base = 1000
    records = [Record(base + i, 10**9 + ts, k, v, tuple(h)) for i, (k, v, ts, h) in enumerate(recs)]
    raw = build_batch(records, base_offset=base, compression=codec, producer_id=7, producer_epoch=1,
                      base_sequence=3, partition_leader_epoch=4)
    d = decode(_arr(raw), segment_base=base)
    assert d.records.offset.tolist() == [r.offset for r in records]
    assert d.timestamp.tolist() == [r.timestamp for r in records]
    assert d.records.has_key.tolist() == [r.key is not None for r in records]
    assert d.records.is_tombstone.tolist() == [r.value is None for r in records]
    for i, r in enumerate(records):
        hashed = (int(d.records.key_hash1[i]), int(d.records.key_hash2[i]))
        assert hashed == (hash_key(r.key) if r.key is not None else (0, 0))
    keep = sorted(data.draw(st.sets(st.integers(0, len(records) - 1), min_size=1)))
    horizon = data.draw(st.sampled_from([NO_TIMESTAMP, 5 * 10**9]))
    mask = np.isin(np.arange(len(records)), keep)
    out = bytes(rebuild_batches(d, np.array([0]), mask, np.array([horizon], np.int64))[0])
    batch = RecordBatch(out)
    batch.validate()
    assert batch.base_offset == base and batch.last_offset == records[-1].offset
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 1, 3)
    assert batch.partition_leader_epoch == 4
    assert batch.compression == codec
    assert batch.records() == [records[i] for i in keep]
    assert batch.delete_horizon_ms == (None if horizon == NO_TIMESTAMP else horizon)
    if codec == "none":
        kept = [records[i] for i in keep]
        expected = build_batch(kept, base_offset=base, producer_id=7, producer_epoch=1, base_sequence=3,
                               partition_leader_epoch=4, last_offset_delta=len(records) - 1,
                               **({} if horizon == NO_TIMESTAMP else {"delete_horizon_ms": horizon}))
        assert out == expected


def test_empty_batch_keeps_offsets_and_producer_fields():
    raw = build_batch([Record(5, 100, b"k", b"v"), Record(6, 200, b"k", b"w")], base_offset=5,
                      compression="gzip", producer_id=9, producer_epoch=2, base_sequence=11,
                      is_transactional=True)
    d = decode(_arr(raw), segment_base=0)
    out = RecordBatch(empty_batch(d.header[0]))
    out.validate()
    assert (out.base_offset, out.last_offset, out.record_count) == (5, 6, 0)
    assert (out.producer_id, out.producer_epoch, out.base_sequence, out.is_transactional) == (9, 2, 11, True)
    assert out.compression == "none" and out.base_timestamp == -1 and out.max_timestamp == 200
    assert len(empty_batch(d.header[0])) == 61


def test_decode_reads_control_type_and_legacy_entries_and_stops_at_a_torn_tail():
    ctl = build_control_batch("abort", producer_id=3, producer_epoch=0, coordinator_epoch=1,
                              base_offset=2, timestamp=50)
    legacy = build_legacy_entry([Record(3, 60, b"a", None)], magic=1)
    plain = build_batch([Record(0, 1, b"x", b"1"), Record(1, 2, None, b"2")])
    data = plain + ctl + legacy + plain[:30]
    d = decode(_arr(data), segment_base=0)
    assert d.valid_end == len(data) - 30
    assert d.batches.control_type.tolist() == [-1, ABORT, -1]
    assert d.batches.magic.tolist() == [2, 2, 1]
    assert d.records.offset.tolist() == [0, 1, 2, 3]
    assert d.records.has_key.tolist() == [True, False, True, True]
    assert d.records.is_tombstone.tolist() == [False, False, False, True]
    assert (int(d.records.key_hash1[3]), int(d.records.key_hash2[3])) == hash_key(b"a")


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_legacy_wrapper_rebuilds_with_the_kept_messages(codec):
    recs = [Record(10, 1, b"a", b"1"), Record(11, 2, b"b", b"2")] if codec == "gzip" else [Record(10, 1, b"a", b"1")]
    d = decode(_arr(build_legacy_entry(recs, magic=1, compression=codec)), segment_base=0)
    mask = np.arange(len(recs)) == len(recs) - 1
    out = bytes(rebuild_batches(d, np.array([0]), mask, np.array([NO_TIMESTAMP], np.int64))[0])
    got = [r for b in iter_batches(out) for r in b.records()]
    assert [(r.offset, r.key, r.value) for r in got] == [(recs[-1].offset, recs[-1].key, recs[-1].value)]

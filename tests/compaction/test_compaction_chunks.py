"""Bounded-memory reading for dry runs and audits: decode.decode_chunks and DistinctKeys."""

from __future__ import annotations

import random
from unittest import mock

import numpy as np
import pytest

import compaction.cleaner
import compaction.decode
from compaction.cleaner import Cleaner, DecodeCache
from compaction.decode import decode, decode_chunks
from compaction.distinct_keys import DistinctKeys
from compaction.offset_map import hash_key
from logstore import Log
from logstore.clock import ManualClock
from logstore.errors import CorruptRecordError
from logstore.records import Record, build_batch, build_control_batch, build_legacy_entry

COMPACT = {"cleanup.policy": "compact", "file.delete.delay.ms": 0}


def _segment_file(path, batches=40, seed=0):
    rng = random.Random(seed)
    raw = b""
    offset = 0
    for b in range(batches):
        n = rng.randrange(1, 30)
        records = [Record(offset + i, 10**12 + i, b"k%d" % rng.randrange(50),
                          None if rng.random() < 0.1 else b"v" * rng.randrange(200)) for i in range(n)]
        raw += build_batch(records, base_offset=offset, compression="gzip" if b % 5 == 0 else "none")
        offset += n
    path.write_bytes(raw)
    return raw


@pytest.mark.parametrize("chunk", [1, 100, 1000, 4096, 1 << 20])
def test_chunks_decode_the_same_records_as_the_whole_file(tmp_path, chunk):
    raw = _segment_file(tmp_path / "s.log")
    whole = decode(np.frombuffer(raw, np.uint8), segment_base=0)
    parts = list(decode_chunks(tmp_path / "s.log", segment_base=0, size=len(raw), chunk_bytes=chunk))
    assert len(parts) >= (2 if chunk < len(raw) else 1)
    for name in ("offset", "key_hash1", "key_hash2", "has_key", "is_tombstone"):
        joined = np.concatenate([getattr(p.records, name) for p in parts])
        assert joined.tolist() == getattr(whole.records, name).tolist()
    positions = np.concatenate([p.position + p.file_position for p in parts])
    assert positions.tolist() == whole.position.tolist()
    assert all(p.size.sum() <= max(chunk, p.size.max()) for p in parts)  # one chunk, or one batch


def test_bytes_after_the_last_batch_are_named_at_their_file_position(tmp_path):
    raw = _segment_file(tmp_path / "s.log")
    (tmp_path / "s.log").write_bytes(raw + b"\x00" * 7)
    with pytest.raises(CorruptRecordError, match="7 bytes after the last complete batch") as err:
        list(decode_chunks(tmp_path / "s.log", segment_base=0, size=len(raw) + 7, chunk_bytes=500))
    assert err.value.position == len(raw)
    torn = list(decode_chunks(tmp_path / "s.log", segment_base=0, size=len(raw) + 7, chunk_bytes=500,
                              torn_tail_ok=True))
    assert sum(len(p.records) for p in torn) == len(decode(np.frombuffer(raw, np.uint8), segment_base=0).records)


def test_a_corrupt_batch_is_placed_in_the_file_not_the_chunk(tmp_path):
    raw = bytearray(_segment_file(tmp_path / "s.log"))
    whole = decode(np.frombuffer(bytes(raw), np.uint8), segment_base=0)
    victim = int(whole.position[30])
    raw[victim + 61] = 0x7F  # the first record's length varint, now past the batch's end
    (tmp_path / "s.log").write_bytes(bytes(raw))
    with pytest.raises(CorruptRecordError) as err:
        list(decode_chunks(tmp_path / "s.log", segment_base=0, size=len(raw), chunk_bytes=300))
    assert err.value.position == victim


@pytest.mark.parametrize("memory_keys", [1 << 20, 1024])
def test_distinct_keys_count_exactly_in_memory_or_spilled(tmp_path, memory_keys):
    rng = np.random.default_rng(1)
    keys = [b"key-%d" % k for k in rng.integers(0, 200_000, 300_000).tolist()]
    hashes = np.array([hash_key(k) for k in keys], np.uint64)
    valid = rng.random(len(keys)) < 0.9
    with DistinctKeys(initial_keys=16, memory_keys=memory_keys, spill_dir=str(tmp_path)) as counter:
        for lo in range(0, len(keys), 7_000):
            part = slice(lo, lo + 7_000)
            counter.add(hashes[part, 0].copy(), hashes[part, 1].copy(), valid[part])
        assert counter.spilled == (memory_keys < 200_000)
        assert counter.size == len({k for k, v in zip(keys, valid, strict=True) if v})
        assert counter._map is None or counter._map.memory_bytes < 60 * counter.size
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("map_bytes", [64 * 20, 1 << 20])
def test_a_dry_run_in_small_chunks_predicts_the_real_run(tmp_path, map_bytes):
    """Chunks smaller than one batch and an offset map that fills mid-segment: the dry run's
    numbers (and where the map stopped) equal the real round's."""
    clock = ManualClock(10**12)
    log = Log.open(tmp_path / "t-0", {**COMPACT, "segment.bytes": 8192,
                                      "log.cleaner.dedupe.buffer.size": map_bytes}, clock=clock)
    rng = random.Random(5)
    for i in range(600):
        log.append([(b"k%d" % rng.randrange(120), None if i % 17 == 0 else b"v%d" % i)
                    for _ in range(rng.randrange(1, 4))])
    log.roll()
    with mock.patch.object(compaction.decode, "CHUNK_BYTES", 40):
        dry = Cleaner(log.config).clean(log, dry_run=True)
    chunked = Cleaner(log.config).clean(log, dry_run=True, distinct_keys=120)
    real = Cleaner(log.config).clean(log)
    assert real.map_full if map_bytes < 4096 else real.segments_cleaned > 1
    for field in ("records_removed", "records_written", "tombstones_removed", "bytes_written",
                  "bytes_read", "end_offset", "map_keys", "map_full", "removed_by_reason"):
        assert getattr(dry, field) == getattr(real, field) == getattr(chunked, field), field
    log.close()


def test_the_whole_segment_and_its_chunks_decode_alike(tmp_path):
    log = Log.open(tmp_path / "t-0", {**COMPACT}, clock=ManualClock(10**12))
    for i in range(300):
        log.append([(b"k%d" % (i % 7), b"v%d" % i)])
    log.roll()
    seg = log.segments[0]
    whole = decode(np.frombuffer(seg.log_path.read_bytes(), np.uint8), segment_base=seg.base_offset)
    parts = list(decode_chunks(seg.log_path, segment_base=seg.base_offset, size=seg.size, chunk_bytes=512))
    assert np.concatenate([p.records.offset for p in parts]).tolist() == whole.records.offset.tolist()
    log.close()


DAY = 24 * 3600 * 1000


def _mixed_log(path, clock, map_bytes):
    """A log of every kind of batch the cleaner rewrites: five codecs, tombstones, magic 0/1
    entries, committed and aborted transactions with their markers, and batches of 12 KiB."""
    log = Log.open(path, {**COMPACT, "segment.bytes": 96 * 1024, "index.interval.bytes": 700,
                          "delete.retention.ms": DAY, "log.cleaner.io.buffer.size": 2 * 1500,
                          "log.cleaner.dedupe.buffer.size": map_bytes}, clock=clock)
    rng = random.Random(11)
    offset, seq = log.log_end_offset, 0
    for _ in range(700):
        ts = clock.time_ms() - rng.randrange(DAY)
        kind = rng.choice(["none", "gzip", "snappy", "lz4", "zstd", "magic0", "magic1", "txn", "big"])
        n = 3 if kind == "big" else rng.randrange(1, 8)
        records = [Record(offset + i, ts + i, b"k%d" % rng.randrange(60),
                          None if rng.random() < 0.15 else b"v" * (4000 if kind == "big" else rng.randrange(1, 90)))
                   for i in range(n)]
        if kind.startswith("magic"):
            raw = build_legacy_entry(records, magic=int(kind[-1]), compression="gzip" if n > 1 else "none")
        elif kind == "txn":
            raw = build_batch(records, base_offset=offset, producer_id=7, producer_epoch=0,
                              base_sequence=seq, is_transactional=True, compression="lz4")
            seq += n
        else:
            raw = build_batch(records, base_offset=offset, compression="none" if kind == "big" else kind)
        log.append_as_follower(raw)
        offset += n
        if kind == "txn":
            log.append_as_follower(build_control_batch(
                rng.choice(["commit", "abort"]), producer_id=7, producer_epoch=0, coordinator_epoch=0,
                base_offset=offset, timestamp=ts))
            offset += 1
    log.high_watermark = log.log_end_offset
    log.roll()
    return log


def _segment_files(directory):
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())
            if p.suffix in (".log", ".index", ".timeindex", ".txnindex")}


@pytest.mark.parametrize("map_bytes", [64 * 20, 1 << 20])
@pytest.mark.parametrize(("chunk_bytes", "cache_bytes"), [(1, 0), (900, 0), (900, 1 << 30), (5000, 0)])
def test_cleaning_in_small_chunks_writes_the_same_files_as_whole_segments(tmp_path, chunk_bytes, cache_bytes,
                                                                          map_bytes):
    """Three rounds (tombstones get a horizon, then expire; aborted data goes, markers after
    it) over segments of many chunks, with batches larger than a chunk and read-buffer fills
    that span chunks: every segment, index and transaction index file is the same byte for
    byte as when each segment is decoded in one piece (the default chunk holds it whole);
    the small offset map fills mid-segment; segments decoded once for both passes
    (DecodeCache) or once per pass."""
    runs = {}
    for name, chunk in (("whole", compaction.decode.CHUNK_BYTES), ("chunked", chunk_bytes)):
        clock = ManualClock(10 * DAY)
        log = _mixed_log(tmp_path / name / "t-0", clock, map_bytes)
        assert max(s.size for s in log.segments) > 10 * chunk_bytes
        files = []
        with mock.patch.object(compaction.decode, "CHUNK_BYTES", chunk), \
                mock.patch.object(compaction.cleaner, "DECODE_CACHE_BYTES", cache_bytes):
            for _ in range(3):
                result = Cleaner(log.config).clean(log)
                files.append((_segment_files(log.dir), result.end_offset, result.bytes_written,
                              result.map_full, result.removed_by_reason))
                clock.advance(DAY)
                log.append([(b"k%d" % i, b"later") for i in range(3)])
                log.roll()
        runs[name] = files
        log.close()
    assert runs["chunked"] == runs["whole"]
    assert all(any(r[4][reason] for r in runs["whole"])
               for reason in ("duplicate", "aborted", "tombstone_expired", "marker_expired"))
    assert runs["whole"][0][3] == (map_bytes < 4096)


def test_the_decode_cache_keeps_whole_segments_within_its_limit(tmp_path):
    log = Log.open(tmp_path / "t-0", {**COMPACT, "segment.bytes": 4096}, clock=ManualClock(10**12))
    for i in range(200):
        log.append([(b"k%d" % (i % 7), b"v" * 50)])
    log.roll()
    segments = log.segments[:4]
    with mock.patch.object(compaction.decode, "CHUNK_BYTES", 1000):
        sizes = [sum(d.nbytes for d in compaction.cleaner.segment_chunks(s)) for s in segments]
        cache = DecodeCache(sizes[0] + sizes[1] + sizes[2] // 2)
        read = [list(cache.read(s)) for s in segments[:3]]
        partial = cache.read(segments[3])
        next(partial)
        partial.close()  # a map that filled mid-segment: the segment is not kept
        assert cache.used == sizes[0] + sizes[1] <= cache.limit
        taken = [list(cache.take(s)) for s in segments]
    kept = [(a, b) for k in (0, 1) for a, b in zip(taken[k], read[k], strict=True)]
    assert all(a is b for a, b in kept)  # the very chunks the map pass read
    assert not any(a is b for a, b in zip(taken[2], read[2], strict=True))  # decoded again
    assert [d.records.offset.tolist() for d in taken[2]] == [d.records.offset.tolist() for d in read[2]]
    assert cache.used == 0
    log.close()

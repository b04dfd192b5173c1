"""LogValidator on its own (as Kafka's LogValidatorTest): a leader append's checks and the offsets,
epochs and timestamps it stamps in place; a follower append's checks. No log is opened."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logstore import LogConfig, Record
from logstore.errors import CorruptRecordError, InvalidRecordError, RecordTooLargeError
from logstore.log_validator import validate_follower_append, validate_leader_append
from logstore.records import build_batch, build_control_batch, build_legacy_entry, iter_batches
from tests.log.log_builders import batch
from tests.support.clock import NOW


def leader(data, *, next_offset=0, now=NOW, epoch=0, origin="client", **config):
    """Validate `data` as a leader append of partition t-0 with the given topic configs."""
    return validate_leader_append(bytearray(data), LogConfig.coerce(config), next_offset, now, epoch,
                                  origin, source="t-0")


def test_offsets_and_the_leader_epoch_are_assigned_from_the_next_offset():
    buf = bytearray(batch(3) + batch(2, compression="gzip"))
    v = validate_leader_append(buf, LogConfig(), 40, NOW, 7, "client", source="t-0")
    assert (v.first_offset, v.last_offset, v.record_count) == (40, 44, 5)
    assert [(b.base_offset, b.partition_leader_epoch) for b in iter_batches(buf)] == [(40, 7), (43, 7)]
    assert all(b.is_valid() for b in iter_batches(buf))


@given(sizes=st.lists(st.integers(1, 20), min_size=1, max_size=6), start=st.integers(0, 2**40))
def test_assigned_offsets_are_dense_like_a_list(sizes, start):
    data = b"".join(batch(n) for n in sizes)
    v = leader(data, next_offset=start)
    model = list(range(start, start + sum(sizes)))
    got = [r.offset for b in v.batches for r in b.records()]
    assert got == model and (v.first_offset, v.last_offset) == (model[0], model[-1])


def test_log_append_time_stamps_max_timestamp_and_new_crc():
    v = leader(batch(3, ts=5), **{"message.timestamp.type": "LogAppendTime"})
    (stored,) = v.batches
    assert v.max_timestamp == NOW == stored.max_timestamp
    assert stored.timestamp_type == "LogAppendTime" and stored.is_valid()


def test_wrong_header_max_timestamp_is_rewritten_with_a_valid_crc():
    v = leader(build_batch([Record(0, NOW, b"k", b"v")], max_timestamp=NOW - 100))
    (stored,) = v.batches
    assert stored.max_timestamp == NOW and stored.is_valid()


def test_batch_over_max_message_bytes_is_rejected():
    with pytest.raises(RecordTooLargeError, match="exceeds the maximum configured value of 100"):
        leader(batch(5), **{"max.message.bytes": 100})


def test_timestamps_outside_the_before_and_after_bounds_are_rejected():
    cfg = {"message.timestamp.before.max.ms": 1000, "message.timestamp.after.max.ms": 10}
    with pytest.raises(InvalidRecordError, match="before.max.ms"):
        leader(batch(1, ts=NOW - 1001), **cfg)
    with pytest.raises(InvalidRecordError, match="after.max.ms"):
        leader(batch(1, ts=NOW + 11), **cfg)
    assert leader(batch(1, ts=NOW - 1000), **cfg).record_count == 1
    assert leader(batch(1, ts=NOW + 10), **cfg).record_count == 1


def test_default_after_max_is_one_hour():
    leader(batch(1, ts=NOW + 3_600_000))
    with pytest.raises(InvalidRecordError):
        leader(batch(1, ts=NOW + 3_600_001))


def test_corrupt_batch_and_trailing_bytes_are_rejected():
    data = bytearray(batch(2))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        leader(data)
    with pytest.raises(CorruptRecordError, match="trailing"):
        leader(batch(1) + b"\x00\x01")


def test_an_empty_append_is_rejected():
    with pytest.raises(InvalidRecordError, match="at least one record batch"):
        leader(b"")


def test_compressed_batch_whose_count_disagrees_with_its_records_is_rejected():
    # Header says 3 records (lastOffsetDelta 2), the compressed body holds 2.
    data = build_batch([Record(0, NOW, b"k", b"v"), Record(2, NOW, b"k", b"v")], compression="gzip")
    with pytest.raises((InvalidRecordError, CorruptRecordError)):
        leader(data)


def test_client_control_batches_and_keyless_compacted_records_are_rejected():
    marker = build_control_batch("commit", producer_id=1, producer_epoch=0, coordinator_epoch=0, timestamp=NOW)
    with pytest.raises(InvalidRecordError, match="control"):
        leader(marker, **{"cleanup.policy": "compact"})
    with pytest.raises(InvalidRecordError, match="without a key"):
        leader(build_batch([Record(0, NOW, None, b"v")]), **{"cleanup.policy": "compact"})
    assert leader(marker, origin="coordinator", **{"cleanup.policy": "compact"}).record_count == 1


def test_compression_type_recompresses_appended_batches():
    v = leader(batch(3) + batch(1), next_offset=5, **{"compression.type": "zstd"})
    assert [b.compression for b in v.batches] == ["zstd", "zstd"]
    assert [r.offset for b in v.batches for r in b.records()] == [5, 6, 7, 8]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4"])
@pytest.mark.parametrize("magic", [0, 1])
def test_a_legacy_wrapper_becomes_one_v2_batch_with_its_codec(magic, codec):
    records = [Record(i, NOW + i, b"k%d" % i, b"v%d" % i) for i in range(3)]
    v = leader(build_legacy_entry(records, magic=magic, compression=codec), next_offset=100, epoch=4)
    (converted,) = v.batches
    assert (converted.magic, converted.compression, converted.timestamp_type) == (2, codec, "CreateTime")
    assert (converted.base_offset, converted.partition_leader_epoch, converted.producer_id) == (100, 4, -1)
    stamp = [-1] * 3 if magic == 0 else [NOW, NOW + 1, NOW + 2]
    assert converted.records() == [Record(100 + i, stamp[i], b"k%d" % i, b"v%d" % i) for i in range(3)]
    assert converted.max_timestamp == stamp[-1] and converted.is_valid()
    assert (v.first_offset, v.last_offset, v.record_count, v.max_timestamp) == (100, 102, 3, stamp[-1])
    follower = validate_follower_append(build_legacy_entry(records, magic=magic, compression=codec), source="t-0")
    assert follower.record_count == 3 and follower.batches[0].magic == magic


def test_a_run_of_uncompressed_legacy_messages_becomes_one_batch():
    run = b"".join(build_legacy_entry([Record(i, NOW + i, b"k", b"v%d" % i)], magic=1) for i in range(4))
    v = leader(run, next_offset=7, **{"message.timestamp.type": "LogAppendTime"}, now=NOW + 50)
    (converted,) = v.batches
    assert (converted.compression, converted.timestamp_type, converted.record_count) == ("none", "LogAppendTime", 4)
    assert [(r.offset, r.timestamp, r.value) for r in converted.records()] == [
        (7 + i, NOW + 50, b"v%d" % i) for i in range(4)]
    recompressed = leader(run, **{"compression.type": "zstd"})
    assert [b.compression for b in recompressed.batches] == ["zstd"]


def test_legacy_leader_appends_refuse_what_kafka_refuses():
    one = build_legacy_entry([Record(0, NOW, b"k", b"v")], magic=1)
    wrapper = build_legacy_entry([Record(0, NOW, b"k", b"v"), Record(1, NOW, b"k", b"w")], magic=1,
                                 compression="gzip")
    with pytest.raises(InvalidRecordError, match="batch magic 0 is not the same as the first batch's magic byte 1"):
        leader(one + build_legacy_entry([Record(0, -1, b"k", b"v")], magic=0))
    with pytest.raises(InvalidRecordError, match="batch magic 2 is not the same as the first batch's magic byte 1"):
        leader(one + batch(1))
    with pytest.raises(InvalidRecordError, match="batch magic 1 is not the same as the first batch's magic byte 2"):
        leader(batch(1) + one)
    with pytest.raises(InvalidRecordError, match="compressed outer record has more than one batch"):
        leader(wrapper + wrapper)
    with pytest.raises(InvalidRecordError, match="cannot accept a record without a key"):
        leader(build_legacy_entry([Record(0, NOW, None, b"v")], magic=1), **{"cleanup.policy": "compact"})
    log_append = build_legacy_entry([Record(0, NOW, b"k", b"v")], magic=1, log_append_time=NOW)
    with pytest.raises(InvalidRecordError, match="must not set LogAppendTime"):
        leader(log_append, **{"message.timestamp.type": "LogAppendTime"})
    corrupt = bytearray(wrapper)
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        leader(corrupt)


def test_follower_batches_keep_their_offsets_and_must_increase():
    data = batch(2, base_offset=10, partition_leader_epoch=7) + batch(1, base_offset=12)
    v = validate_follower_append(data, source="t-0")
    assert (v.first_offset, v.last_offset, v.record_count) == (10, 12, 3)
    with pytest.raises(InvalidRecordError, match="out of order"):
        validate_follower_append(batch(1, base_offset=12) + batch(1, base_offset=10), source="t-0")
    assert validate_follower_append(b"", source="t-0").batches == []

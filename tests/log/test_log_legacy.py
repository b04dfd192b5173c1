"""Legacy (magic 0/1) data through a Log: follower appends roll as Kafka rolls them, leader
appends are converted to v2 batches as Kafka's LogValidator converts them."""

from __future__ import annotations

import pytest

from logstore import Log, Record
from logstore.records import build_legacy_entry
from logstore.records.header import V2_HEADER_SIZE
from tests.log.log_builders import offsets
from tests.records.test_records_compression import jdk_gzip
from tests.support.clock import NOW


def wrapper(first: int, count: int, *, magic: int = 1, codec: str = "gzip") -> bytes:
    return build_legacy_entry([Record(first + i, NOW + i, b"k%d" % i, b"v" * 40) for i in range(count)],
                              magic=magic, compression=codec)


@pytest.mark.parametrize("magic", [0, 1])
def test_a_wrapper_that_rolls_names_its_segment_by_its_first_inner_offset(tmp_path, clock, magic):
    size = len(wrapper(0, 5, magic=magic))
    with Log.open(tmp_path / "t-0", {"segment.bytes": size + 10}, clock=clock) as log:
        for first in (0, 5, 10):
            log.append_as_follower(wrapper(first, 5, magic=magic))
        assert [s.base_offset for s in log.segments] == [0, 5, 10]
        assert log.log_end_offset == 15
    names = sorted(p.name for p in (tmp_path / "t-0").glob("*.log"))
    assert names == ["00000000000000000000.log", "00000000000000000005.log", "00000000000000000010.log"]
    with Log.open(tmp_path / "t-0", {"segment.bytes": size + 10}, clock=clock, read_only=True) as log:
        assert offsets(log) == list(range(15))
        assert next(log.read(7).batches()).base_offset == 5  # the wrapper holding 7 starts at 5


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", ["none", "gzip", "lz4"])
def test_a_leader_append_of_legacy_messages_is_stored_as_v2(tmp_path, clock, magic, codec):
    data = wrapper(0, 1 if codec == "none" else 4, magic=magic, codec=codec)
    with Log.open(tmp_path / "t-0", clock=clock) as log:
        log.append([(b"a", b"b")], leader_epoch=3)
        info = log.append(data, leader_epoch=3)
        count = info.last_offset - info.first_offset + 1
        assert (info.first_offset, count) == (1, 1 if codec == "none" else 4)
        (batch,) = [b for b in log.read(1).batches()]
        assert (batch.magic, batch.compression, batch.partition_leader_epoch) == (2, codec, 3)
        stamps = [r.timestamp for r in batch.records()]
        assert stamps == ([-1] * count if magic == 0 else [NOW + i for i in range(count)])
        assert offsets(log) == list(range(1 + count))


@pytest.mark.parametrize("magic", [0, 1])
def test_a_converted_gzip_wrapper_is_compressed_as_kafka_compresses_it_on_jdk17(tmp_path, clock, magic):
    with Log.open(tmp_path / "t-0", clock=clock) as log:
        log.append(wrapper(0, 6, magic=magic), leader_epoch=0)
        (batch,) = log.read(0).batches()
        body = bytes(batch.view[V2_HEADER_SIZE:])
        assert batch.compression == "gzip" and body == jdk_gzip(batch.records_bytes())

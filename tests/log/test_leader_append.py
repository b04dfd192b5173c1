"""The leader's compiled append (logstore.leader_append) against the rules it shares with the
rest of the engine: what it writes and indexes is what recovery rebuilds from the same bytes,
and a failed write is reported without moving the log."""

from __future__ import annotations

import errno
import os
import shutil

import numba
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logstore import Log, LogConfig, Record, leader_append
from logstore.clock import ManualClock
from logstore.errors import CorruptRecordError
from logstore.log_files import INDEX_SUFFIX, TIME_INDEX_SUFFIX
from logstore.records import build_batch, native_crc
from tests.support.clock import NOW

appends = st.lists(
    st.tuples(
        st.integers(1, 6),  # records
        st.integers(0, 700),  # value size
        st.integers(-5_000, 5_000),  # timestamp step
        st.booleans(),  # a producer id (the general path)
        st.booleans(),  # a new leader epoch (the general path)
    ),
    min_size=1,
    max_size=40,
)


def _batch(count: int, size: int, timestamp: int, producer: bool, sequence: int) -> bytes:
    records = [Record(i, timestamp + i, b"k%d" % i, b"v" * size) for i in range(count)]
    if not producer:
        return build_batch(records)
    return build_batch(records, producer_id=7, producer_epoch=0, base_sequence=sequence)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(appends, st.integers(0, 3000), st.integers(6000, 20_000), st.sampled_from([48, 120, 10 * 1024 * 1024]),
       st.sampled_from([4_000, 600_000]))
def test_appended_segments_and_indexes_are_what_recovery_rebuilds(tmp_path, ops, interval, segment_bytes,
                                                                  index_bytes, segment_ms):
    """Whatever path each append takes (plain ones compiled; producer batches, new epochs and
    rolls by size, index fullness or age in Python), the files equal a rebuild from the .log
    files alone: Kafka's recovery rules for index entries and the final time-index entry."""
    shutil.rmtree(tmp_path / "t-0", ignore_errors=True)
    shutil.rmtree(tmp_path / "copy", ignore_errors=True)
    config = LogConfig({"index.interval.bytes": interval, "segment.bytes": segment_bytes,
                        "segment.index.bytes": index_bytes, "segment.ms": segment_ms})
    clock = ManualClock(NOW)
    log = Log.open(tmp_path / "t-0", config=config, clock=clock)
    timestamp, epoch, sequence, expected = NOW, 0, 0, []
    for count, size, step, producer, new_epoch in ops:
        timestamp += step
        epoch += new_epoch
        clock.advance(abs(step))
        info = log.append(_batch(count, size, timestamp, producer, sequence), leader_epoch=epoch)
        sequence += count if producer else 0
        expected.extend(range(info.first_offset, info.last_offset + 1))
    log.close()
    files = {p.name: p.read_bytes() for p in (tmp_path / "t-0").iterdir()}

    copy = tmp_path / "copy" / "t-0"
    shutil.copytree(tmp_path / "t-0", copy)
    for path in copy.iterdir():
        if path.name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX)):
            path.unlink()
    rebuilt = Log.open(copy, config=config, clock=clock)
    assert [r.offset for r in rebuilt.records(0)] == expected
    rebuilt.close()
    assert {p.name: p.read_bytes() for p in copy.iterdir() if p.name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX))} == {
        name: data for name, data in files.items() if name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX))}


def test_a_failed_write_names_the_file_and_leaves_the_log_end(tmp_path):
    log = Log.open(tmp_path / "t-0", clock=ManualClock(NOW))
    log.append(_batch(2, 10, NOW, False, 0))
    active = log.segments[-1]
    read_only = os.open(active.log_path, os.O_RDONLY)
    try:
        os.dup2(read_only, active._state.fd)  # the .log descriptor now refuses writes
        with pytest.raises(OSError) as failure:
            log.append(_batch(3, 10, NOW, False, 0))
        assert failure.value.errno == errno.EBADF
        assert failure.value.filename == str(active.log_path)
        assert log.log_end_offset == 2
        assert active.size == os.path.getsize(active.log_path)
    finally:
        os.close(read_only)
        log.close()


@pytest.mark.parametrize("native", [True, False], ids=["crc in the kernel", "crc in Python"])
def test_a_plain_append_checks_its_crc(tmp_path, monkeypatch, native):
    """With or without the compiled CRC (ADDRESS 0: the package's function was not usable),
    a good batch is written and a batch whose bytes do not match its CRC is refused."""
    if not native:
        monkeypatch.setattr(native_crc, "ADDRESS", 0)
    log = Log.open(tmp_path / "t-0", clock=ManualClock(NOW))
    good = _batch(3, 100, NOW, False, 0)
    assert log.append(good).last_offset == 2
    corrupt = bytearray(good)
    corrupt[-1] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC"):
        log.append(corrupt)
    assert log.log_end_offset == 3
    assert [r.offset for r in log.records(0)] == [0, 1, 2]
    log.close()


def test_every_input_form_reaches_the_compiled_call_with_the_types_it_was_compiled_for(tmp_path, monkeypatch):
    """The kernel is called without numba's per-call typing, so every argument must already
    have the compiled signature's type, whatever form the records came in."""
    real = leader_append._compiled or leader_append._compile()
    seen = []

    def typed(*args):
        seen.append(tuple(numba.typeof(arg) for arg in args))
        return real(*args)

    monkeypatch.setattr(leader_append, "_compiled", typed)
    log = Log.open(tmp_path / "t-0", clock=ManualClock(NOW))
    batch = _batch(2, 10, NOW, False, 0)
    for records in (batch, bytearray(batch), memoryview(bytearray(batch)), memoryview(batch),
                    [(b"k", b"v")], [Record(0, NOW, b"k", b"v")]):
        log.append(records, leader_epoch=np.int64(0))
    log.append(batch, leader_epoch=-1)
    log.close()
    assert len(seen) == 7
    assert set(seen) == {leader_append._SIGNATURE}


@pytest.mark.parametrize("epoch", [1.5, "3", None, 2**31, -2, True])
def test_a_leader_epoch_that_is_not_an_int32_is_refused_before_anything_is_written(tmp_path, epoch):
    log = Log.open(tmp_path / "t-0", clock=ManualClock(NOW))
    if epoch is True:  # bool is an int: epoch 1
        assert log.append(_batch(1, 1, NOW, False, 0), leader_epoch=epoch).last_offset == 0
        assert log.leader_epoch_cache.latest_epoch() == 1
    else:
        with pytest.raises(ValueError, match="leader_epoch"):
            log.append(_batch(1, 1, NOW, False, 0), leader_epoch=epoch)
        assert log.log_end_offset == 0
    log.close()

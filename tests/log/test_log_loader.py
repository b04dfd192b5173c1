"""LogLoader (through Log.open, as Kafka's LogLoaderTest): temporary files, interrupted swaps,
missing or corrupt indexes, torn tails, recovery points and the state built beside the segments."""

import os

import pytest

from logstore import Log, LogConfig
from logstore.errors import InvalidConfigError
from logstore.log_files import INDEX_SUFFIX, SWAP_SUFFIX, TIME_INDEX_SUFFIX, segment_file_name
from logstore.log_loader import LoadState, LogLoader
from logstore.partition_state import PartitionState
from tests.log.log_builders import batch, log_with_cleaned_copy, offsets, open_log
from tests.support.clock import NOW


def test_open_finishes_an_interrupted_swap(tmp_path, clock):
    with open_log(tmp_path, clock, **{"segment.bytes": 200}) as log:
        old, expected, new = log_with_cleaned_copy(log)
        new.change_file_suffixes(".cleaned", ".swap")  # crash right after the .swap rename
        new.close()
    with Log.open(tmp_path / "t-0", clock=clock) as log:
        assert offsets(log) == expected
        assert log.segments[1].base_offset > old[1].base_offset
    assert not [n for n in os.listdir(tmp_path / "t-0") if n.endswith((".swap", ".cleaned", ".deleted"))]


def test_open_rolls_back_an_unfinished_clean(tmp_path, clock):
    with open_log(tmp_path, clock, **{"segment.bytes": 200}) as log:
        _, expected, new = log_with_cleaned_copy(log)
        new.close()
    (tmp_path / "t-0" / "junk.txt").write_text("unknown files are ignored")
    with Log.open(tmp_path / "t-0", clock=clock) as log:
        assert offsets(log) == expected
    names = os.listdir(tmp_path / "t-0")
    assert "junk.txt" in names and not [n for n in names if n.endswith(".cleaned")]


def test_reopen_keeps_offsets_and_recovery_point(tmp_path, clock):
    with open_log(tmp_path, clock, **{"segment.bytes": 300}) as log:
        for _ in range(5):
            log.append(batch(2))
        segs = len(log.segments)
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n1\nt 0 10\n"
    with Log.open(tmp_path / "t-0", {"segment.bytes": 300}, clock=clock) as log:
        assert (log.log_end_offset, log.recovery_point, len(log.segments)) == (10, 10, segs)
        assert log.append(batch(1)).first_offset == 10


def test_torn_tail_is_truncated_on_open(tmp_path, clock):
    with open_log(tmp_path, clock) as log:
        log.append(batch(2))
        log.append(batch(2))
        path = log.active_segment.log_path
    os.truncate(path, os.path.getsize(path) - 5)
    (tmp_path / "recovery-point-offset-checkpoint").unlink()
    (tmp_path / ".kafka_cleanshutdown").unlink()  # a crash writes neither
    with Log.open(tmp_path / "t-0", clock=clock) as log:
        assert offsets(log) == [0, 1] and log.recovered_bytes > 0
        assert log.append(batch(1)).first_offset == 2


def test_missing_and_corrupt_indexes_are_rebuilt(tmp_path, clock):
    cfg = {"segment.bytes": 400, "index.interval.bytes": 50}
    with open_log(tmp_path, clock, **cfg) as log:
        for _ in range(8):
            log.append(batch(2))
        first = log.segments[0]
        index_bytes = first.offset_index.path.read_bytes()
        time_bytes = first.time_index.path.read_bytes()
        assert index_bytes and time_bytes
    directory = tmp_path / "t-0"
    (directory / segment_file_name(0, INDEX_SUFFIX)).unlink()
    (directory / segment_file_name(0, TIME_INDEX_SUFFIX)).write_bytes(b"\x00" * 7)
    with Log.open(directory, cfg, clock=clock) as log:
        assert offsets(log) == list(range(16))
    assert (directory / segment_file_name(0, INDEX_SUFFIX)).read_bytes() == index_bytes
    assert (directory / segment_file_name(0, TIME_INDEX_SUFFIX)).read_bytes() == time_bytes


def test_open_finishes_a_swap_whose_indexes_were_not_written(tmp_path, clock):
    with open_log(tmp_path, clock, **{"segment.bytes": 200}) as log:
        old, expected, new = log_with_cleaned_copy(log)
        new.close()
        new.change_file_suffixes(".cleaned", ".swap")
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        (tmp_path / "t-0" / segment_file_name(0, suffix, SWAP_SUFFIX)).unlink()
    with Log.open(tmp_path / "t-0", clock=clock) as log:
        assert offsets(log) == expected
        assert log.segments[0].offset_index.path.exists()


@pytest.mark.parametrize("index_bytes", [4, 8, 11])
def test_open_with_index_bytes_the_indexes_reject_creates_nothing(tmp_path, index_bytes):
    with pytest.raises(InvalidConfigError, match="segment.index.bytes"):
        Log.open(tmp_path / "new" / "t-0", {"segment.index.bytes": index_bytes})
    assert not (tmp_path / "new").exists()


def test_open_of_an_existing_directory_with_rejected_index_bytes_adds_no_lock(tmp_path):
    directory = tmp_path / "t-0"
    directory.mkdir()
    with pytest.raises(InvalidConfigError, match="segment.index.bytes"):
        Log.open(directory, {"segment.index.bytes": 4})
    assert list(directory.iterdir()) == []



def test_open_of_a_log_ending_below_its_checkpointed_start_restarts_it_empty_at_that_start(tmp_path, clock):
    # Kafka's LogLoader.recoverLog (LogLoaderTest.testLogEndLessThanStartAfterReopen).
    with open_log(tmp_path, clock) as log:
        log.append(batch(3, producer_id=7, producer_epoch=0, base_sequence=0), leader_epoch=4)
    (tmp_path / "log-start-offset-checkpoint").write_text("0\n1\nt 0 5\n")
    with Log.open(tmp_path / "t-0", clock=clock) as log:
        assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (5, 5, 5)
        assert [s.base_offset for s in log.segments] == [5]
        assert len(log.leader_epoch_cache) == 0 and not log.producer_state.producers
        assert log.append(batch(1)).first_offset == 5
    assert not [n for n in os.listdir(tmp_path / "t-0") if n.startswith(f"{0:020d}.")]


def test_a_crash_between_truncation_and_the_start_checkpoint_reopens_with_start_at_most_end(
        tmp_path, clock, monkeypatch):
    log = open_log(tmp_path, clock)
    log.append(batch(2))
    log.append(batch(2))
    log.delete_records_before(3)

    class Crash(BaseException):
        """The process dies here."""

    def crash(*_args, **_kwargs):
        raise Crash

    monkeypatch.setattr("logstore.log.update_offsets_checkpoints", crash)
    with pytest.raises(Crash):
        log.truncate_to(1)  # the segment is cut to 0: below the checkpointed start 3
    monkeypatch.undo()
    log._release()
    with Log.open(tmp_path / "t-0", clock=clock) as log:
        assert log.log_start_offset <= log.high_watermark <= log.log_end_offset
        assert (log.log_start_offset, log.log_end_offset) == (3, 3)


def test_open_builds_producer_state_from_the_logs_config(tmp_path, clock):
    with Log.open(tmp_path / "t-0", {"producer.id.expiration.ms": 1000}, clock=clock) as log:
        assert log.producer_state.producer_id_expiration_ms == 1000
        log.append(batch(1, producer_id=7, producer_epoch=0, base_sequence=0))
        clock.advance(1000)
        assert log.remove_expired_producers() == [7]


def test_loader_on_its_own_reports_offsets_and_dropped_bytes(tmp_path, clock):
    with open_log(tmp_path, clock, **{"segment.bytes": 300}) as log:
        for _ in range(5):
            log.append(batch(2))
        path = log.active_segment.log_path
    os.truncate(path, os.path.getsize(path) - 5)
    directory = tmp_path / "t-0"
    state = PartitionState(directory, clock=clock, read_only=False, producer_id_expiration_ms=1000)
    loaded = LogLoader(directory, LogConfig.coerce({"segment.bytes": 300}), clock, False, state, LoadState(recovery_point=0)).load()
    assert loaded.log_start_offset == 0 and loaded.recovered_bytes > 0
    assert loaded.log_end_offset == loaded.segments[-1].next_offset == 8
    assert loaded.recovery_point == 0  # not clean: nothing past the checkpoint is vouched for
    assert state.producer_state.map_end_offset == 8


def test_recovery_truncates_at_a_control_batch_whose_marker_does_not_decode(tmp_path, clock):
    # Found by tests/cli/test_cli_damage_fuzz.py: the CRC recomputed over a garbled marker record.
    # Recovery kept the batch and the producer-state rebuild after it failed without a file name.
    import struct

    from logstore.records import build_control_batch
    from logstore.records.crc import crc32c
    from logstore.records.header import ATTRIBUTES_OFFSET, CRC_OFFSET, V2_HEADER_SIZE

    with open_log(tmp_path, clock) as log:
        log.append(batch(2, producer_id=1, producer_epoch=0, base_sequence=0, is_transactional=True))
        marker_position = log.segments[0].size
        log.append(build_control_batch("commit", producer_id=1, producer_epoch=0, coordinator_epoch=0,
                                       timestamp=NOW), origin="coordinator")
        log.append(batch(1))
    path = tmp_path / "t-0" / segment_file_name(0, ".log")
    data = bytearray(path.read_bytes())
    end = marker_position + struct.unpack_from(">i", data, marker_position + 8)[0] + 12
    data[marker_position + V2_HEADER_SIZE] = 0x7F  # the record's length varint: past the batch
    struct.pack_into(">I", data, marker_position + CRC_OFFSET,
                     crc32c(bytes(data[marker_position + ATTRIBUTES_OFFSET:end])))
    path.write_bytes(bytes(data))
    with Log.open(tmp_path / "t-0", clock=clock,
                  load_state=LoadState(recovery_point=0, log_start_offset=0, clean_shutdown=False)) as log:
        assert offsets(log) == [0, 1]
    assert path.stat().st_size == marker_position


@pytest.mark.parametrize("field, value", [("base", 1), ("last_delta", -1)])
def test_recovery_truncates_at_a_batch_whose_offsets_do_not_increase(tmp_path, clock, field, value):
    # Found by tests/cli/test_cli_damage_fuzz.py: a batch's offsets rewritten, its CRC recomputed.
    # Recovery kept it, and `verify` went on reporting "offset ... does not increase".
    import struct

    from logstore.records.crc import crc32c
    from logstore.records.header import ATTRIBUTES_OFFSET, CRC_OFFSET

    with open_log(tmp_path, clock) as log:
        log.append(batch(2))
        second = log.segments[0].size
        log.append(batch(2))
        log.append(batch(1))
    path = tmp_path / "t-0" / segment_file_name(0, ".log")
    data = bytearray(path.read_bytes())
    end = second + struct.unpack_from(">i", data, second + 8)[0] + 12
    if field == "base":
        struct.pack_into(">q", data, second, value)  # below offset 2, where the first batch ended
    else:
        struct.pack_into(">i", data, second + ATTRIBUTES_OFFSET + 2, value)  # last offset delta
    struct.pack_into(">I", data, second + CRC_OFFSET, crc32c(bytes(data[second + ATTRIBUTES_OFFSET:end])))
    path.write_bytes(bytes(data))
    with Log.open(tmp_path / "t-0", clock=clock,
                  load_state=LoadState(recovery_point=0, log_start_offset=0, clean_shutdown=False)) as log:
        assert offsets(log) == [0, 1]
    assert path.stat().st_size == second


def test_recovery_truncates_at_a_plain_batch_inside_an_open_transaction(tmp_path, clock):
    # Found by tests/cli/test_cli_damage_fuzz.py: a transactional batch's attributes zeroed (CRC
    # recomputed). No leader writes a plain batch from a producer whose transaction is open
    # (Kafka's InvalidTxnStateException); recover failed with that message and no file name.
    import struct

    from logstore.records.crc import crc32c
    from logstore.records.header import ATTRIBUTES_OFFSET, CRC_OFFSET

    with open_log(tmp_path, clock) as log:
        log.append(batch(2, producer_id=1, producer_epoch=0, base_sequence=0, is_transactional=True))
        second = log.segments[0].size
        log.append(batch(1, producer_id=1, producer_epoch=0, base_sequence=2, is_transactional=True))
    path = tmp_path / "t-0" / segment_file_name(0, ".log")
    data = bytearray(path.read_bytes())
    struct.pack_into(">h", data, second + ATTRIBUTES_OFFSET, 0)
    struct.pack_into(">I", data, second + CRC_OFFSET, crc32c(bytes(data[second + ATTRIBUTES_OFFSET:])))
    path.write_bytes(bytes(data))
    with Log.open(tmp_path / "t-0", clock=clock,
                  load_state=LoadState(recovery_point=0, log_start_offset=0, clean_shutdown=False)) as log:
        assert offsets(log) == [0, 1]
    assert path.stat().st_size == second

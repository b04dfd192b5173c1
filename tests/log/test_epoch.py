"""LeaderEpochFileCache: Kafka's assign/truncate/OffsetsForLeaderEpoch rules and the
`leader-epoch-checkpoint` file (docs/FORMAT.md "Checkpoint files")."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from logstore.epoch import (
    CHECKPOINT_FILE_NAME,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochFileCache,
)
from logstore.errors import CorruptCheckpointError
from tests.support.paths import KAFKA_LOGDIR

SAMPLE_DIR = KAFKA_LOGDIR / "plain-0"
UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def cache_with(tmp_path: Path, *entries: tuple[int, int]) -> LeaderEpochFileCache:
    cache = LeaderEpochFileCache.in_dir(tmp_path)
    for epoch, offset in entries:
        cache.assign(epoch, offset)
    return cache


def checkpoint_bytes(tmp_path: Path) -> bytes:
    return (tmp_path / CHECKPOINT_FILE_NAME).read_bytes()


def test_kafka_sample_checkpoint_reads_back_and_rewrites_identically(tmp_path):
    shutil.copy(SAMPLE_DIR / CHECKPOINT_FILE_NAME, tmp_path / CHECKPOINT_FILE_NAME)
    cache = LeaderEpochFileCache.in_dir(tmp_path)
    assert cache.entries() == [EpochEntry(0, 0)]
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    cache_with(fresh, (0, 0))
    assert checkpoint_bytes(fresh) == (SAMPLE_DIR / CHECKPOINT_FILE_NAME).read_bytes()


def test_checkpoint_file_layout_is_version_count_then_epoch_offset_lines(tmp_path):
    cache_with(tmp_path, (0, 0), (3, 120), (7, 5000))
    assert checkpoint_bytes(tmp_path) == b"0\n3\n0 0\n3 120\n7 5000\n"
    assert not (tmp_path / (CHECKPOINT_FILE_NAME + ".tmp")).exists()


def test_assign_same_epoch_at_later_offset_changes_nothing(tmp_path):
    cache = cache_with(tmp_path, (1, 10))
    assert cache.assign(1, 20) is False
    assert cache.entries() == [(1, 10)]


def test_assign_same_epoch_at_earlier_offset_replaces_it(tmp_path):
    cache = cache_with(tmp_path, (1, 10))
    assert cache.assign(1, 5) is True
    assert cache.entries() == [(1, 5)]


def test_assign_removes_conflicting_entries(tmp_path):
    cache = cache_with(tmp_path, (1, 0), (2, 10), (4, 20))
    cache.assign(3, 15)  # epoch 4 >= 3 and its offset 20 >= 15 conflict
    assert cache.entries() == [(1, 0), (2, 10), (3, 15)]
    cache.assign(5, 10)  # offset 10 and 15 >= 10 conflict
    assert cache.entries() == [(1, 0), (5, 10)]
    assert LeaderEpochFileCache.in_dir(tmp_path).entries() == [(1, 0), (5, 10)]


def test_assign_rejects_negative_values(tmp_path):
    cache = cache_with(tmp_path)
    with pytest.raises(ValueError):
        cache.assign(-1, 0)
    with pytest.raises(ValueError):
        cache.assign(0, -1)


def test_end_offset_for_answers_like_offsets_for_leader_epoch(tmp_path):
    cache = cache_with(tmp_path, (2, 10), (4, 20), (6, 30))
    leo = 42
    assert cache.end_offset_for(UNDEFINED_EPOCH, leo) == UNDEFINED
    assert cache.end_offset_for(6, leo) == (6, leo)  # the latest epoch ends at the log end
    assert cache.end_offset_for(4, leo) == (4, 30)
    assert cache.end_offset_for(5, leo) == (4, 30)  # unknown epoch: largest epoch below it
    assert cache.end_offset_for(1, leo) == (1, 10)  # older than all: first start offset
    assert cache.end_offset_for(7, leo) == UNDEFINED  # newer than the latest
    assert LeaderEpochFileCache(None).end_offset_for(0, leo) == UNDEFINED  # empty cache


def test_truncate_from_end_drops_entries_at_or_after_offset(tmp_path):
    cache = cache_with(tmp_path, (1, 0), (2, 10), (3, 20))
    assert cache.truncate_from_end(10) == [(3, 20), (2, 10)]
    assert cache.entries() == [(1, 0)]
    assert cache.truncate_from_end(5) == []
    assert LeaderEpochFileCache.in_dir(tmp_path).entries() == [(1, 0)]


def test_truncate_from_start_rewrites_the_covering_epoch_and_is_exclusive(tmp_path):
    cache = cache_with(tmp_path, (1, 0), (2, 10), (3, 20))
    cache.truncate_from_start(15)
    assert cache.entries() == [(2, 15), (3, 20)]
    cache.truncate_from_start(20)
    assert cache.entries() == [(3, 20)]
    cache.truncate_from_start(5)  # before every entry: nothing to do
    assert cache.entries() == [(3, 20)]
    assert checkpoint_bytes(tmp_path) == b"0\n1\n3 20\n"


def test_truncate_from_start_where_an_epoch_starts_leaves_the_file_alone(tmp_path):
    # Every open moves the start to where it already is: rewriting (and fsyncing) the
    # checkpoint then cost most of a reopen.
    cache = cache_with(tmp_path, (1, 0), (2, 10))
    before = (tmp_path / CHECKPOINT_FILE_NAME).stat().st_ino
    assert cache.truncate_from_start(0) == [(1, 0)]
    assert cache.entries() == [(1, 0), (2, 10)]
    assert (tmp_path / CHECKPOINT_FILE_NAME).stat().st_ino == before  # not replaced
    cache.truncate_from_start(3)
    assert LeaderEpochFileCache.in_dir(tmp_path).entries() == [(1, 3), (2, 10)]


def test_epoch_for_offset_and_neighbours(tmp_path):
    cache = cache_with(tmp_path, (1, 5), (3, 10), (4, 20))
    assert cache.epoch_for_offset(0) is None
    assert cache.epoch_for_offset(5) == 1
    assert cache.epoch_for_offset(9) == 1
    assert cache.epoch_for_offset(10) == 3
    assert cache.epoch_for_offset(1000) == 4
    assert cache.latest_epoch() == 4
    assert cache.previous_epoch() == 3
    assert cache.previous_epoch(3) == 1
    assert cache.next_epoch(1) == 3
    assert cache.next_epoch(4) is None
    assert cache.earliest_entry() == (1, 5)
    assert cache.epoch_entry(3) == (3, 10)
    assert cache.epoch_entry(2) is None


def test_epoch_entries_in_range_clips_without_changing_the_cache(tmp_path):
    cache = cache_with(tmp_path, (1, 0), (2, 10), (3, 20))
    assert cache.epoch_entries_in_range(5, 20) == [(1, 5), (2, 10)]
    assert cache.entries() == [(1, 0), (2, 10), (3, 20)]


def test_truncation_around_a_divergent_follower(tmp_path):
    """A follower truncates to the leader's end offset for its epoch, then appends the new epoch."""
    follower = cache_with(tmp_path, (0, 0), (1, 50), (2, 80))
    leader = LeaderEpochFileCache(None)
    leader.assign_all([EpochEntry(0, 0), EpochEntry(1, 50), EpochEntry(3, 70)])
    epoch, end = leader.end_offset_for(2, log_end_offset=120)
    assert (epoch, end) == (1, 70)
    follower.truncate_from_end(end)
    assert follower.entries() == [(0, 0), (1, 50)]
    follower.assign(3, 70)
    assert follower.entries() == leader.entries()


def test_read_only_cache_never_writes(tmp_path):
    cache_with(tmp_path, (0, 0))
    before = checkpoint_bytes(tmp_path)
    ro = LeaderEpochFileCache.in_dir(tmp_path, read_only=True)
    ro.assign(1, 10)
    ro.truncate_from_start(5)
    assert ro.entries() == [(0, 5), (1, 10)]
    assert checkpoint_bytes(tmp_path) == before


def test_clear_and_flush_writes_an_empty_checkpoint(tmp_path):
    cache = cache_with(tmp_path, (0, 0))
    cache.clear_and_flush()
    assert checkpoint_bytes(tmp_path) == b"0\n0\n"
    assert LeaderEpochFileCache.in_dir(tmp_path).entries() == []


@pytest.mark.parametrize(
    "content",
    [b"1\n1\n0 0\n", b"0\n2\n0 0\n", b"0\n1\n0 zero\n", b"0\n1\n0 0 0\n"],
    ids=["version", "count", "number", "fields"],
)
def test_corrupt_checkpoint_raises_naming_the_file(tmp_path, content):
    (tmp_path / CHECKPOINT_FILE_NAME).write_bytes(content)
    with pytest.raises(CorruptCheckpointError, match=CHECKPOINT_FILE_NAME):
        LeaderEpochFileCache.in_dir(tmp_path)


def test_missing_checkpoint_is_an_empty_cache(tmp_path):
    cache = LeaderEpochFileCache.in_dir(tmp_path)
    assert cache.entries() == []
    assert cache.latest_epoch() is None
    assert not (tmp_path / CHECKPOINT_FILE_NAME).exists()


def test_a_negative_epoch_in_the_checkpoint_is_a_corrupt_checkpoint_naming_the_line(tmp_path):
    # Found by tests/cli/test_cli_damage_fuzz.py: `recover` ended in "internal error: ValueError".
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("0\n2\n0 0\n-1 5\n")
    with pytest.raises(CorruptCheckpointError, match=r"leader-epoch-checkpoint line 4: negative epoch"):
        LeaderEpochFileCache(path)

"""Seeded fault simulation over three replicas: random produce (acks all/1/0, batches of one to
three records), fetch, clock ticks with ISR shrink, flushes, HW checkpoints, process restarts
(also between a truncation and its checkpoint), machine failures losing unflushed data (also
of the whole ISR at once, and right after DeleteRecords), recoveries, preferred elections,
controlled shutdowns and record deletion; the invariants (tests/simulation/cluster.py) are
checked after every action and after the cluster heals. 10,000 schedules on the in-memory log
by default, disk runs on real Logs whose directories are then checked like any single log;
five times as many under `-m slow`."""

from __future__ import annotations

from pathlib import Path

import pytest

from logstore import Log
from logstore.cli import main as cli_main
from tests.simulation.cluster import SimCluster, batch_ids, run_schedule

SCHEDULES = 10_000
CHUNKS = 10
STEPS = 40
DISK_SCHEDULES = 40
DISK_STEPS = 30


def _run_many(seeds: range, steps: int, *, check_healed: bool = True,
              **cluster_args: object) -> dict[int, list[str]]:
    failures: dict[int, list[str]] = {}
    for seed in seeds:
        cluster = run_schedule(seed, steps, **cluster_args)
        if cluster.invariants.violations:
            failures[seed] = cluster.invariants.violations[:3]
        if check_healed:
            _check_healed(cluster)
        cluster.close()
    return failures


def _check_healed(cluster: SimCluster) -> None:
    """After healing every replica holds the leader's log and HW, and every acknowledged
    batch above the log start offset."""
    leader = cluster.leader_partition()
    assert leader is not None
    start = max(n.partition.log.log_start_offset for n in cluster.nodes)
    logs = [[b for b in batch_ids(n.partition.log) if b[1] > start] for n in cluster.nodes]
    assert logs[0] == logs[1] == logs[2]
    assert len({n.partition.high_watermark for n in cluster.nodes}) == 1
    present = set(logs[0])
    assert all(b in present for b in cluster.invariants.acked.values() if b[1] > start)


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_random_schedules_keep_every_invariant(chunk: int) -> None:
    per = SCHEDULES // CHUNKS
    assert _run_many(range(chunk * per, (chunk + 1) * per), STEPS) == {}


def test_random_schedules_catch_followers_truncating_to_their_hw() -> None:
    failures = _run_many(range(500), 60, check_healed=False, truncate_to_hw=True)
    assert failures, "HW truncation should lose or fork data in some schedule"


def test_random_schedules_catch_the_last_replica_standing_without_eligible_leader_replicas() -> None:
    for seed in range(1000):
        cluster = run_schedule(seed, 60, eligible_leader_replicas_enable=False)
        if any(v.startswith("acknowledged batch") for v in cluster.invariants.violations):
            return
    pytest.fail("an ISR member that lost its page cache should lead and lose records in some schedule")


def test_unclean_elections_lose_acknowledged_records_but_never_fork_replicas() -> None:
    lost = 0
    for seed in range(300):
        cluster = run_schedule(seed, 60, unclean_leader_election_enable=True, strict_history=False)
        violations = cluster.invariants.violations
        lost += any(v.startswith("acknowledged batch") for v in violations)
        assert all(v.startswith("acknowledged batch") for v in violations), violations
        start = max(n.partition.log.log_start_offset for n in cluster.nodes)
        logs = [[b for b in batch_ids(n.partition.log) if b[1] > start] for n in cluster.nodes]
        assert logs[0] == logs[1] == logs[2], seed
    assert lost, "an out-of-sync leader must cost acknowledged records in some schedule"


def _verify_dirs(root: Path) -> None:
    dirs = sorted(root.glob("broker-*/sim-0"))
    assert len(dirs) == 3
    for directory in dirs:
        log = Log.open(directory, read_only=True, raw=True)
        try:
            expected = None
            for segment in log.segments:
                for batch in segment.iter_batches():
                    batch.validate()
                    assert expected is None or batch.base_offset == expected
                    expected = batch.next_offset
            assert expected is None or expected == log.log_end_offset
        finally:
            log.close()
    assert cli_main(["verify", "--deep", *map(str, dirs)]) == 0


@pytest.mark.parametrize("seed", range(DISK_SCHEDULES))
def test_random_schedules_on_disk_leave_valid_partition_directories(tmp_path: Path, seed: int) -> None:
    assert _run_many(range(seed, seed + 1), DISK_STEPS, backend="disk", root=tmp_path) == {}
    _verify_dirs(tmp_path)


SLOW_CHUNKS = 10
SLOW_PER_CHUNK = 5_000
SLOW_DISK_CHUNKS = 4
SLOW_DISK_PER_CHUNK = 50


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(SLOW_CHUNKS))
def test_many_more_random_schedules(chunk: int) -> None:
    first = SCHEDULES + chunk * SLOW_PER_CHUNK
    assert _run_many(range(first, first + SLOW_PER_CHUNK), 60) == {}


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(SLOW_DISK_CHUNKS))
def test_many_more_random_schedules_on_disk(tmp_path: Path, chunk: int) -> None:
    first = DISK_SCHEDULES + chunk * SLOW_DISK_PER_CHUNK
    for seed in range(first, first + SLOW_DISK_PER_CHUNK):
        root = tmp_path / str(seed)
        assert _run_many(range(seed, seed + 1), 60, backend="disk", root=root) == {}
        _verify_dirs(root)

"""Seeded fault simulation over three replicas: random produce (acks all/1/0, batches of one to
three records), fetch, clock ticks with ISR shrink, flushes, HW checkpoints, process kills and
clean restarts (also between a truncation and its checkpoint), bounces, machine failures losing
unflushed data (also of the last ISR replica, of the whole ISR at once with different flush
points, and right after DeleteRecords), recoveries one by one and all at once in a random
order, preferred elections, controlled shutdowns and record deletion; the invariants
(tests/simulation/cluster.py) are checked after every action and after the cluster heals.
2,000 schedules on the in-memory log by default (each chunk prints how many schedules hit each
fault earlier versions spared, needed unclean recovery, and lost a record only where every
holder lost it), disk runs on real Logs whose directories are then checked like any single
log; five times as many under `-m slow`."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from logstore import Log
from logstore.cli import main as cli_main
from tests.simulation.cluster import NEW_FAULTS, SimCluster
from tests.simulation.invariants import batch_ids
from tests.simulation.schedule import run_schedule

SCHEDULES = 2_000
CHUNKS = 4
STEPS = 40
DISK_SCHEDULES = 40
DISK_STEPS = 30


def _run_many(seeds: range, steps: int, *, check_healed: bool = True, summary: Counter[str] | None = None,
              **cluster_args: object) -> dict[int, list[str]]:
    """Run the schedules of `seeds`; their violations by seed. `summary` counts the schedules
    that hit each of NEW_FAULTS, needed unclean recovery, or lost records every holder lost."""
    failures: dict[int, list[str]] = {}
    for seed in seeds:
        cluster = run_schedule(seed, steps, **cluster_args)
        if cluster.invariants.violations:
            failures[seed] = cluster.invariants.violations[:3]
        if check_healed:
            _check_healed(cluster)
        if summary is not None:
            summary.update(f for f in NEW_FAULTS if cluster.faults[f])
            summary["unclean_recovery"] += cluster.unclean_elections > 0
            summary["lost_where_every_holder_lost_it"] += bool(cluster.invariants.lost_everywhere)
            summary["lost_to_unclean_recovery"] += bool(cluster.invariants.lost_to_unclean_recovery)
        cluster.close()
    return failures


def _assert_summary(summary: Counter[str], schedules: int) -> None:
    """Print the summary and require every new fault to have been hit."""
    print(f"{schedules} schedules: " + ", ".join(f"{k}={summary[k]}" for k in (
        *NEW_FAULTS, "unclean_recovery", "lost_where_every_holder_lost_it", "lost_to_unclean_recovery")))
    assert all(summary[f] > 0 for f in NEW_FAULTS), summary


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
    summary: Counter[str] = Counter()
    assert _run_many(range(chunk * per, (chunk + 1) * per), STEPS, summary=summary) == {}
    _assert_summary(summary, per)


def test_random_schedules_catch_followers_truncating_to_their_hw() -> None:
    failures = _run_many(range(500), 60, check_healed=False, truncate_to_hw=True)
    assert failures, "HW truncation should lose or fork data in some schedule"


def test_random_schedules_catch_the_last_replica_standing_without_eligible_leader_replicas() -> None:
    for seed in range(1000):
        cluster = run_schedule(seed, 60, eligible_leader_replicas_enable=False)
        if any(v.startswith("acknowledged batch") for v in cluster.invariants.violations):
            return
    pytest.fail("an ISR member that lost its page cache should lead and lose records in some schedule")


def test_aggressive_recovery_loses_acknowledged_records_but_never_forks_replicas() -> None:
    # unclean.leader.election.enable=true is Aggressive: the longest log among those up leads.
    lost = 0
    for seed in range(300):
        cluster = run_schedule(seed, 60, unclean_leader_election_enable=True)
        assert cluster.controller.unclean_recovery_strategy == "Aggressive"
        assert cluster.invariants.violations == [], (seed, cluster.invariants.violations)
        lost += bool(cluster.invariants.lost_to_unclean_recovery)
        _check_healed(cluster)
    assert lost, "a leader elected without some replica's records must cost acknowledged ones sometimes"


def test_without_unclean_recovery_some_partitions_never_come_back() -> None:
    # unclean.recovery.strategy=None: every replica back and healthy, ISR and ELR empty for good.
    offline = 0
    for seed in range(300):
        cluster = run_schedule(seed, STEPS, unclean_recovery_strategy="None")
        offline += cluster.controller.leader is None
        assert all(v.startswith("no leader after healing") for v in cluster.invariants.violations), seed
        assert cluster.unclean_elections == 0 and not cluster.invariants.lost_to_unclean_recovery
    assert offline, "without unclean recovery some schedule must end offline"


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
SLOW_PER_CHUNK = 1_000
SLOW_DISK_CHUNKS = 4
SLOW_DISK_PER_CHUNK = 25


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(SLOW_CHUNKS))
def test_many_more_random_schedules(chunk: int) -> None:
    first = SCHEDULES + chunk * SLOW_PER_CHUNK
    summary: Counter[str] = Counter()
    assert _run_many(range(first, first + SLOW_PER_CHUNK), 60, summary=summary) == {}
    _assert_summary(summary, SLOW_PER_CHUNK)


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(SLOW_DISK_CHUNKS))
def test_many_more_random_schedules_on_disk(tmp_path: Path, chunk: int) -> None:
    first = DISK_SCHEDULES + chunk * SLOW_DISK_PER_CHUNK
    for seed in range(first, first + SLOW_DISK_PER_CHUNK):
        root = tmp_path / str(seed)
        assert _run_many(range(seed, seed + 1), 60, backend="disk", root=root) == {}
        _verify_dirs(root)

"""Replication on real Log directories: retention on the leader reaching every follower in one
fetch, the HW checkpoint, follower threads with acks=all producers, and a failover whose
survivors end with the same batches on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from logstore import Log
from logstore.clock import ManualClock
from logstore.errors import FencedLeaderEpochError, ReplicaNotAvailableError
from logstore.policies import RetentionPass
from logstore.replication.controller import Controller
from logstore.replication.follower import Follower, Step
from logstore.replication.partition import Partition
from logstore.replication.transport import FetchRequest, InProcessTransport, Transport
from retention import apply_retention

CONFIG = {"segment.bytes": 400, "file.delete.delay.ms": 0, "min.insync.replicas": 2,
          "replica.lag.time.max.ms": 10_000}


def _open_three(root: Path, clock: ManualClock, config: dict[str, int] | None = None, *,
                retention: RetentionPass | None = apply_retention) -> list[Partition]:
    return [Partition.open(root / f"broker-{i}" / "orders-0", i, config or CONFIG, clock=clock, retention=retention)
            for i in range(3)]


def _start(partitions: list[Partition], transport: Transport) -> tuple[Controller, dict[int, Follower]]:
    controller = Controller([0, 1, 2])
    for p in partitions:
        controller.startup(p)
    return controller, {p.replica_id: Follower(p, transport) for p in partitions}


def _start_in_process(partitions: list[Partition]) -> tuple[Controller, dict[int, Follower]]:
    """`_start` over one InProcessTransport that every partition is registered with."""
    transport = InProcessTransport()
    for p in partitions:
        transport.register(p)
    return _start(partitions, transport)


def _rounds(followers: dict[int, Follower], n: int) -> None:
    for _ in range(n):
        for follower in followers.values():
            follower.step()


def _fill_and_retain(parts: list[Partition], followers: dict[int, Follower]) -> int:
    """40 appends fetched by both followers, then a retention pass on the leader; its new start."""
    leader = parts[0]
    for i in range(40):
        leader.append([(b"k%d" % i, b"x" * 40)])
        _rounds(followers, 2)
    assert all(len(p.log.segments) > 4 for p in parts)
    plan = apply_retention(leader.log)
    assert plan.new_log_start_offset > 0
    return leader.log.log_start_offset


def test_retention_on_the_leader_moves_every_follower_start_within_one_fetch(tmp_path: Path) -> None:
    clock = ManualClock(1_000_000)
    config = {**CONFIG, "retention.bytes": 800}
    parts = _open_three(tmp_path, clock, config)
    _, followers = _start_in_process(parts)
    _rounds(followers, 2)
    start = _fill_and_retain(parts, followers)
    _rounds(followers, 1)  # one fetch each
    for p in parts:
        assert p.log.log_start_offset == start
        assert p.log.segments[0].base_offset <= start < p.log.segments[0].next_offset or \
            p.log.segments[0].base_offset == start
        assert all(s.next_offset > start for s in p.log.segments)  # nothing wholly below it
    for p in parts:
        p.close()


def test_followers_without_retention_take_the_leader_start_but_keep_their_segments(tmp_path: Path) -> None:
    clock = ManualClock(1_000_000)
    parts = _open_three(tmp_path, clock, {**CONFIG, "retention.bytes": 800}, retention=None)
    _, followers = _start_in_process(parts)
    _rounds(followers, 2)
    start = _fill_and_retain(parts, followers)
    segments = {p.replica_id: list(p.log.segments) for p in parts[1:]}
    _rounds(followers, 1)
    for p in parts[1:]:
        assert p.log.log_start_offset == start
        assert p.log.segments == segments[p.replica_id]  # left to the follower's next retention pass
        assert apply_retention(p.log).new_log_start_offset == start
        assert all(s.next_offset > start for s in p.log.segments)
    for p in parts:
        p.close()


def test_a_follower_behind_a_log_start_inside_a_batch_rejoins_on_disk(tmp_path: Path) -> None:
    clock = ManualClock(1_000_000)
    parts = _open_three(tmp_path, clock)
    controller, followers = _start_in_process(parts)
    _rounds(followers, 2)
    controller.fail(2)
    leader = parts[0]
    leader.append([(b"k", b"v")] * 3)
    leader.append([(b"k", b"v")] * 2)
    _rounds({1: followers[1]}, 2)
    leader.log.delete_records_before(1)
    controller.startup(parts[2])
    _rounds(followers, 3)
    follower = parts[2].log
    assert (follower.log_start_offset, follower.log_end_offset, follower.high_watermark) == (1, 5, 5)
    assert [s.base_offset for s in follower.segments] == [0]
    assert [r.offset for r in follower.records()] == [1, 2, 3, 4]
    assert controller.isr == {0, 1, 2}
    for p in parts:
        p.close()


def test_hw_checkpoint_survives_reopen(tmp_path: Path) -> None:
    clock = ManualClock(1_000_000)
    parts = _open_three(tmp_path, clock)
    _, followers = _start_in_process(parts)
    _rounds(followers, 2)
    parts[0].append([(b"k", b"v")] * 3)
    _rounds(followers, 3)  # the HW reaches a follower one round after the last one fetched
    follower = parts[1]
    assert follower.high_watermark == 3
    follower.checkpoint_high_watermark()
    follower.log.high_watermark = 1  # not checkpointed: close writes it, so reopen sees 1
    for p in parts:
        p.close()
    reopened = Partition.open(tmp_path / "broker-1" / "orders-0", 1, CONFIG, clock=clock)
    assert reopened.high_watermark == 1 and reopened.log_end_offset == 3
    assert reopened.epochs.entries() == [(0, 0)]
    reopened.close()


def test_follower_threads_commit_acks_all_appends(tmp_path: Path) -> None:
    clock = ManualClock(1_000_000)
    parts = _open_three(tmp_path, clock)
    _, followers = _start_in_process(parts)
    leader = parts[0]
    for f in followers.values():
        f.start(interval_s=0.001)
    try:
        assert leader.wait_for_isr(3, timeout_s=30), leader
        handles = [leader.append([(b"k%d" % i, b"v")]) for i in range(20)]
        for handle in handles:
            handle.result(timeout_s=30)
    finally:
        for f in followers.values():
            f.stop()
    assert leader.high_watermark == 20
    assert all(p.log_end_offset == 20 for p in parts)
    for p in parts:
        p.close()


def test_a_failover_on_disk_leaves_the_survivors_with_the_same_batches(tmp_path: Path) -> None:
    clock = ManualClock(1_000_000)
    parts = _open_three(tmp_path, clock)
    transport = InProcessTransport()
    for p in parts:
        transport.register(p)
    controller, followers = _start(parts, transport)
    try:
        _rounds(followers, 2)
        assert controller.isr == {0, 1, 2}
        handle = parts[0].append([(b"k", b"v%d" % i) for i in range(5)])
        _rounds(followers, 2)
        assert handle.is_committed
        controller.fail(0)
        transport.unregister(0, "orders", 0)  # its broker went down
        assert controller.leader == 1
        assert followers[2].step() is Step.TRUNCATED
        second = parts[1].append([(b"k", b"after failover")])
        _rounds({2: followers[2]}, 2)
        assert second.is_committed
        assert [r.value for r in parts[2].log.records()] == [r.value for r in parts[1].log.records()]
        with pytest.raises(ReplicaNotAvailableError):
            transport.fetch(0, FetchRequest("orders", 0, 2, 0, 100, 1, 0, 0))
        with pytest.raises(FencedLeaderEpochError):
            transport.fetch(1, FetchRequest("orders", 0, 2, 0, 100, 0, 0, 0))
        with pytest.raises(ReplicaNotAvailableError):
            transport.fetch(1, FetchRequest("other", 0, 2, 0, 100, 1, 0, 0))
    finally:
        for p in parts:
            p.close()
    for i in (1, 2):
        log = Log.open(tmp_path / f"broker-{i}" / "orders-0", read_only=True)
        assert [b.base_offset for b in log.read(0, 1 << 20).batches()] == [0, 5]
        log.close()


def test_demo_fails_over_without_losing_an_acknowledged_record(tmp_path: Path) -> None:
    from logstore.replication.demo import run_demo

    lines: list[str] = []
    summary = run_demo(tmp_path, out=lines.append)
    assert summary["acknowledged"] == summary["present_on_every_replica"] == 150
    assert summary["identical"] and summary["leaders"] == [0, 1] and summary["epoch"] == 1
    assert len(lines) == 6 and "103 -> 100" in lines[4]
    assert summary["directory"].parent == tmp_path
    for i in range(3):
        log = Log.open(summary["directory"] / f"broker-{i}" / "orders-0", read_only=True)
        assert log.log_end_offset == 150
        log.close()
    assert run_demo(tmp_path, out=lines.append)["present_on_every_replica"] == 150  # a second run


def test_partition_open_passes_its_config_to_producer_state(tmp_path):
    partition = Partition.open(tmp_path / "t-0", 0, {"producer.id.expiration.ms": 1000})
    try:
        assert partition.log.producer_state.producer_id_expiration_ms == 1000
    finally:
        partition.log.close()

"""A short tour of replication: a leader and two followers on disk, acks=all produces, a
leader failure and election, the old leader's unreplicated tail cut by the leader-epoch
protocol when it returns, and every acknowledged record on every replica at the end."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from logstore.clock import ManualClock
from logstore.replication.controller import Controller
from logstore.replication.follower import Follower
from logstore.replication.partition import ACKS_ALL, Partition
from logstore.replication.transport import InProcessTransport

TOPIC_DIR = "orders-0"
CONFIG = {"min.insync.replicas": 2, "segment.bytes": 64 * 1024}


def _fetch_rounds(followers: dict[int, Follower], rounds: int) -> None:
    for _ in range(rounds):
        for follower in followers.values():
            follower.step()


def run_demo(directory: str | Path | None = None, *, out: Callable[[str], Any] = print) -> dict[str, Any]:
    """Run the tour in a new `replication-*` directory under `directory` (default: a temporary
    directory, removed afterwards), printing through `out`; returns a summary: acknowledged
    records, how many are on every replica, whether the logs are identical, the leaders, the
    last epoch and the replicas' directory."""
    if directory is None:
        with tempfile.TemporaryDirectory(prefix="logstore-") as tmp:
            return run_demo(tmp, out=out)
    Path(directory).mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="replication-", dir=directory))
    clock = ManualClock(1_700_000_000_000)
    transport = InProcessTransport()
    controller = Controller([0, 1, 2], min_insync_replicas=CONFIG["min.insync.replicas"])
    parts = {i: Partition.open(root / f"broker-{i}" / TOPIC_DIR, i, CONFIG, clock=clock) for i in range(3)}
    followers = {i: Follower(p, transport) for i, p in parts.items()}
    for p in parts.values():
        transport.register(p)
        controller.startup(p)
    _fetch_rounds(followers, 2)
    out(f"replicas 0, 1, 2 of {TOPIC_DIR} under {root}: leader {controller.leader}, "
        f"epoch {controller.leader_epoch}, ISR {sorted(controller.isr)}")

    acked: list[bytes] = []
    handles = {b"order-%d" % i: parts[0].append([(b"order-%d" % i, b"placed")], acks=ACKS_ALL) for i in range(100)}
    _fetch_rounds(followers, 3)  # data, then the HW, which reaches a follower one round later
    acked += [key for key, h in handles.items() if h.is_committed]
    out(f"leader 0: 100 appends with acks=all, {len(acked)} acknowledged; "
        f"HW on replicas: {[p.high_watermark for p in parts.values()]}")

    unreplicated = parts[0].append([(b"late-%d" % i, b"never fetched") for i in range(3)], acks=1)
    controller.fail(0)
    transport.unregister(0, parts[0].topic, parts[0].partition)
    out(f"replica 0 fails with 3 acks=1 records no follower fetched; controller elects "
        f"{controller.leader} (epoch {controller.leader_epoch}), ISR {sorted(controller.isr)}")

    handles = {b"order-%d" % i: parts[1].append([(b"order-%d" % i, b"placed")], acks=ACKS_ALL)
               for i in range(100, 150)}
    _fetch_rounds(followers, 4)  # replica 2 first truncates for the new epoch
    acked += [key for key, h in handles.items() if h.is_committed]
    out(f"leader 1: 50 more appends with acks=all, {len(acked)} acknowledged in total")

    transport.register(parts[0])
    controller.startup(parts[0])
    before = parts[0].log_end_offset
    followers[0].step()  # OffsetsForLeaderEpoch: cut what the new leader never had
    out(f"replica 0 returns as a follower: log end {before} -> {parts[0].log_end_offset} "
        f"(the {unreplicated.last_offset - unreplicated.first_offset + 1} unreplicated records cut by leader epoch)")
    _fetch_rounds(followers, 3)
    logs = {i: [(r.offset, r.key) for r in p.log.records()] for i, p in parts.items()}
    identical = logs[0] == logs[1] == logs[2]
    present = min(len(set(acked) & {key for _, key in log}) for log in logs.values())
    out(f"replica 0 caught up and rejoined: ISR {sorted(controller.isr)}, HW "
        f"{[p.high_watermark for p in parts.values()]}; logs identical: {identical}; "
        f"acknowledged records present: {present}/{len(acked)}")
    for p in parts.values():
        p.close()
    return {"acknowledged": len(acked), "present_on_every_replica": present, "identical": identical,
            "leaders": [e.leader for _, e in controller.elections], "epoch": controller.leader_epoch,
            "directory": root}


if __name__ == "__main__":
    run_demo()

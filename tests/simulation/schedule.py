"""Random fault schedules for the replication simulation: weighted actions over a SimCluster,
drawn from a seed, then a heal."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from logstore.replication.partition import ACKS_ALL
from tests.simulation.cluster import LAG_MS, SimCluster

Action = Callable[[SimCluster, random.Random], None]


def _some_replica(cluster: SimCluster, rng: random.Random, up: bool) -> int | None:
    choices = [n.replica_id for n in cluster.nodes if n.up == up]
    return rng.choice(choices) if choices else None


def _on_a_replica(method: str, *, up: bool) -> Action:
    """The action calling `SimCluster.<method>(r)` on a replica drawn among those up (or down)."""
    def act(c: SimCluster, rng: random.Random) -> None:
        r = _some_replica(c, rng, up)
        if r is not None:
            getattr(c, method)(r)
    return act


_act_fetch = _on_a_replica("fetch", up=True)
_act_flush = _on_a_replica("flush", up=True)
_act_checkpoint = _on_a_replica("checkpoint_hw", up=True)
_act_bounce = _on_a_replica("bounce", up=True)
_act_fail = _on_a_replica("fail", up=True)
_act_recover = _on_a_replica("recover", up=False)
_act_controlled_shutdown = _on_a_replica("controlled_shutdown", up=True)
_act_fetch_then_crash = _on_a_replica("fetch_then_crash", up=True)


def _act_produce(c: SimCluster, rng: random.Random) -> None:
    c.produce(acks=rng.choice((ACKS_ALL, ACKS_ALL, ACKS_ALL, 1, 0)), records=rng.choice((1, 1, 2, 3)))


def _act_tick(c: SimCluster, rng: random.Random) -> None:
    c.tick(rng.choice((1, 10, LAG_MS // 2, LAG_MS + 1)))


def _act_restart(c: SimCluster, rng: random.Random) -> None:
    r = _some_replica(c, rng, True)
    if r is not None:
        c.restart(r, clean=rng.random() < 0.25)


def _act_recover_all(c: SimCluster, rng: random.Random) -> None:
    c.recover_all(rng)


def _act_elect_preferred(c: SimCluster, rng: random.Random) -> None:
    c.elect_preferred()


def _act_delete_records(c: SimCluster, rng: random.Random) -> None:
    c.delete_records(rng.random())


def _act_power_loss_after_delete_records(c: SimCluster, rng: random.Random) -> None:
    c.power_loss_after_delete_records(rng.random())


def _act_power_loss_of_the_isr(c: SimCluster, rng: random.Random) -> None:
    c.power_loss_of_the_isr(rng)


def _act_isolate(c: SimCluster, rng: random.Random) -> None:
    c.isolate()


def _act_produce_to_zombie(c: SimCluster, rng: random.Random) -> None:
    c.produce_to_zombie()


def _act_reconnect(c: SimCluster, rng: random.Random) -> None:
    c.reconnect()


ACTIONS: tuple[tuple[Action, int], ...] = (
    (_act_produce, 30),
    (_act_fetch, 40),
    (_act_tick, 8),
    (_act_flush, 5),
    (_act_checkpoint, 5),
    (_act_restart, 4),
    (_act_fail, 4),
    (_act_recover, 5),
    (_act_recover_all, 2),
    (_act_bounce, 2),
    (_act_elect_preferred, 1),
    (_act_controlled_shutdown, 1),
    (_act_delete_records, 2),
    (_act_power_loss_after_delete_records, 1),
    (_act_fetch_then_crash, 2),
    (_act_power_loss_of_the_isr, 2),
    (_act_isolate, 1),
    (_act_produce_to_zombie, 2),
    (_act_reconnect, 2),
)
_FUNCS = [a for a, _ in ACTIONS]
_WEIGHTS = [w for _, w in ACTIONS]


def run_schedule(seed: int, steps: int, **cluster_args: Any) -> SimCluster:
    """Build a cluster, run `steps` random actions drawn from `seed`, then heal it; the
    cluster's `invariants.violations` say what broke (empty: nothing). Followers truncate with
    OffsetsForLeaderEpoch on even seeds and on diverging-epoch fetch answers on odd ones;
    min.insync.replicas is 2 on every other pair of seeds (else 1)."""
    rng = random.Random(seed)
    if not cluster_args.get("truncate_to_hw"):
        cluster_args.setdefault("truncate_on_fetch", seed % 2 == 1)  # odd seeds: KIP-320 followers
    if seed // 2 % 2:
        cluster_args["config"] = {"min.insync.replicas": 2, **cluster_args.get("config", {})}
    cluster = SimCluster(**cluster_args)
    for action in rng.choices(_FUNCS, _WEIGHTS, k=steps):
        action(cluster, rng)
    cluster.heal()
    return cluster

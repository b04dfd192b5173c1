"""The two failure stories of seed 001 ("基于水印备份机制的缺陷"), replayed step by step with
two replicas A (0) and B (1) and min.insync.replicas=1: with followers truncating to their
own high watermark (pre-KIP-101) the invariants catch the damage; with leader epochs they hold.
The divergence story needs the controller of its time (no eligible leader replicas, KIP-966):
with them, B, which lost its page cache, may not lead. Each scenario runs on the in-memory log
and on real Log directories."""

from __future__ import annotations

from pathlib import Path

import pytest

from logstore.replication.follower import Step
from logstore.replication.partition import ACKS_ALL
from tests.simulation.cluster import SimCluster
from tests.simulation.invariants import batch_ids

A, B = 0, 1
BACKENDS = ("memory", "disk")


def _cluster(tmp_path: Path, backend: str, truncate_to_hw: bool, strict_history: bool = True,
             elr: bool = True) -> SimCluster:
    return SimCluster(backend=backend, root=tmp_path, truncate_to_hw=truncate_to_hw, replicas=2,
                      config={"min.insync.replicas": 1}, strict_history=strict_history,
                      eligible_leader_replicas_enable=elr)


def _replicate(c: SimCluster) -> None:
    """B joins: one truncation round, then a fetch that puts it in the ISR."""
    assert c.fetch(B) is Step.TRUNCATED
    assert c.fetch(B) is Step.FETCHED
    assert c.controller.isr == {A, B}


def _data_loss(tmp_path: Path, backend: str, truncate_to_hw: bool) -> SimCluster:
    """(1) 数据丢失: B has both messages and the leader's HW is 2, but B's HW is still 1 when B
    restarts; B truncates to its HW, A dies, B leads, A comes back and truncates too."""
    c = _cluster(tmp_path, backend, truncate_to_hw)
    assert c.controller.leader == A
    _replicate(c)
    m0 = c.produce(ACKS_ALL)
    c.fetch(B)  # B gets m0, HW 0
    c.fetch(B)  # leader HW -> 1, B's HW -> 1: m0 acknowledged
    assert m0 is not None and m0.is_committed
    m1 = c.produce(ACKS_ALL)
    c.fetch(B)  # B gets m1: LEO 2, HW 1
    c.lose_fetch_response(B)  # leader HW -> 2 (m1 acknowledged); B dies before taking HW 2
    assert m1 is not None and m1.is_committed
    assert c.leader_partition().high_watermark == 2
    assert c.nodes[B].partition.high_watermark == 1
    for r in (A, B):
        c.flush(r)
        c.checkpoint_hw(r)
    c.restart(B, clean=True)  # a quick clean restart: B stays in the ISR
    assert c.fetch(B) is Step.TRUNCATED
    b_log = c.nodes[B].partition.log
    assert b_log.log_end_offset == (1 if truncate_to_hw else 2)
    c.fail(A)  # A's machine dies before B fetches again; B is elected
    assert c.controller.leader == B
    c.recover(A)
    c.fetch(A)  # A truncates: to its HW 2 (nothing) or by epochs (nothing)
    c.fetch(A)  # HW mode: fetch offset 2 > B's LEO 1 -> A truncates to 1
    c.heal()
    return c


def _both_fail(tmp_path: Path, backend: str, truncate_to_hw: bool, elr: bool) -> SimCluster:
    """A has m0, m1 (flushed), B has m1 only in its page cache; the leader's HW is 2, B's is
    1. Both machines die at once: A keeps its data (all flushed), B loses m1."""
    # m1 was written with acks=1 and was lost with every replica failing at once, a fault
    # Kafka does not cover, so the "committed history" check is off for this story.
    c = _cluster(tmp_path, backend, truncate_to_hw, strict_history=False, elr=elr)
    _replicate(c)
    m0 = c.produce(ACKS_ALL)
    c.fetch(B)
    c.fetch(B)
    assert m0 is not None and m0.is_committed
    c.flush(B)  # m0 is on B's disk
    c.produce(acks=1)  # m1
    c.flush(A)
    c.fetch(B)  # B gets m1 in its page cache: LEO 2, HW 1
    c.lose_fetch_response(B)  # leader HW -> 2
    c.checkpoint_hw(A)
    c.checkpoint_hw(B)
    assert (c.nodes[A].hw_checkpoint, c.nodes[B].hw_checkpoint) == (2, 1)
    c.fail_together({A: True, B: True})
    return c


def _divergence(tmp_path: Path, backend: str, truncate_to_hw: bool) -> SimCluster:
    """(2) 数据不一致: after `_both_fail`, B comes back first and leads, takes m2 at offset 1;
    A comes back with HW 2 and, truncating to its HW, keeps m1 at offset 1."""
    c = _both_fail(tmp_path, backend, truncate_to_hw, elr=False)
    assert c.controller.leader is None and c.controller.isr == {B}  # A handled first: B is left
    c.recover(B)  # B first: it is the ISR, so it leads
    assert c.controller.leader == B
    b_log = c.nodes[B].partition.log
    assert b_log.log_end_offset == 1 and b_log.high_watermark == 1
    m2 = c.produce(ACKS_ALL)
    assert m2 is not None and m2.is_committed and m2.first_offset == 1
    c.recover(A)
    assert c.fetch(A) is Step.TRUNCATED
    c.fetch(A)
    return c


@pytest.mark.parametrize("backend", BACKENDS)
def test_seed_data_loss_with_hw_truncation_is_caught(tmp_path: Path, backend: str) -> None:
    c = _data_loss(tmp_path, backend, truncate_to_hw=True)
    lost = [v for v in c.invariants.violations if v.startswith("acknowledged batch (1, 2,")]
    assert lost, c.invariants.violations
    for node in c.nodes:  # offset 1 (m1) is gone from both logs, as the seed says
        assert [b[:2] for b in batch_ids(node.partition.log)][:1] == [(0, 1)]
        assert all(b[0] != 1 or b[2] != c.invariants.acked[1][2] for b in batch_ids(node.partition.log))
    c.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_seed_data_loss_prevented_by_leader_epochs(tmp_path: Path, backend: str) -> None:
    c = _data_loss(tmp_path, backend, truncate_to_hw=False)
    assert c.invariants.violations == []
    logs = [batch_ids(n.partition.log) for n in c.nodes]
    assert logs[0] == logs[1] and [b[:2] for b in logs[0]] == [(0, 1), (1, 2)]
    assert logs[0][1] == c.invariants.acked[1]
    c.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_seed_divergence_with_hw_truncation_is_caught(tmp_path: Path, backend: str) -> None:
    c = _divergence(tmp_path, backend, truncate_to_hw=True)
    a, b = (batch_ids(n.partition.log) for n in c.nodes)
    assert [x[:2] for x in a] == [x[:2] for x in b] == [(0, 1), (1, 2)]
    assert a[0] == b[0] and a[1] != b[1]  # r1, r2 on A; r1, r3 on B
    assert c.nodes[A].partition.high_watermark == c.nodes[B].partition.high_watermark == 2
    assert any(v.startswith("replica 0 differs from leader 1 below its HW") for v in c.invariants.violations)
    c.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_seed_divergence_prevented_by_leader_epochs(tmp_path: Path, backend: str) -> None:
    c = _divergence(tmp_path, backend, truncate_to_hw=False)
    assert c.invariants.violations == []
    a, b = (batch_ids(n.partition.log) for n in c.nodes)
    assert a == b and b[1][0] == 1
    c.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_seed_divergence_cannot_start_with_eligible_leader_replicas(tmp_path: Path, backend: str) -> None:
    c = _both_fail(tmp_path, backend, truncate_to_hw=False, elr=True)
    assert c.controller.isr == frozenset() and c.controller.elr == {A, B}
    c.recover(B)  # back from an unclean shutdown: no longer eligible
    assert c.controller.leader is None and c.controller.elr == {A}
    c.recover(A)  # back from an unclean shutdown too: unclean recovery elects the longest log
    assert c.controller.leader == A and c.unclean_elections == 1
    c.heal()
    assert c.invariants.violations == []
    a, b = (batch_ids(n.partition.log) for n in c.nodes)
    assert a == b and [x[:2] for x in a] == [(0, 1), (1, 2)]  # m1 survives on both
    c.close()

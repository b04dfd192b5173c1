"""A cluster's transaction coordinator writes markers in Kafka's order: only once the ISR of its
`__transaction_state` partition holds the PREPARE record (a coordinator cut off and killed
before leaves no COMMIT marker: its successor aborts the transaction everywhere), and completes
the transaction only once every partition's ISR holds its marker. WriteTxnMarkers travels as
node traffic (a node cut off from its clients still takes it) and a leader that does not answer
it holds the transaction only until the send times out."""

from __future__ import annotations

import pytest
from kafka.protocol.producer import EndTxnRequest, EndTxnResponse

from logstore.records import iter_batches
from logstore.records.control import CONTROL_KEY
from logstore.server import txn_markers
from logstore.server.cluster import Delay
from logstore.server.coordinator_records import partition_for
from tests.server.test_server_kraft_cluster import SESSION_MS, Cluster, create_topic, eventually
from tests.server.test_server_kraft_coordinators import (
    CONFIGS,
    PARTITIONS,
    TRANSACTION_KEY,
    TXN_TIMEOUT_MS,
    coordinator_of,
    key_led_by_a_broker,
    marked,
    state_at,
    transaction_on_every_partition,
    txn_call,
)
from tests.support.wire import WireClient

COMMIT, ABORT = 1, 0
# one replica of __transaction_state: the PREPARE record is replicated once written, whatever
# the links of the coordinator's node
ALONE = {**CONFIGS, "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1}


@pytest.fixture
def alone(tmp_path):
    cluster = Cluster(tmp_path, ALONE)
    yield cluster
    cluster.close()


def markers(log) -> list[int]:
    """The kinds of the control markers in `log` (1 commit, 0 abort), in order."""
    batches = iter_batches((log.dir / "00000000000000000000.log").read_bytes())
    return [CONTROL_KEY.unpack_from(b.records()[0].key)[1] for b in batches if b.is_control]


def end_txn(txn_id: str, ids: tuple[int, int]) -> EndTxnRequest:
    return EndTxnRequest[3](transactional_id=txn_id, producer_id=ids[0], producer_epoch=ids[1], committed=True)


def commit(cluster: Cluster, coordinator: int, txn_id: str, ids: tuple[int, int]) -> None:
    answer = txn_call(cluster.nodes[coordinator].port, end_txn(txn_id, ids), EndTxnResponse[3])
    assert answer.error_code == 0


def a_coordinator(cluster: Cluster, prefix: str) -> tuple[str, int]:
    """A transactional id led by a broker node (not the controller's) once loaded: (id, its coordinator)."""
    create_topic(cluster.nodes[1].port, "orders", 3, 3)  # one partition led by each node
    coordinator_of(cluster, "anything", TRANSACTION_KEY)  # creates __transaction_state through the controller
    txn_id, _ = key_led_by_a_broker(cluster, "__transaction_state", prefix)
    coordinator = coordinator_of(cluster, txn_id, TRANSACTION_KEY)
    eventually(lambda: state_at(cluster, coordinator, txn_id) in ("error 105", "Empty"))  # loaded
    return txn_id, coordinator


def led_by(cluster: Cluster, node: int, other_than: bool = False) -> int:
    """The partition of "orders" node `node` leads (`other_than`: one another node leads)."""
    partitions = cluster.controller.image.topic("orders").partitions
    return next(i for i, state in sorted(partitions.items()) if (state.leader == node) != other_than)


def test_a_transaction_completes_only_once_the_followers_hold_the_marker_the_coordinator_wrote(alone):
    txn_id, coordinator = a_coordinator(alone, "payments")
    index = led_by(alone, coordinator)
    ids = transaction_on_every_partition(alone, txn_id, coordinator, (index,))
    others = [n for n in alone.nodes if n != coordinator]
    for other in others:
        alone.kafka.cut(coordinator, other)
    commit(alone, coordinator, txn_id, ids)
    log = alone.nodes[coordinator].manager.get("orders", index)
    eventually(lambda: markers(log) == [COMMIT])  # written here, held by no follower yet
    assert state_at(alone, coordinator, txn_id) == "PrepareCommit"
    assert log.last_stable_offset < log.log_end_offset  # read_committed consumers wait for it

    for other in others:
        alone.kafka.heal(coordinator, other)
    eventually(lambda: state_at(alone, coordinator, txn_id) == "CompleteCommit")
    assert all(markers(alone.nodes[n].manager.get("orders", index)) == [COMMIT] for n in others)


def test_markers_reach_a_leader_cut_off_from_its_clients(alone):
    txn_id, coordinator = a_coordinator(alone, "refunds")
    index = led_by(alone, coordinator, other_than=True)
    leader = alone.controller.image.topic("orders").partitions[index].leader
    ids = transaction_on_every_partition(alone, txn_id, coordinator, (index,))
    alone.kafka.cut_clients(leader)  # the nodes still reach it: WriteTxnMarkers too
    commit(alone, coordinator, txn_id, ids)
    eventually(lambda: state_at(alone, coordinator, txn_id) == "CompleteCommit")
    assert markers(alone.nodes[leader].manager.get("orders", index)) == [COMMIT]


def test_a_leader_that_does_not_answer_the_markers_is_sent_them_again_after_a_timeout(alone, monkeypatch):
    monkeypatch.setattr(txn_markers, "SEND_TIMEOUT_S", 0.5)
    txn_id, coordinator = a_coordinator(alone, "refunds")
    index = led_by(alone, coordinator, other_than=True)
    leader = alone.controller.image.topic("orders").partitions[index].leader
    ids = transaction_on_every_partition(alone, txn_id, coordinator, (index,))
    held = alone.kafka.control("WriteTxnMarkers", Delay(3600), node=leader)  # the first one, for an hour
    commit(alone, coordinator, txn_id, ids)
    held.wait()
    eventually(lambda: state_at(alone, coordinator, txn_id) == "CompleteCommit")
    assert markers(alone.nodes[leader].manager.get("orders", index)) == [COMMIT]


def test_a_coordinator_killed_before_its_prepare_record_is_replicated_leaves_no_commit_marker(tmp_path):
    cluster = Cluster(tmp_path, CONFIGS)
    try:
        txn_id, coordinator = a_coordinator(cluster, "payments")
        ids = transaction_on_every_partition(cluster, txn_id, coordinator)
        for other in (n for n in cluster.nodes if n != coordinator):
            cluster.kafka.cut(coordinator, other)  # no follower copies the PREPARE record
        state_log = cluster.nodes[coordinator].manager.get("__transaction_state", partition_for(txn_id, PARTITIONS))
        end = state_log.log_end_offset
        here = cluster.nodes[coordinator].manager.get("orders", led_by(cluster, coordinator))
        with WireClient(cluster.nodes[coordinator].port) as client:
            client.send(end_txn(txn_id, ids))  # answered only once replicated: not waited for
            eventually(lambda: state_log.log_end_offset > end)  # PrepareCommit written here
            assert markers(here) == []
            cluster.kafka.node(coordinator).kill()
        cluster.pass_time(SESSION_MS // 2)
        cluster.pass_time(SESSION_MS // 2 + 1)  # the killed node's session ran out: new leaders
        successor = coordinator_of(cluster, txn_id, TRANSACTION_KEY, asked=next(iter(cluster.nodes)))
        eventually(lambda: state_at(cluster, successor, txn_id) in ("Ongoing", "PrepareAbort", "CompleteAbort"))
        cluster.pass_time(TXN_TIMEOUT_MS + 1)
        eventually(lambda: marked(cluster, ABORT))
        for index, state in cluster.controller.image.topic("orders").partitions.items():
            assert markers(cluster.nodes[state.leader].manager.get("orders", index)) == [ABORT]
    finally:
        cluster.close()

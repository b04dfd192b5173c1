"""Producer ids on a KRaft cluster: every broker hands them out from blocks the active
controller allocates (AllocateProducerIds, one ProducerIdsRecord per block), so producers that
asked different brokers never share an id, a restarted controller never gives a block twice, and
a broker that loads another's ids (a transaction it now coordinates) still hands out its own."""

from __future__ import annotations

import time

from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from logstore.clock import ManualClock
from logstore.server import error_codes as ec
from logstore.server.coordinator_records import partition_for
from logstore.server.kraft.quorum_controller import PRODUCER_ID_BLOCK_SIZE
from tests.server.test_server_kraft_cluster import Cluster, cluster, controller_node  # noqa: F401 (fixture)
from tests.server.test_server_kraft_coordinators import TRANSACTION_KEY, coordinator_of
from tests.support.clock import NOW
from tests.support.wire import WireClient


def idempotent_producer_id(port: int, timeout_s: float = 10) -> int:
    """InitProducerId without a transactional id, asked again while the broker waits for its
    block (COORDINATOR_LOAD_IN_PROGRESS, which clients retry)."""
    deadline = time.monotonic() + timeout_s
    with WireClient(port) as client:
        while True:
            response = client.call(InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=60_000,
                                                            producer_id=-1, producer_epoch=-1), InitProducerIdResponse[4])
            if response.error_code != ec.COORDINATOR_LOAD_IN_PROGRESS:
                assert response.error_code == ec.NONE
                return response.producer_id
            assert time.monotonic() < deadline, "no block of producer ids reached the broker"
            time.sleep(0.01)


def producer_id_records(nodes: Cluster) -> list[dict]:
    return [fields for _offset, (name, _version, fields) in nodes.controller.log.records(0)
            if name == "ProducerIdsRecord"]


def test_producers_asking_different_brokers_get_ids_from_distinct_controller_blocks(cluster):  # noqa: F811 (fixture)
    ids = {node_id: [idempotent_producer_id(node.port) for _ in range(2)] for node_id, node in cluster.nodes.items()}
    every_id = [pid for pids in ids.values() for pid in pids]
    assert len(set(every_id)) == len(every_id)
    blocks = {node_id: {pid // PRODUCER_ID_BLOCK_SIZE for pid in pids} for node_id, pids in ids.items()}
    assert all(len(b) == 1 for b in blocks.values())  # a broker's ids come from its one block
    assert len(set.union(*blocks.values())) == 3  # and no two brokers share a block
    records = producer_id_records(cluster)
    assert sorted((r["brokerId"], r["nextProducerId"] // PRODUCER_ID_BLOCK_SIZE - 1) for r in records) == sorted(
        (node_id, block) for node_id, b in blocks.items() for block in b)
    assert all(r["brokerEpoch"] == cluster.controller.image.brokers[r["brokerId"]].broker_epoch for r in records)


def test_a_restarted_controller_hands_out_blocks_after_every_one_it_gave(tmp_path):
    nodes = Cluster(tmp_path)
    try:
        for node in nodes.nodes.values():
            idempotent_producer_id(node.port)
        nodes.controller.snapshot()  # the snapshot keeps the last block's end
        highest = max(r["nextProducerId"] for r in producer_id_records(nodes))
    finally:
        nodes.close()
    restarted = controller_node(tmp_path, ManualClock(NOW)).start()
    try:
        assert restarted.cluster.controller.image.next_producer_id == highest
        assert idempotent_producer_id(restarted.port) >= highest
    finally:
        restarted.stop()


def transactional_producer_id(port: int, txn_id: str, timeout_s: float = 10) -> int:
    """InitProducerId for `txn_id` at its coordinator, asked again while it loads or is elected."""
    deadline = time.monotonic() + timeout_s
    with WireClient(port) as client:
        while True:
            response = client.call(InitProducerIdRequest[4](transactional_id=txn_id, transaction_timeout_ms=60_000,
                                                            producer_id=-1, producer_epoch=-1), InitProducerIdResponse[4])
            if response.error_code == ec.NONE:
                return response.producer_id
            assert response.error_code in (ec.COORDINATOR_LOAD_IN_PROGRESS, ec.NOT_COORDINATOR), response
            assert time.monotonic() < deadline, f"no coordinator took {txn_id}"
            time.sleep(0.01)


def test_a_broker_loading_another_brokers_producer_ids_keeps_handing_out_its_own_block(tmp_path):
    nodes = Cluster(tmp_path, {"transaction.state.log.num.partitions": 3})
    try:
        first = {node_id: idempotent_producer_id(node.port) for node_id, node in nodes.nodes.items()}
        low, high = min(first, key=first.get), max(first, key=first.get)
        coordinator_of(nodes, "anything", TRANSACTION_KEY)  # creates __transaction_state
        nodes.caught_up()
        partitions = nodes.controller.image.topic("__transaction_state").partitions
        txn_id = next(f"payments-{i}" for i in range(100)
                      if partitions[partition_for(f"payments-{i}", len(partitions))].leader == high)
        assert transactional_producer_id(nodes.nodes[high].port, txn_id) // PRODUCER_ID_BLOCK_SIZE == \
            first[high] // PRODUCER_ID_BLOCK_SIZE
        # `low` becomes the transaction's coordinator: it loads an id of `high`'s block, above its own
        nodes.kafka.move_leader("__transaction_state", partition_for(txn_id, len(partitions)), low)
        transactional_producer_id(nodes.nodes[low].port, txn_id)
        assert idempotent_producer_id(nodes.nodes[low].port) == first[low] + 1
    finally:
        nodes.close()

"""Producer ids on a KRaft cluster: every broker hands them out from blocks the active
controller allocates (AllocateProducerIds, one ProducerIdsRecord per block), so producers that
asked different brokers never share an id, and a restarted controller never gives a block twice."""

from __future__ import annotations

import time

from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from logstore.clock import ManualClock
from logstore.server import error_codes as ec
from logstore.server.kraft.quorum_controller import PRODUCER_ID_BLOCK_SIZE
from tests.server.test_server_kraft_cluster import Cluster, cluster, controller_node  # noqa: F401 (fixture)
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

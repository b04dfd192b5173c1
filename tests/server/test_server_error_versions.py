"""A fenced producer on an API version older than KIP-588 gets INVALID_PRODUCER_EPOCH (47), the
code it knows, and PRODUCER_FENCED (90) only where the version carries it, as Kafka answers."""

from __future__ import annotations

import pytest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
)

from tests.support.wire import WireClient

INVALID_PRODUCER_EPOCH, PRODUCER_FENCED = 47, 90


pytestmark = pytest.mark.kafka_broker_config({"transaction.state.log.num.partitions": 1})


@pytest.fixture(scope="module", autouse=True)
def seeded(module_server) -> None:
    module_server.context.topics.create("fenced", 1)


@pytest.fixture(scope="module")
def fenced(module_server):
    """(socket, the ids of a producer a newer instance of its transactional id has fenced)."""
    with WireClient(module_server.port, client_id="fenced") as sock:
        def init():
            return sock.call(InitProducerIdRequest[3](transactional_id="t", transaction_timeout_ms=60_000,
                                                       producer_id=-1, producer_epoch=-1), InitProducerIdResponse[3])
        old = init()
        assert init().producer_epoch == old.producer_epoch + 1
        yield sock, {"transactional_id": "t", "producer_id": old.producer_id, "producer_epoch": old.producer_epoch}


@pytest.mark.parametrize(("version", "code"), [(0, INVALID_PRODUCER_EPOCH), (1, INVALID_PRODUCER_EPOCH),
                                               (2, PRODUCER_FENCED), (3, PRODUCER_FENCED)])
def test_end_txn_answers_a_fenced_producer_in_the_code_its_version_knows(fenced, version, code):
    sock, ids = fenced
    assert sock.call(EndTxnRequest[version](**ids, committed=True), EndTxnResponse[version]).error_code == code


@pytest.mark.parametrize(("version", "code"), [(1, INVALID_PRODUCER_EPOCH), (2, PRODUCER_FENCED)])
def test_add_offsets_and_partitions_map_the_code_too(fenced, version, code):
    sock, ids = fenced
    offsets = sock.call(AddOffsetsToTxnRequest[version](**ids, group_id="g"), AddOffsetsToTxnResponse[version])
    assert offsets.error_code == code
    topic = AddPartitionsToTxnRequest[version].AddPartitionsToTxnTopic
    added = sock.call(AddPartitionsToTxnRequest[version](**{f"v3_and_below_{k}": v for k, v in ids.items()},
                                                          v3_and_below_topics=[topic(name="fenced", partitions=[0])]),
                 AddPartitionsToTxnResponse[version])
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == code


@pytest.mark.parametrize(("version", "code"), [(3, INVALID_PRODUCER_EPOCH), (4, PRODUCER_FENCED)])
def test_init_producer_id_with_a_stale_epoch(fenced, version, code):
    sock, ids = fenced
    answer = sock.call(InitProducerIdRequest[version](transactional_id="t", transaction_timeout_ms=60_000,
                                                       producer_id=ids["producer_id"],
                                                       producer_epoch=ids["producer_epoch"]),
                  InitProducerIdResponse[version])
    assert answer.error_code == code

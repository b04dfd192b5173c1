"""KIP-966 on a running cluster: UpdateFeatures (as `kafka-features upgrade` sends it to any
broker) finalizes `eligible.leader.replicas.version`, after which a leader whose ISR is below
min.insync.replicas holds its high watermark back, and replicas leaving that ISR become eligible
leaders instead of being forgotten, unless their clean-shutdown marker does not name their last
registration."""

from __future__ import annotations

from kafka.protocol.admin import UpdateFeaturesRequest, UpdateFeaturesResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from logstore.server import error_codes as ec
from logstore.server.kraft.metadata_records import ELIGIBLE_LEADER_REPLICAS_VERSION
from logstore.server.kraft.replica_fetcher import ReplicaFetcher
from tests.server.test_server_admin_tools import describe_partitions
from tests.server.test_server_kraft_cluster import (  # noqa: F401 (the cluster fixture)
    cluster,
    create_topic,
    eventually,
    produce,
    replicated,
)
from tests.support.wire import WireClient


def update_features(port: int, levels: dict[str, int], *, upgrade_type: int = 1, version: int = 1) -> dict:
    request = UpdateFeaturesRequest[version]
    updates = [request.FeatureUpdateKey(feature=name, max_version_level=level, upgrade_type=upgrade_type)
               for name, level in levels.items()]
    with WireClient(port) as client:
        response = client.call(request(timeout_ms=10_000, feature_updates=updates, validate_only=False),
                               UpdateFeaturesResponse[version])
    return {r.feature: r.error_code for r in response.results}


def test_update_features_turns_elr_on_and_refuses_what_kafka_refuses(cluster):  # noqa: F811 (fixture)
    port = cluster.nodes[2].port
    assert update_features(port, {ELIGIBLE_LEADER_REPLICAS_VERSION: 2}) == {
        ELIGIBLE_LEADER_REPLICAS_VERSION: ec.INVALID_UPDATE_VERSION}  # no broker supports level 2
    assert update_features(port, {"metadata.version": 24}) == {"metadata.version": ec.INVALID_UPDATE_VERSION}
    assert update_features(port, {ELIGIBLE_LEADER_REPLICAS_VERSION: 1}) == {ELIGIBLE_LEADER_REPLICAS_VERSION: ec.NONE}
    assert cluster.controller.image.eligible_leader_replicas_enabled
    assert update_features(port, {ELIGIBLE_LEADER_REPLICAS_VERSION: 0}) == {
        ELIGIBLE_LEADER_REPLICAS_VERSION: ec.INVALID_UPDATE_VERSION}  # a downgrade must say so
    assert update_features(port, {ELIGIBLE_LEADER_REPLICAS_VERSION: 0}, upgrade_type=2) == {
        ELIGIBLE_LEADER_REPLICAS_VERSION: ec.NONE}
    assert not cluster.controller.image.eligible_leader_replicas_enabled


def test_below_min_isr_the_high_watermark_waits_and_the_leavers_stay_eligible(cluster):  # noqa: F811 (fixture)
    assert update_features(cluster.nodes[3].port, {ELIGIBLE_LEADER_REPLICAS_VERSION: 1}) == {
        ELIGIBLE_LEADER_REPLICAS_VERSION: ec.NONE}
    create_topic(cluster.nodes[1].port, "orders", 1, 3, {"min.insync.replicas": "2"})
    cluster.caught_up()
    cluster.nodes[1].move_leader("orders", 0, 1)  # led by the node that stays up
    eventually(lambda: produce(cluster.nodes[1].port, "orders", 0, b"a", acks=-1) == ec.NONE)
    cluster.stop(2)  # a clean stop leaves the ISR first; [1, 3] still holds min ISR: 2 is not eligible
    cluster.stop(3)  # the ISR falls below min ISR: 3 holds every committed record, it stays eligible
    state = cluster.controller.image.topic("orders").partitions[0]
    assert (state.leader, state.isr, state.elr) == (1, [1], [3])
    assert produce(cluster.nodes[1].port, "orders", 0, b"b", acks=1) == ec.NONE
    log = cluster.nodes[1].manager.get("orders", 0)
    assert (log.log_end_offset, log.high_watermark) == (2, 1)  # KIP-966: nothing commits below min ISR
    described = describe_partitions(cluster.nodes[1], ["orders"], limit=10)
    p = described.topics[0].partitions[0]  # as kafka-topics --describe shows it: Elr, LastKnownElr
    assert (p.leader_id, p.isr_nodes, p.eligible_leader_replicas, p.last_known_elr, sorted(p.offline_replicas)) == \
        (1, [1], [3], [], [2, 3])
    cluster.start(3)
    eventually(lambda: log.high_watermark == 2)  # caught up and back in the ISR: committed
    assert cluster.controller.image.topic("orders").partitions[0].isr == [1, 3]


def test_a_cleanly_restarted_broker_stays_eligible_and_one_that_lost_its_marker_does_not(
        cluster, monkeypatch):  # noqa: F811 (fixture)
    update_features(cluster.nodes[1].port, {ELIGIBLE_LEADER_REPLICAS_VERSION: 1})
    create_topic(cluster.nodes[1].port, "orders", 1, 3, {"min.insync.replicas": "3"})
    cluster.caught_up()
    cluster.nodes[1].move_leader("orders", 0, 1)
    eventually(lambda: produce(cluster.nodes[1].port, "orders", 0, b"a", acks=1) == ec.NONE)
    cluster.stop(3)
    cluster.stop(2)
    assert sorted(cluster.controller.image.topic("orders").partitions[0].elr) == [2, 3]
    monkeypatch.setattr(ReplicaFetcher, "followed", lambda _self, _leader: [])  # they stay out of the ISR
    cluster.start(3)  # its marker names its last registration: a clean stop, still eligible
    assert sorted(cluster.controller.image.topic("orders").partitions[0].elr) == [2, 3]
    (cluster.dir / "node-2" / ".kafka_cleanshutdown").unlink()  # as a power loss leaves it
    cluster.start(2)  # no marker: an unclean stop, it may have lost records
    assert cluster.controller.image.topic("orders").partitions[0].elr == [3]


def test_api_versions_shows_the_finalized_features_as_kafka_features_describe_reads_them(cluster):  # noqa: F811
    update_features(cluster.nodes[2].port, {ELIGIBLE_LEADER_REPLICAS_VERSION: 1})
    cluster.caught_up()
    with WireClient(cluster.nodes[3].port) as client:
        answer = client.call(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"),
                             ApiVersionsResponse[3])
    finalized = {f.name: (f.min_version_level, f.max_version_level) for f in answer.finalized_features}
    assert finalized[ELIGIBLE_LEADER_REPLICAS_VERSION] == (1, 1) and finalized["metadata.version"] == (25, 25)
    supported = {f.name: (f.min_version, f.max_version) for f in answer.supported_features}
    assert supported[ELIGIBLE_LEADER_REPLICAS_VERSION] == (0, 1)
    assert answer.finalized_features_epoch > 0

"""The active controller of a single-voter quorum: brokers register and heartbeat, are fenced
when their heartbeats stop (on a manual clock) and unfenced when they return; topics are created;
everything is a record of `__cluster_metadata-0`, and a restart rebuilds the same state from the
latest snapshot and the log after it."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from logstore.clock import ManualClock
from logstore.errors import InvalidReplicationError
from logstore.internal_topics import read_snapshot
from logstore.log_files import parse_kraft_snapshot_name
from logstore.server import error_codes as ec
from logstore.server.kraft.metadata_log import METADATA_PARTITION_DIR, read_quorum_state
from logstore.server.kraft.quorum_controller import QuorumController
from logstore.server.topics import TopicExistsError
from tests.support.clock import NOW

CLUSTER = "AAAAAAAAAAAAAAAAAAAAAQ"
SESSION_MS = 9000
FEATURES = [{"name": "metadata.version", "minSupportedVersion": 7, "maxSupportedVersion": 25}]


def listeners(broker_id: int) -> list[dict]:
    return [{"name": "PLAINTEXT", "host": "localhost", "port": 9090 + broker_id, "securityProtocol": 0}]


def start(data_dir: Path, clock: ManualClock, **options) -> QuorumController:
    controller = QuorumController(data_dir, 1, CLUSTER, clock, session_timeout_ms=SESSION_MS, **options)
    controller.start()
    return controller


def join(controller: QuorumController, broker_id: int, incarnation: uuid.UUID | None = None) -> int:
    """Register the broker and heartbeat it caught up: its broker epoch."""
    registration = controller.register_broker(
        broker_id, cluster_id=CLUSTER, incarnation_id=incarnation or uuid.uuid4(), listeners=listeners(broker_id),
        features=FEATURES, log_dirs=[uuid.UUID(int=broker_id + 100)])
    assert registration.error_code == ec.NONE
    controller.heartbeat(broker_id, registration.broker_epoch, current_metadata_offset=controller.log.end_offset)
    return registration.broker_epoch


def beat(controller: QuorumController, *broker_ids: int) -> None:
    for broker_id in broker_ids:
        controller.heartbeat(broker_id, controller.image.brokers[broker_id].broker_epoch,
                             current_metadata_offset=controller.log.end_offset)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def controller(tmp_path: Path, clock: ManualClock):
    controller = start(tmp_path, clock)
    yield controller
    controller.close()


def test_a_registered_broker_stays_fenced_until_a_heartbeat_shows_it_caught_up(controller):
    registration = controller.register_broker(1, cluster_id=CLUSTER, incarnation_id=uuid.uuid4(),
                                              listeners=listeners(1), features=FEATURES)
    assert registration.broker_epoch == controller.log.end_offset - 1  # the offset of its RegisterBrokerRecord
    assert controller.image.registry.is_fenced(1)
    behind = controller.heartbeat(1, registration.broker_epoch, current_metadata_offset=registration.broker_epoch - 1)
    assert (behind.is_caught_up, behind.is_fenced) == (False, True)
    caught_up = controller.heartbeat(1, registration.broker_epoch, current_metadata_offset=registration.broker_epoch)
    assert (caught_up.error_code, caught_up.is_caught_up, caught_up.is_fenced) == (ec.NONE, True, False)
    assert controller.image.registry.registration(1).broker_epoch == registration.broker_epoch


def test_a_broker_whose_heartbeats_stop_is_fenced_and_leaves_isr_and_leadership(controller, clock):
    for broker_id in (1, 2, 3):
        join(controller, broker_id)
    topic_id = controller.create_topic("orders", 3, 3)
    led_by_3 = [p for p, info in controller.image.topics[topic_id].partitions.items() if info.leader == 3]
    clock.advance(SESSION_MS // 2)
    beat(controller, 1, 2)
    clock.advance(SESSION_MS // 2 + 1)
    assert controller.check_sessions() == [3]
    assert controller.image.unfenced_brokers() == [1, 2]
    for partition_id, info in controller.image.topics[topic_id].partitions.items():
        assert 3 not in info.isr and info.leader in (1, 2)
        if partition_id in led_by_3:
            assert info.leader_epoch == 1  # a new leader, a new epoch
    assert controller.check_sessions() == []  # nothing more to fence


def test_a_fenced_broker_returns_with_a_new_epoch_and_is_unfenced(controller, clock):
    first = join(controller, 1)
    clock.advance(SESSION_MS + 1)
    controller.check_sessions()
    assert controller.heartbeat(1, first - 1, current_metadata_offset=0).error_code == ec.STALE_BROKER_EPOCH
    second = join(controller, 1)
    assert second > first and not controller.image.registry.is_fenced(1)
    assert controller.heartbeat(1, first, current_metadata_offset=second).error_code == ec.STALE_BROKER_EPOCH
    assert controller.heartbeat(9, 0, current_metadata_offset=0).error_code == ec.BROKER_ID_NOT_REGISTERED


def test_a_second_incarnation_is_refused_while_the_first_holds_a_live_session(controller, clock):
    join(controller, 1, uuid.UUID(int=1))
    other = controller.register_broker(1, cluster_id=CLUSTER, incarnation_id=uuid.UUID(int=2),
                                       listeners=listeners(1), features=FEATURES)
    assert other.error_code == ec.DUPLICATE_BROKER_REGISTRATION
    wrong_cluster = controller.register_broker(2, cluster_id="another", incarnation_id=uuid.uuid4(),
                                               listeners=listeners(2), features=FEATURES)
    assert wrong_cluster.error_code == ec.INCONSISTENT_CLUSTER_ID
    too_old = controller.register_broker(2, cluster_id=CLUSTER, incarnation_id=uuid.uuid4(), listeners=listeners(2),
                                         features=[{**FEATURES[0], "maxSupportedVersion": 20}])
    assert too_old.error_code == ec.UNSUPPORTED_VERSION


def test_a_broker_asking_to_be_fenced_or_to_stop_is_fenced(controller):
    epoch = join(controller, 1)
    reply = controller.heartbeat(1, epoch, current_metadata_offset=epoch, want_shut_down=True)
    assert reply.is_fenced and reply.should_shut_down


def test_topics_spread_over_unfenced_brokers_and_refuse_what_kafka_refuses(controller):
    for broker_id in (1, 2):
        join(controller, broker_id)
    topic_id = controller.create_topic("orders", 4, 2, {"cleanup.policy": "compact"})
    partitions = controller.image.topics[topic_id].partitions
    assert sorted(partitions) == [0, 1, 2, 3]
    assert all(sorted(p.replicas) == [1, 2] and p.isr == p.replicas and p.leader == p.replicas[0]
               for p in partitions.values())
    assert partitions[0].directories == [uuid.UUID(int=b + 100) for b in partitions[0].replicas]
    assert controller.image.configs[(2, "orders")] == {"cleanup.policy": "compact"}
    with pytest.raises(TopicExistsError):
        controller.create_topic("orders", 1, 1)
    with pytest.raises(InvalidReplicationError, match="larger than the 2 unfenced brokers"):
        controller.create_topic("wide", 1, 3)


def test_a_restart_reloads_the_metadata_from_the_snapshot_and_the_log_after_it(tmp_path, clock):
    controller = start(tmp_path, clock)
    for broker_id in (1, 2, 3):
        join(controller, broker_id)
    controller.create_topic("before", 2, 3)
    snapshot = controller.snapshot()
    clock.advance(SESSION_MS + 1)
    beat(controller, 1, 2)
    controller.check_sessions()
    controller.create_topic("after", 1, 2)
    expected = controller.image.snapshot_records()
    end, epoch = controller.log.end_offset, controller.log.epoch
    controller.close()

    assert parse_kraft_snapshot_name(snapshot.name) < (end, epoch)
    restarted = start(tmp_path, clock)
    try:
        assert restarted.image.snapshot_records() == expected
        assert restarted.log.epoch == epoch + 1  # a new epoch, opened by a LeaderChange
        assert read_quorum_state(tmp_path / METADATA_PARTITION_DIR)["leaderEpoch"] == epoch + 1
        assert restarted.image.unfenced_brokers() == [1, 2]
        assert restarted.log.end_offset == end + 1
    finally:
        restarted.close()


def test_a_snapshot_holds_the_image_between_a_header_and_a_footer(controller):
    join(controller, 1)
    controller.create_topic("orders", 1, 1)
    path = controller.snapshot()
    records = read_snapshot(path.read_bytes())
    names = [r.name for _, r in records]
    assert names[0] == "SnapshotHeaderRecord" and names[-1] == "SnapshotFooterRecord"
    assert names[1:-1] == ["FeatureLevelRecord"] * 3 + ["RegisterBrokerRecord", "TopicRecord", "PartitionRecord"]
    assert [r.value["name"] for _, r in records[1:4]] == ["metadata.version", "group.version", "transaction.version"]


def test_snapshots_are_taken_once_enough_record_bytes_came_in(tmp_path, clock):
    controller = start(tmp_path, clock, snapshot_record_bytes=600)
    try:
        snapshots = lambda: sorted(p.name for p in controller.log.dir.glob("*.checkpoint"))  # noqa: E731
        assert snapshots() == []
        for broker_id in (1, 2, 3):
            join(controller, broker_id)
        taken = snapshots()
        assert len(taken) == 1 and controller.maybe_snapshot() is None
        controller.create_topic("orders", 20, 3)
        assert len(snapshots()) == 2
    finally:
        controller.close()

"""The group coordinator as a state machine, without a socket or a request: typed calls in,
typed results out, every timeout decided by the injected clock (driven here, never slept on)."""

from __future__ import annotations

import asyncio

import pytest

from logstore.clock import ManualClock
from logstore.manager import LogManager
from logstore.server.broker_config import BrokerConfig
from logstore.server.context import ServerContext
from logstore.server.coordinator_records import replay_groups
from logstore.server.group_coordinator import GroupCoordinator
from logstore.server.group_results import OffsetCommitEntry
from logstore.server.meta_properties import load_or_create
from logstore.server.topics import Topics
from tests.support.clock import NOW

SESSION_MS = 1_000
RETENTION_MS = 24 * 3600 * 1000
NONE, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS = 0, 25, 27
PROTOCOLS = [("range", b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff")]


@pytest.fixture
def coordinator(tmp_path):
    clock = ManualClock(NOW)
    config = BrokerConfig.load(None, {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 1,
                                      "group.min.session.timeout.ms": 10, "offsets.retention.minutes": 24 * 60,
                                      "offsets.retention.check.interval.ms": 1})
    manager = LogManager(tmp_path, config.log_defaults, clock=clock)
    ctx = ServerContext(config, load_or_create(tmp_path, config.node_id), manager, Topics(manager), clock)
    ctx.topics.create("t", 1)
    yield GroupCoordinator(ctx), clock, manager
    manager.close()


async def join(groups: GroupCoordinator, member_id: str = "", group_id: str = "g"):
    return await groups.join(group_id, member_id, None, "client", session_timeout_ms=SESSION_MS,
                             rebalance_timeout_ms=SESSION_MS, protocol_type="consumer", protocols=PROTOCOLS,
                             require_known_member_id=False)


def test_a_silent_member_is_removed_once_the_clock_passes_its_session_timeout(coordinator):
    groups, clock, _ = coordinator

    async def scenario():
        first = await join(groups)
        assert first.error == NONE and first.leader == first.member_id
        synced = await groups.sync("g", first.member_id, None, first.generation, {first.member_id: b"mine"})
        assert synced.assignment == b"mine"
        clock.advance(SESSION_MS)
        groups.check_timers()
        assert groups.heartbeat("g", first.member_id, None, first.generation) == NONE  # exactly at the timeout
        clock.advance(SESSION_MS + 1)
        groups.check_timers()
        assert groups.heartbeat("g", first.member_id, None, first.generation) == UNKNOWN_MEMBER_ID
        assert groups.describe("g").state == "Empty"
        groups.close()

    asyncio.run(scenario())


def test_a_standalone_commit_expires_after_the_retention_on_the_clock(coordinator):
    groups, clock, manager = coordinator
    entry = OffsetCommitEntry("t", 0, 42, -1, "meta")
    assert asyncio.run(groups.commit_offsets("solo", "", -1, None, [entry])) == (NONE, {})
    clock.advance(RETENTION_MS - 1)
    groups.check_timers()
    assert [p.offset for p in groups.fetch_offsets("solo", None, False)["t"]] == [42]
    clock.advance(1)
    groups.check_timers()
    assert groups.fetch_offsets("solo", None, False) == {}
    stored = replay_groups(manager.get("__consumer_offsets", 0))  # the tombstones are written
    assert stored["solo"].offsets == {} and stored["solo"].deleted

"""The KIP-848 group state machine (ConsumerGroupCoordinator) driven on the injected clock by
simulated consumers: joins, leaves, static leaves and returns, subscription changes, topics
growing, heartbeats whose answers are lost, silent members and slow revocations. A consumer
owns what the coordinator last told it until it hears otherwise; at every step no partition is
owned by two members the coordinator still has, the records written read as Kafka's own
definitions say, and replaying them gives the coordinator's state back."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from logstore.clock import ManualClock
from logstore.server import error_codes as ec
from logstore.server.broker_config import BrokerConfig
from logstore.server.consumer_group import partition_set
from logstore.server.consumer_group_coordinator import ConsumerGroupCoordinator
from logstore.server.consumer_group_storage import apply_record, record_type
from logstore.server.group_results import ConsumerHeartbeat
from tests.support import kafka_definitions
from tests.support.clock import NOW

SESSION_MS = 1_000
REBALANCE_MS = 600
GROUP = "g"
CLIENTS = [f"c{i}" for i in range(5)]
SUBSCRIPTIONS = [("a",), ("b",), ("a", "b"), ("a", "b", "c"), ("c",), ("a", "missing")]


class FakeTopics:
    """A topic catalog: names, ids and partition counts that tests change."""

    def __init__(self, sizes: dict[str, int]):
        self.ids = {name: uuid.uuid5(uuid.NAMESPACE_DNS, name) for name in sizes}
        self.sizes = dict(sizes)

    def names(self) -> list[str]:
        return sorted(self.sizes)

    def topic_id(self, topic: str) -> uuid.UUID:
        return self.ids[topic]

    def partition_count(self, topic: str) -> int:
        return self.sizes[topic]

    def is_internal(self, topic: str) -> bool:
        return topic.startswith("__")


def coordinator(clock: ManualClock, topics: FakeTopics, written: list, groups: dict | None = None,
                **configs) -> ConsumerGroupCoordinator:
    config = BrokerConfig.load(None, {"group.consumer.session.timeout.ms": SESSION_MS,
                                      "group.consumer.heartbeat.interval.ms": 100, **configs})
    return ConsumerGroupCoordinator({} if groups is None else groups, topics, config, clock,
                                    lambda group_id, records: written.extend(records))


@dataclass
class Consumer:
    """A simulated consumer: what it believes (member id, epoch, owned partitions)."""

    name: str
    instance_id: str | None = None
    member_id: str = ""
    epoch: int = 0
    in_group: bool = False
    owned: dict = field(default_factory=dict)
    subscription: tuple[str, ...] = ("a",)
    regex: str | None = None
    full_next: bool = True  # after a lost answer the next heartbeat says everything again

    def call(self, epoch: int | None = None, full: bool = False) -> ConsumerHeartbeat:
        full = full or self.full_next
        return ConsumerHeartbeat(
            GROUP, self.member_id, self.epoch if epoch is None else epoch, instance_id=self.instance_id,
            rebalance_timeout_ms=REBALANCE_MS if full else -1,
            subscribed_topic_names=self.subscription if full else None,
            subscribed_topic_regex=self.regex if full and self.regex is not None else None,
            owned=dict(self.owned) if full or self.owned is not None else None, client_id=self.name)

    def drop_everything(self) -> None:
        self.in_group, self.owned, self.epoch = False, {}, 0


class ConsumerGroupMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.clock = ManualClock(NOW)
        self.topics = FakeTopics({"a": 3, "b": 2, "c": 1, "__consumer_offsets": 1})
        self.written: list = []
        self.checked = 0
        self.groups: dict = {}
        self.coordinator = coordinator(self.clock, self.topics, self.written, self.groups)
        self.consumers = {name: Consumer(name, instance_id=f"i-{name}" if i % 2 else None)
                          for i, name in enumerate(CLIENTS)}

    def answer(self, consumer: Consumer, call: ConsumerHeartbeat, delivered: bool = True,
               full_retry: bool = True) -> None:
        result = self.coordinator.heartbeat(call)
        if not delivered:  # Java's client says everything again; librdkafka may retry as it was
            consumer.full_next = full_retry
            return
        if result.error in (ec.FENCED_MEMBER_EPOCH, ec.UNKNOWN_MEMBER_ID):
            consumer.drop_everything()
            return
        assert result.error == ec.NONE, result
        consumer.full_next = False
        consumer.epoch = result.member_epoch
        if result.assignment is not None:
            consumer.owned = dict(result.assignment)

    @rule(name=st.sampled_from(CLIENTS), subscription=st.sampled_from(SUBSCRIPTIONS), by_regex=st.booleans(),
          delivered=st.booleans())
    def join(self, name, subscription, by_regex, delivered):
        consumer = self.consumers[name]
        if consumer.in_group:
            return
        consumer.member_id = consumer.member_id or f"{name}-{uuid.uuid4()}"
        consumer.subscription, consumer.regex = subscription, ("a|b" if by_regex else None)
        consumer.in_group, consumer.owned, consumer.epoch, consumer.full_next = True, {}, 0, True
        self.answer(consumer, consumer.call(epoch=0, full=True), delivered)
        if not delivered:  # it never heard back: it joins again
            consumer.in_group = False

    @rule(name=st.sampled_from(CLIENTS), delivered=st.booleans(), full_retry=st.booleans())
    def heartbeat(self, name, delivered, full_retry):
        consumer = self.consumers[name]
        if consumer.in_group:
            self.answer(consumer, consumer.call(), delivered, full_retry)

    @rule(lost=st.lists(st.booleans(), min_size=len(CLIENTS), max_size=len(CLIENTS)), ms=st.integers(0, 200))
    def everyone_heartbeats(self, lost, ms):
        """Each member in the group heartbeats in turn, some answers lost, then time passes."""
        for consumer, answer_lost in zip(self.consumers.values(), lost, strict=True):
            if consumer.in_group:
                self.answer(consumer, consumer.call(), delivered=not answer_lost)
        self.tick(ms)

    @rule(name=st.sampled_from(CLIENTS), subscription=st.sampled_from(SUBSCRIPTIONS))
    def change_subscription(self, name, subscription):
        consumer = self.consumers[name]
        if consumer.in_group:
            consumer.subscription = subscription
            self.answer(consumer, consumer.call(full=True))

    @rule(name=st.sampled_from(CLIENTS), static=st.booleans())
    def leave(self, name, static):
        consumer = self.consumers[name]
        if not consumer.in_group or (static and consumer.instance_id is None):
            return
        self.coordinator.heartbeat(consumer.call(epoch=-2 if static else -1))
        consumer.drop_everything()
        if static:  # a static member comes back under a new member id
            consumer.member_id = ""

    @rule(ms=st.sampled_from([50, 300, REBALANCE_MS + 1, SESSION_MS + 1]))
    def time_passes(self, ms):
        self.tick(ms)

    def tick(self, ms):
        self.clock.advance(ms)
        self.coordinator.check_timers()

    @rule(topic=st.sampled_from(["a", "b", "c"]))
    def add_partition(self, topic):
        self.topics.sizes[topic] += 1

    @precondition(lambda self: GROUP in self.groups)
    @invariant()
    def no_partition_has_two_owners(self):
        members = self.groups[GROUP].consumer.members
        seen: dict = {}
        for member in members.values():
            for tp in partition_set(member.assigned) | partition_set(member.revoking):
                assert tp not in seen, f"{tp} owned by {seen[tp]} and {member.member_id}"
                seen[tp] = member.member_id
        holders: dict = {}
        for consumer in self.consumers.values():
            member = members.get(consumer.member_id)
            if not consumer.in_group or member is None:
                continue  # fenced: the coordinator has moved on without it
            server_owned = partition_set(member.assigned) | partition_set(member.revoking)
            for tp in partition_set(consumer.owned):
                assert tp in server_owned, f"{consumer.name} holds {tp} the coordinator gave away"
                assert tp not in holders, f"{tp} held by {holders[tp]} and {consumer.name}"
                holders[tp] = consumer.name

    @precondition(lambda self: GROUP in self.groups)
    @invariant()
    def replaying_the_records_gives_the_state_back(self):
        replayed: dict = {}
        for key, value in self.written:
            apply_record(replayed, key, value)
        for key, value in self.written[self.checked:]:  # the bytes are what Kafka's own definitions read
            key_cls, value_cls = kafka_definitions.RECORD_TYPES[record_type(key)]
            assert key_cls.from_bytes(key).group_id == GROUP
            assert value is None or value_cls.from_bytes(value).to_bytes() == value
        self.checked = len(self.written)
        state, live = replayed[GROUP], self.groups[GROUP].consumer
        assert (state.group_epoch, state.assignment_epoch, state.target, state.topics) == \
            (live.group_epoch, live.assignment_epoch, live.target, live.topics)
        strip = {m: (x.member_epoch, x.previous_member_epoch, x.state, x.assigned, x.revoking,
                     x.subscribed_topic_names, x.subscribed_topic_regex, x.instance_id)
                 for m, x in live.members.items()}
        assert {m: (x.member_epoch, x.previous_member_epoch, x.state, x.assigned, x.revoking,
                    x.subscribed_topic_names, x.subscribed_topic_regex, x.instance_id)
                for m, x in state.members.items()} == strip


ConsumerGroupMachine.TestCase.settings = settings(max_examples=120, stateful_step_count=40, deadline=None)
test_no_partition_is_ever_owned_by_two_members = ConsumerGroupMachine.TestCase

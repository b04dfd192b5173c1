"""The server-side assignors of KIP-848 groups, against a simple oracle: every subscribed
partition goes to exactly one of its subscribers; `uniform` keeps equal subscriptions within one
partition of each other and, when a member leaves a balanced group, moves only its partitions;
`range` gives each subscriber of a topic one contiguous range, the first ones one longer."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from logstore.server.consumer_group_assignors import range_assignor, uniform

TOPICS = [uuid.UUID(int=i + 1) for i in range(4)]
MEMBERS = [f"m{i}" for i in range(6)]

sizes = st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 12), min_size=1)
subscriptions = st.dictionaries(st.sampled_from(MEMBERS), st.frozensets(st.sampled_from(TOPICS)), min_size=1)


def owners(assignment: dict) -> dict:
    found: dict = {}
    for member, topics in assignment.items():
        for topic, partitions in topics.items():
            for p in partitions:
                assert (topic, p) not in found, f"{(topic, p)} given twice"
                found[topic, p] = member
    return found


def assert_complete(members: dict, topics: dict, assignment: dict) -> None:
    given_to = owners(assignment)
    wanted = {(t, p) for t, n in topics.items() for p in range(n) if any(t in s for s in members.values())}
    assert set(given_to) == wanted
    assert all(tp[0] in members[m] for tp, m in given_to.items())


@given(members=subscriptions, topics=sizes, previous_seed=st.randoms(use_true_random=False))
def test_uniform_gives_every_partition_once_to_a_subscriber_and_keeps_equals_even(members, topics, previous_seed):
    first = uniform(members, topics, {})
    assert_complete(members, topics, first)
    shuffled = {m: first[previous_seed.choice(sorted(members))] for m in members}  # a stale, overlapping past
    again = uniform(members, topics, shuffled)
    assert_complete(members, topics, again)
    for assignment in (first, again):
        same = {}
        for m, s in members.items():
            same.setdefault(s, []).append(sum(len(ps) for ps in assignment[m].values()))
        for subscription, counts in same.items():
            if len(subscription) == 1 or all(s == subscription for s in members.values()):
                assert max(counts) - min(counts) <= 1, (subscription, counts)


@given(count=st.integers(2, 6), partitions=st.integers(0, 30), leaver=st.integers(0, 5))
def test_uniform_moves_only_the_leavers_partitions(count, partitions, leaver):
    topic = TOPICS[0]
    members = {m: frozenset([topic]) for m in MEMBERS[:count]}
    before = uniform(members, {topic: partitions}, {})
    gone = MEMBERS[leaver % count]
    stayers = {m: s for m, s in members.items() if m != gone}
    after = uniform(stayers, {topic: partitions}, before)
    assert_complete(stayers, {topic: partitions}, after)
    for m in stayers:
        assert before[m].get(topic, frozenset()) <= after[m].get(topic, frozenset())


@given(members=subscriptions, topics=sizes)
def test_range_gives_each_subscriber_one_contiguous_range(members, topics):
    assignment = range_assignor(members, topics, {})
    assert_complete(members, topics, assignment)
    for topic, n in topics.items():
        subscribers = sorted(m for m, s in members.items() if topic in s)
        ranges = [sorted(assignment[m].get(topic, ())) for m in subscribers]
        assert [p for r in ranges for p in r] == list(range(n)) if subscribers else True
        lengths = [len(r) for r in ranges]
        assert lengths == sorted(lengths, reverse=True) and (not lengths or lengths[0] - lengths[-1] <= 1)

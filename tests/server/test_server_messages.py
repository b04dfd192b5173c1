"""The generated messages (logstore.server.messages): built from Kafka's JSON definitions at
import, they encode and decode by version."""

from __future__ import annotations

import json
import re
from importlib import resources

from hypothesis import given
from hypothesis import strategies as st

from logstore.server.messages import RESOURCES
from logstore.server.messages.consumer_group_apis import (
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)
optional_names = st.none() | names
partition_lists = st.lists(st.integers(0, 2**31 - 1), max_size=5)


def test_every_definition_keeps_kafkas_license_header_and_is_declared():
    files = [f for f in resources.files(RESOURCES).iterdir() if f.name.endswith(".json")]
    declared = {
        "ConsumerGroupHeartbeatRequest", "ConsumerGroupHeartbeatResponse", "ConsumerGroupDescribeRequest",
        "ConsumerGroupDescribeResponse"}
    assert {f.name.removesuffix(".json") for f in files} == declared
    for f in files:
        text = f.read_text()
        assert text.startswith("// Licensed to the Apache Software Foundation (ASF)"), f.name
        assert json.loads(re.sub(r"(?m)^\s*//.*$", "", text))["name"] == f.name.removesuffix(".json")


@given(version=st.sampled_from([0, 1]), group=names, member=names, epoch=st.integers(-2, 2**31 - 1),
       topics=st.none() | st.lists(names, max_size=4), regex=optional_names,
       owned=st.none() | st.lists(st.tuples(st.uuids(), partition_lists), max_size=3))
def test_a_heartbeat_request_decodes_to_what_was_encoded_at_each_version(version, group, member, epoch, topics,
                                                                        regex, owned):
    cls = ConsumerGroupHeartbeatRequest
    owned_field = None if owned is None else [cls.TopicPartitions(topic_id=t, partitions=p) for t, p in owned]
    sent = cls(version=version, group_id=group, member_id=member, member_epoch=epoch, rebalance_timeout_ms=30_000,
               subscribed_topic_names=topics, subscribed_topic_regex=regex if version >= 1 else None,
               server_assignor="uniform", topic_partitions=owned_field)
    got = cls.decode(sent.encode(), version=version)
    assert (got.group_id, got.member_id, got.member_epoch, got.subscribed_topic_names) == (group, member, epoch, topics)
    assert got.subscribed_topic_regex == (regex if version >= 1 else None)
    assert got.topic_partitions == owned_field


def test_the_apis_have_kafkas_keys_and_versions():
    assert (ConsumerGroupHeartbeatRequest.API_KEY, ConsumerGroupHeartbeatRequest.max_version) == (68, 1)
    assert (ConsumerGroupDescribeResponse.API_KEY, ConsumerGroupDescribeResponse.max_version) == (69, 1)
    assert ConsumerGroupHeartbeatResponse.flexible_version_q(0)

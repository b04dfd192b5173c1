"""The generated messages (logstore.server.messages): built from Kafka's JSON definitions at
import, they encode and decode by version. And the internal topics' records as Kafka's own
definitions encode them (tests.support.kafka_definitions) are what logstore.internal_topics,
their one home in the product, reads back field for field."""

from __future__ import annotations

import json
import re
from importlib import resources

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logstore.internal_topics.records import decode_offsets_record
from logstore.server.messages import RESOURCES, controller_apis
from logstore.server.messages.consumer_group_apis import (
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from tests.support import kafka_definitions
from tests.support.kafka_definitions import (
    METADATA_RECORDS,
    RECORD_TYPES,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
)

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)
optional_names = st.none() | names
partition_lists = st.lists(st.integers(0, 2**31 - 1), max_size=5)


def test_every_definition_keeps_kafkas_license_header_and_is_declared():
    files = [f for package in (RESOURCES, kafka_definitions.RESOURCES)
             for f in resources.files(package).iterdir() if f.name.endswith(".json")]
    declared = {cls.__name__ for pair in RECORD_TYPES.values() for cls in pair} | {
        "ConsumerGroupHeartbeatRequest", "ConsumerGroupHeartbeatResponse", "ConsumerGroupDescribeRequest",
        "ConsumerGroupDescribeResponse"} | set(controller_apis.__all__) | {
        cls.__name__ for cls in METADATA_RECORDS.values()}
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


@given(group=names, member=names, instance=optional_names, rack=optional_names, client=names, host=names,
       topics=st.lists(names, max_size=4), regex=optional_names, timeout=st.integers(-1, 2**31 - 1),
       assignor=st.none() | st.sampled_from(["uniform", "range"]))
def test_a_member_record_is_what_the_dump_decoder_reads(group, member, instance, rack, client, host, topics, regex,
                                                       timeout, assignor):
    key = ConsumerGroupMemberMetadataKey(group_id=group, member_id=member)
    value = ConsumerGroupMemberMetadataValue(instance_id=instance, rack_id=rack, client_id=client, client_host=host,
                                             subscribed_topic_names=topics, subscribed_topic_regex=regex,
                                             rebalance_timeout_ms=timeout, server_assignor=assignor)
    decoded = decode_offsets_record(key.to_bytes(), value.to_bytes())
    assert (decoded.name, decoded.key) == ("ConsumerGroupMemberMetadata", {"groupId": group, "memberId": member})
    assert decoded.value == {"instanceId": instance, "rackId": rack, "clientId": client, "clientHost": host,
                             "subscribedTopicNames": topics, "subscribedTopicRegex": regex,
                             "rebalanceTimeoutMs": timeout, "serverAssignor": assignor,
                             "classicMemberMetadata": None}
    assert ConsumerGroupMemberMetadataValue.from_bytes(value.to_bytes()) == value
    assert ConsumerGroupMemberMetadataKey.from_bytes(key.to_bytes()) == key


@given(epoch=st.integers(0, 2**31 - 1), state=st.integers(0, 3),
       assigned=st.lists(st.tuples(st.uuids(), partition_lists), max_size=3),
       revoking=st.lists(st.tuples(st.uuids(), partition_lists), max_size=3))
def test_a_current_assignment_record_is_what_the_dump_decoder_reads(epoch, state, assigned, revoking):
    cls = ConsumerGroupCurrentMemberAssignmentValue
    value = cls(member_epoch=epoch, previous_member_epoch=epoch - 1, state=state,
                assigned_partitions=[cls.TopicPartitions(topic_id=t, partitions=p) for t, p in assigned],
                partitions_pending_revocation=[cls.TopicPartitions(topic_id=t, partitions=p) for t, p in revoking])
    key = ConsumerGroupCurrentMemberAssignmentKey(group_id="g", member_id="m")
    decoded = decode_offsets_record(key.to_bytes(), value.to_bytes())
    assert decoded.value == {
        "memberEpoch": epoch, "previousMemberEpoch": epoch - 1, "state": state,
        "assignedPartitions": [{"topicId": t, "partitions": p, "assignmentEpochs": None} for t, p in assigned],
        "partitionsPendingRevocation": [{"topicId": t, "partitions": p, "assignmentEpochs": None}
                                        for t, p in revoking]}


def test_a_record_of_another_type_is_refused():
    key = ConsumerGroupMemberMetadataKey(group_id="g", member_id="m").to_bytes()
    with pytest.raises(ValueError, match="type 8, the record 5"):
        ConsumerGroupCurrentMemberAssignmentKey.from_bytes(key)

"""Internal-topic records (logstore.internal_topics): round trips for every record type and
version from the tables, records built by hand from the schema text, Kafka 4.0 dump
rendering, and corrupt input."""

from __future__ import annotations

import base64
import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logstore.errors import CorruptRecordError, InvalidRecordError
from logstore.internal_topics import (
    UnknownRecordTypeError,
    build_snapshot,
    decode_control_record,
    decode_metadata_record,
    decode_offsets_record,
    decode_transaction_log_record,
    encode_control_record,
    encode_metadata_record,
    encode_offsets_record,
    encode_transaction_log_record,
    format_control_for_dump,
    format_metadata_for_dump,
    format_offsets_for_dump,
    format_transaction_log_for_dump,
    read_snapshot,
    record_json,
)
from logstore.internal_topics.coordinator_schemas import (
    OFFSETS_RECORD_TYPES,
    TRANSACTION_RECORD_TYPES,
)
from logstore.internal_topics.metadata_schemas import (
    CONSUMER_PROTOCOL_ASSIGNMENT,
    CONSUMER_PROTOCOL_SUBSCRIPTION,
    CONTROL_TYPES,
    METADATA_TYPES,
)
from logstore.internal_topics.schema import (
    UNKNOWN_TAGS,
    Message,
    Reader,
    Struct,
    dump_json,
    java_double,
    kafka_uuid,
    read_message,
    write_message,
)
from logstore.log_files import kraft_snapshot_file_name, parse_kraft_snapshot_name
from logstore.records import Record, build_batch, iter_batches

# -- strategies generated from the tables ----------------------------------------------------

_INT_RANGES = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)


def _primitive(kind: str) -> st.SearchStrategy:
    if kind in _INT_RANGES:
        bits = _INT_RANGES[kind]
        return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    return {
        "uint16": st.integers(0, 0xFFFF),
        "float64": st.floats(allow_nan=False),
        "bool": st.booleans(),
        "string": _TEXT,
        "bytes": st.binary(max_size=12),
        "uuid": st.uuids(),
    }[kind]


def _struct(schema: Struct, version: int) -> st.SearchStrategy[dict]:
    fields = {}
    for f in schema.fields:
        if not f.versions[0] <= version <= f.versions[1]:
            continue
        if isinstance(f.type, list):
            element = f.type[0]
            inner = _struct(element, version) if isinstance(element, Struct) else _primitive(element)
            value = st.lists(inner, max_size=3)
        elif isinstance(f.type, Struct):
            value = _struct(f.type, version)
        else:
            value = _primitive(f.type)
        if f.nullable[0] <= version <= f.nullable[1]:
            value = st.none() | value
        fields[f.json_name] = value
    return st.fixed_dictionaries(fields)


def values_of(msg: Message, version: int) -> st.SearchStrategy[dict]:
    """Any field values of ``msg`` at ``version``, every field set (tagged ones too)."""
    return _struct(msg.body, version)


def _versions(msg: Message) -> range:
    return range(msg.valid[0], msg.valid[1] + 1)


_COORDINATOR_CASES = [
    pytest.param(types, entry, version, id=f"{entry.name}-v{version}")
    for types in (OFFSETS_RECORD_TYPES, TRANSACTION_RECORD_TYPES)
    for entry in types.values()
    for version in _versions(entry.value)
]
_METADATA_CASES = [pytest.param(entry, version, id=f"{entry.message.name}-v{version}")
                   for entry in METADATA_TYPES.values() for version in _versions(entry.message)]
_SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _encode_coordinator(types, record_type, key, version, value):
    if types is OFFSETS_RECORD_TYPES:
        return encode_offsets_record(record_type, key, version, value)
    return encode_transaction_log_record(key, version, value)


def _decode_coordinator(types, key, value):
    decode = decode_offsets_record if types is OFFSETS_RECORD_TYPES else decode_transaction_log_record
    return decode(key, value)


# -- round trips for every record type and version ------------------------------------------


@pytest.mark.parametrize(("types", "entry", "version"), _COORDINATOR_CASES)
@_SETTINGS
@given(data=st.data())
def test_coordinator_record_round_trips_every_type_and_version(types, entry, version, data):
    key = data.draw(values_of(entry.key, 0))
    value = data.draw(values_of(entry.value, version))
    key_bytes, value_bytes = _encode_coordinator(types, entry.id, key, version, value)
    assert struct.unpack_from(">h", key_bytes)[0] == entry.id
    assert struct.unpack_from(">h", value_bytes)[0] == version
    record = _decode_coordinator(types, key_bytes, value_bytes)
    assert (record.record_type, record.name, record.version) == (entry.id, entry.name, version)
    assert record.key == key
    assert record.value == value
    assert _encode_coordinator(types, entry.id, record.key, version, record.value) == (key_bytes, value_bytes)


@pytest.mark.parametrize(("types", "entry"), [
    pytest.param(types, entry, id=entry.name)
    for types in (OFFSETS_RECORD_TYPES, TRANSACTION_RECORD_TYPES) for entry in types.values()])
def test_coordinator_tombstone_round_trips_with_a_null_value(types, entry):
    key = {f.json_name: f.default_value(0) for f in entry.key.body.fields}
    key_bytes, value_bytes = _encode_coordinator(types, entry.name if types is OFFSETS_RECORD_TYPES else 0,
                                                 key, None, None)
    assert value_bytes is None
    record = _decode_coordinator(types, key_bytes, None)
    assert record.is_tombstone and record.key == key and record.version is None


@pytest.mark.parametrize(("entry", "version"), _METADATA_CASES)
@_SETTINGS
@given(data=st.data())
def test_metadata_record_round_trips_every_type_and_version(entry, version, data):
    value = data.draw(values_of(entry.message, version))
    frame = encode_metadata_record(entry.id, version, value)
    record = decode_metadata_record(frame)
    assert (record.record_type, record.name, record.version) == (entry.id, entry.message.name, version)
    assert record.key is None
    assert record.value == value
    assert encode_metadata_record(entry.message.name, version, record.value) == frame


@pytest.mark.parametrize("entry", [pytest.param(e, id=e.message.name) for e in CONTROL_TYPES.values()])
@_SETTINGS
@given(data=st.data())
def test_kraft_control_record_round_trips(entry, data):
    value = data.draw(values_of(entry.message, 0))
    key, raw = encode_control_record(entry.enum_name, value)
    assert key == struct.pack(">hh", 0, entry.id)
    record = decode_control_record(key, raw)
    assert (record.record_type, record.name, record.value) == (entry.id, entry.message.name, value)


@pytest.mark.parametrize("msg", [CONSUMER_PROTOCOL_SUBSCRIPTION, CONSUMER_PROTOCOL_ASSIGNMENT],
                         ids=lambda m: m.name)
@_SETTINGS
@given(data=st.data())
def test_consumer_protocol_round_trips_every_version(msg, data):
    version = data.draw(st.integers(msg.valid[0], msg.valid[1]))
    value = data.draw(values_of(msg, version))
    raw = write_message(msg, version, value)
    assert read_message(msg, version, Reader(raw, msg.name)) == value


def test_every_kafka_4_0_record_type_is_in_the_tables():
    assert set(OFFSETS_RECORD_TYPES) == set(range(17))
    assert set(TRANSACTION_RECORD_TYPES) == {0}
    assert set(METADATA_TYPES) == {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15, 17, 18, 20, 21,
                                   22, 23, 24, 25, 26, 27, 28}
    assert {e.enum_name for e in CONTROL_TYPES.values()} == {
        "LEADER_CHANGE", "SNAPSHOT_HEADER", "SNAPSHOT_FOOTER", "KRAFT_VERSION", "KRAFT_VOTERS"}


def test_unknown_tagged_fields_are_kept_and_written_back():
    # FeatureLevelRecord v0 with an unknown tag 7 carrying two bytes.
    frame = bytes.fromhex("010c00") + b"\x04abc" + b"\x00\x05" + b"\x01\x07\x02\xbe\xef"
    record = decode_metadata_record(frame)
    assert record.value[UNKNOWN_TAGS] == {7: b"\xbe\xef"}
    assert encode_metadata_record("FeatureLevelRecord", 0, record.value) == frame


# -- records built by hand from the schema text ---------------------------------------------


def _str16(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def _compact(raw: bytes) -> bytes:
    assert len(raw) < 127
    return bytes([len(raw) + 1]) + raw


def test_offset_commit_key_and_value_v1_built_by_hand():
    key = struct.pack(">h", 1) + _str16("group-1") + _str16("orders") + struct.pack(">i", 7)
    value = struct.pack(">hq", 1, 1234) + _str16("meta") + struct.pack(">qq", 1700000000000, 1700000600000)
    record = decode_offsets_record(key, value)
    assert record.name == "OffsetCommit"
    assert record.key == {"group": "group-1", "topic": "orders", "partition": 7}
    assert record.value == {"offset": 1234, "metadata": "meta", "commitTimestamp": 1700000000000,
                            "expireTimestamp": 1700000600000}


def test_offset_commit_value_v3_built_by_hand():
    # offset int64, leaderEpoch int32 (v3+), metadata string, commitTimestamp int64
    value = struct.pack(">hqi", 3, 42, 5) + _str16("") + struct.pack(">q", 1700000000000)
    key = struct.pack(">h", 1) + _str16("g") + _str16("t") + struct.pack(">i", 0)
    record = decode_offsets_record(key, value)
    assert (record.version, record.value) == (3, {"offset": 42, "leaderEpoch": 5, "metadata": "",
                                                  "commitTimestamp": 1700000000000})
    assert encode_offsets_record(1, record.key, 3, record.value) == (key, value)


def test_offset_commit_value_v4_is_flexible():
    # v4: compact string (length + 1) and an empty tagged-field section at the end
    value = struct.pack(">hqi", 4, 42, -1) + _compact(b"m") + struct.pack(">q", 99) + b"\x00"
    key = struct.pack(">h", 1) + _str16("g") + _str16("t") + struct.pack(">i", 3)
    record = decode_offsets_record(key, value)
    assert record.value == {"offset": 42, "leaderEpoch": -1, "metadata": "m", "commitTimestamp": 99}
    assert format_offsets_for_dump(key, value, 10) == (
        '{"type":"1","data":{"group":"g","topic":"t","partition":3}}',
        '{"version":"4","data":{"offset":42,"leaderEpoch":-1,"metadata":"m","commitTimestamp":99}}')


def test_legacy_offset_commit_key_version_0_decodes_with_the_same_value():
    key = struct.pack(">h", 0) + _str16("g") + _str16("t") + struct.pack(">i", 1)
    value = struct.pack(">hq", 0, 5) + _str16("") + struct.pack(">q", 7)
    record = decode_offsets_record(key, value)
    assert (record.record_type, record.name) == (0, "LegacyOffsetCommit")
    assert record.value == {"offset": 5, "metadata": "", "commitTimestamp": 7}


def _subscription_v1(topics, owned) -> bytes:
    out = struct.pack(">hi", 1, len(topics)) + b"".join(_str16(t) for t in topics)
    out += struct.pack(">i", -1)  # UserData null
    out += struct.pack(">i", len(owned))
    for topic, partitions in owned:
        out += _str16(topic) + struct.pack(f">i{len(partitions)}i", len(partitions), *partitions)
    return out


def _group_metadata_v3(subscription: bytes, assignment: bytes) -> bytes:
    member = (_str16("member-1") + struct.pack(">h", -1) + _str16("client") + _str16("/10.0.0.1")
              + struct.pack(">ii", 300000, 45000)
              + struct.pack(">i", len(subscription)) + subscription
              + struct.pack(">i", len(assignment)) + assignment)
    return (struct.pack(">h", 3) + _str16("consumer") + struct.pack(">i", 2) + _str16("range")
            + _str16("member-1") + struct.pack(">q", 1700000000000) + struct.pack(">i", 1) + member)


def test_group_metadata_value_v3_built_by_hand_renders_its_consumer_protocol_as_kafka_does():
    subscription = _subscription_v1(["orders"], [("orders", [0, 1])])
    assignment = struct.pack(">hi", 0, 1) + _str16("orders") + struct.pack(">iii", 1, 0, -1)
    key = struct.pack(">h", 2) + _str16("group-1")
    value = _group_metadata_v3(subscription, assignment)
    record = decode_offsets_record(key, value)
    member = record.value["members"][0]
    assert member["groupInstanceId"] is None
    assert (member["subscription"], member["assignment"]) == (subscription, assignment)
    key_text, payload = format_offsets_for_dump(key, value, 0)
    assert key_text == '{"type":"2","data":{"group":"group-1"}}'
    assert payload == (
        '{"version":"3","data":{"protocolType":"consumer","generation":2,"protocol":"range",'
        '"leader":"member-1","currentStateTimestamp":1700000000000,"members":[{"memberId":"member-1",'
        '"groupInstanceId":null,"clientId":"client","clientHost":"/10.0.0.1","rebalanceTimeout":300000,'
        '"sessionTimeout":45000,"subscription":{"topics":["orders"],"userData":null,'
        '"ownedPartitions":[{"topic":"orders","partitions":[0,1]}]},'
        '"assignment":{"assignedPartitions":[{"topic":"orders","partitions":[0]}],"userData":null}}]}}')


def test_group_metadata_renders_a_newer_subscription_version_as_the_newest_known():
    subscription = struct.pack(">h", 9) + _subscription_v1(["t"], [])[2:] + struct.pack(">i", 4) + _str16("r")
    key = struct.pack(">h", 2) + _str16("g")
    _, payload = format_offsets_for_dump(key, _group_metadata_v3(subscription, b""), 0)
    assert ('"subscription":{"topics":["t"],"userData":null,"ownedPartitions":[],"generationId":4,'
            '"rackId":"r"}') in payload


def test_group_metadata_keeps_protocol_bytes_that_do_not_decode_as_base64():
    key = struct.pack(">h", 2) + _str16("g")
    value = _group_metadata_v3(b"\x00", b"")
    _, payload = format_offsets_for_dump(key, value, 0)
    assert '"subscription":"AA==","assignment":""' in payload


def test_consumer_group_member_metadata_with_a_tagged_nullable_struct_built_by_hand():
    classic = (struct.pack(">b", 1) + struct.pack(">i", 45000)  # null marker, SessionTimeoutMs
               + b"\x02" + _compact(b"range") + _compact(b"\x00\x01") + b"\x00"  # one protocol
               + b"\x00")  # the struct's own tagged fields
    value = (struct.pack(">h", 0) + b"\x00" + _compact(b"rack-a") + _compact(b"client") + _compact(b"/h")
             + b"\x02" + _compact(b"orders") + b"\x00" + struct.pack(">i", 300000) + _compact(b"uniform")
             + b"\x01" + b"\x00" + bytes([len(classic)]) + classic)
    key = struct.pack(">h", 5) + _str16("g") + _str16("m")
    record = decode_offsets_record(key, value)
    assert record.value == {
        "instanceId": None, "rackId": "rack-a", "clientId": "client", "clientHost": "/h",
        "subscribedTopicNames": ["orders"], "subscribedTopicRegex": None, "rebalanceTimeoutMs": 300000,
        "serverAssignor": "uniform",
        "classicMemberMetadata": {"sessionTimeoutMs": 45000,
                                  "supportedProtocols": [{"name": "range", "metadata": b"\x00\x01"}]}}
    assert encode_offsets_record(5, record.key, 0, record.value) == (key, value)


# Captured from a Kafka 4.0.0 broker at transaction.version 1 (an Ongoing transaction).
_TXN_VALUE_V1_FROM_KAFKA_4_0 = bytes.fromhex(
    "0001" "0000000000000000" "0000" "0000ea60" "01" "02" "077478746573" "74" "02" "00000000" "00"
    "0000019e7b4b367a" "0000019e7b4b367a" "00")


def test_transaction_log_value_v1_from_a_kafka_4_0_broker():
    key = struct.pack(">h", 0) + _str16("my-txn-id")
    record = decode_transaction_log_record(key, _TXN_VALUE_V1_FROM_KAFKA_4_0)
    assert record.key == {"transactionalId": "my-txn-id"}
    assert record.value["transactionPartitions"] == [{"topic": "txtest", "partitionIds": [0]}]
    assert (record.value["previousProducerId"], record.value["clientTransactionVersion"]) == (-1, 0)
    assert encode_transaction_log_record(record.key, 1, record.value) == (key, _TXN_VALUE_V1_FROM_KAFKA_4_0)
    assert format_transaction_log_for_dump(key, _TXN_VALUE_V1_FROM_KAFKA_4_0, 3) == (
        "transaction_metadata::transactionalId=my-txn-id",
        "producerId:0,producerEpoch:0,state=Ongoing,partitions=[txtest-0],"
        "txnLastUpdateTimestamp=1780184987258,txnTimeoutMs=60000")


def test_transaction_log_value_v1_tagged_producer_ids_and_v0_built_by_hand():
    v1 = (struct.pack(">hq", 1, 9) + struct.pack(">hib", 2, 1000, 4) + b"\x01" + struct.pack(">qq", 5, 6)
          + b"\x02" + b"\x00\x08" + struct.pack(">q", 8) + b"\x02\x02" + struct.pack(">h", 2))
    key = struct.pack(">h", 0) + _str16("t")
    value = decode_transaction_log_record(key, v1).value
    assert (value["previousProducerId"], value["nextProducerId"], value["clientTransactionVersion"]) == (8, -1, 2)
    assert value["transactionPartitions"] == []
    v0 = (struct.pack(">hqhib", 0, 9, 2, 1000, 0) + struct.pack(">i", -1) + struct.pack(">qq", 5, 6))
    record = decode_transaction_log_record(key, v0)
    assert record.value["transactionPartitions"] is None
    assert format_transaction_log_for_dump(key, v0, 0)[1] == (
        "producerId:9,producerEpoch:2,state=Empty,partitions=[],txnLastUpdateTimestamp=5,txnTimeoutMs=1000")
    assert format_transaction_log_for_dump(key, None, 0)[1] == "<DELETE>"
    assert format_transaction_log_for_dump(struct.pack(">h", 4), None, 0) == ("unknown::version=4", None)


def test_partition_change_record_with_tagged_fields_built_by_hand():
    topic_id = uuid.UUID("6f2a4e8b-1f7c-4d2e-9a3b-0c1d2e3f4a5b")
    # frame 1, type 5, version 0; PartitionId; TopicId; tagged: Isr (tag 0) and Leader (tag 1)
    isr = b"\x03" + struct.pack(">ii", 1, 2)
    frame = (b"\x01\x05\x00" + struct.pack(">i", 4) + topic_id.bytes
             + b"\x02" + b"\x00" + bytes([len(isr)]) + isr + b"\x01\x04" + struct.pack(">i", 2))
    record = decode_metadata_record(frame)
    assert record.value == {"partitionId": 4, "topicId": topic_id, "isr": [1, 2], "leader": 2,
                            "replicas": None, "removingReplicas": None, "addingReplicas": None,
                            "leaderRecoveryState": -1}
    assert encode_metadata_record(5, 0, {"partitionId": 4, "topicId": topic_id, "isr": [1, 2],
                                         "leader": 2}) == frame
    assert format_metadata_for_dump(frame, 0) == (
        '{"type":"PARTITION_CHANGE_RECORD","version":0,"data":{"partitionId":4,'
        f'"topicId":"{kafka_uuid(topic_id)}","isr":[1,2],"leader":2}}}}')


def test_feature_level_record_renders_as_kafka_4_0_dump_prints_it():
    frame = b"\x01\x0c\x00" + _compact(b"group.version") + struct.pack(">h", 1) + b"\x00"
    assert format_metadata_for_dump(frame, 0) == (
        '{"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":"group.version","featureLevel":1}}')


def test_snapshot_header_and_leader_change_control_records_built_by_hand():
    key = struct.pack(">hh", 0, 3)
    value = struct.pack(">hq", 0, 1700000000000) + b"\x00"
    assert format_control_for_dump(key, value) == (
        'SnapshotHeader {"version":0,"lastContainedLogTimestamp":1700000000000}')
    leader_change = struct.pack(">hi", 0, 1) + b"\x02" + struct.pack(">i", 1) + b"\x00" + b"\x01" + b"\x00"
    record = decode_control_record(struct.pack(">hh", 0, 2), leader_change)
    assert record.value == {"version": 0, "leaderId": 1, "voters": [{"voterId": 1}], "grantingVoters": []}
    assert format_control_for_dump(struct.pack(">hh", 0, 2), leader_change) == "controlType: LEADER_CHANGE(2)"


# -- kafka-python cross-check ----------------------------------------------------------------


def test_consumer_protocol_matches_kafka_python():
    from kafka.protocol.consumer import metadata
    subscription = metadata.ConsumerProtocolSubscription(
        topics=["a", "b"], user_data=b"x", owned_partitions=[("a", [0, 1])], generation_id=5, rack_id="r1")
    for version in range(4):
        raw = subscription.encode(version=version)
        assert struct.unpack_from(">h", raw)[0] == version
        ours = read_message(CONSUMER_PROTOCOL_SUBSCRIPTION, version, Reader(raw, "sub", 2))
        assert ours["topics"] == ["a", "b"] and ours["userData"] == b"x"
        assert struct.pack(">h", version) + write_message(CONSUMER_PROTOCOL_SUBSCRIPTION, version, ours) == raw
    assignment = metadata.ConsumerProtocolAssignment(assigned_partitions=[("a", [2])], user_data=None)
    raw = assignment.encode(version=0)
    ours = read_message(CONSUMER_PROTOCOL_ASSIGNMENT, 0, Reader(raw, "asg", 2))
    assert ours == {"assignedPartitions": [{"topic": "a", "partitions": [2]}], "userData": None}


# -- dump rendering details ------------------------------------------------------------------


def test_dump_renders_tombstones_unknown_types_and_errors_as_kafka_does():
    key = struct.pack(">h", 1) + _str16("g") + _str16("t") + struct.pack(">i", 0)
    assert format_offsets_for_dump(key, None, 0)[1] == "<DELETE>"
    assert format_offsets_for_dump(struct.pack(">h", 99) + b"zz", b"", 12) == (
        "Unknown record type 99 at offset 12, skipping.", None)
    text, payload = format_offsets_for_dump(key[:-1], None, 5)
    assert text.startswith("Error at offset 5, skipping. ") and payload is None
    with pytest.raises(CorruptRecordError, match="missing key"):
        format_offsets_for_dump(None, b"", 0)
    assert format_metadata_for_dump(b"\x01\x63\x00", 4).startswith("Error at 4, skipping. ")


def test_uuids_doubles_and_strings_render_as_java_and_jackson_do():
    assert kafka_uuid(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert [java_double(x) for x in (1e7, 9999999.0, 0.001, 1e-4, 1.5, 0.0, -2.5e-10, 123456.789)] == [
        "1.0E7", "9999999.0", "0.001", "1.0E-4", "1.5", "0.0", "-2.5E-10", "123456.789"]
    assert dump_json({"s": 'a"b\\c\n\x01é'}) == '{"s":"a\\"b\\\\c\\n\\u0001é"}'


def test_record_json_gives_structured_output():
    key, value = encode_offsets_record("OffsetCommit", {"group": "g", "topic": "t", "partition": 0}, 4,
                                       {"offset": 1, "metadata": "", "commitTimestamp": 2})
    tree = record_json(decode_offsets_record(key, value))
    assert tree == {"topic": "__consumer_offsets", "type": 1, "name": "OffsetCommit",
                    "key": {"group": "g", "topic": "t", "partition": 0}, "version": 4,
                    "value": {"offset": 1, "leaderEpoch": -1, "metadata": "", "commitTimestamp": 2}}
    header = decode_control_record(*encode_control_record(3, {"version": 0, "lastContainedLogTimestamp": 5}))
    assert record_json(header)["value"] == {"version": 0, "lastContainedLogTimestamp": 5}
    user = decode_metadata_record(encode_metadata_record(11, 0, {"name": "u", "salt": b"\xff"}))
    assert record_json(user)["value"]["salt"] == base64.b64encode(b"\xff").decode()


def test_snapshot_file_names():
    assert kraft_snapshot_file_name(1234, 5) == "00000000000000001234-0000000005.checkpoint"
    assert parse_kraft_snapshot_name("00000000000000001234-0000000005.checkpoint") == (1234, 5)
    assert parse_kraft_snapshot_name("bootstrap.checkpoint") is None


_TOPIC_ID = uuid.UUID("0f0e0d0c-0b0a-0908-0706-050403020100")
_SNAPSHOT_RECORDS = [("FeatureLevelRecord", 0, {"name": "metadata.version", "featureLevel": 25}),
                     ("TopicRecord", 0, {"name": "orders", "topicId": _TOPIC_ID}),
                     ("PartitionRecord", 2, {"partitionId": 0, "topicId": _TOPIC_ID, "replicas": [1],
                                             "isr": [1], "leader": 1, "leaderEpoch": 0,
                                             "partitionEpoch": 0, "directories": [uuid.UUID(int=1)]})]


def test_snapshot_round_trips_with_header_and_footer_control_batches():
    data = build_snapshot(_SNAPSHOT_RECORDS, epoch=3, last_contained_log_timestamp=10, timestamp=20)
    batches = list(iter_batches(data))
    assert [b.is_control for b in batches] == [True, False, True]
    assert {b.partition_leader_epoch for b in batches} == {3}
    entries = read_snapshot(data)
    assert [offset for offset, _ in entries] == [0, 1, 2, 3, 4]
    assert [r.name for _, r in entries] == ["SnapshotHeaderRecord", "FeatureLevelRecord", "TopicRecord",
                                           "PartitionRecord", "SnapshotFooterRecord"]
    assert entries[3][1].value["directories"] == [uuid.UUID(int=1)]
    assert entries[0][1].value == {"version": 0, "lastContainedLogTimestamp": 10}


def test_snapshot_without_header_or_footer_or_torn_is_corrupt():
    data = build_snapshot(_SNAPSHOT_RECORDS, epoch=0, last_contained_log_timestamp=0, timestamp=0)
    first_batch_size = next(iter_batches(data)).size_in_bytes
    with pytest.raises(CorruptRecordError, match="start with a SnapshotHeaderRecord"):
        read_snapshot(data[first_batch_size:])
    with pytest.raises(CorruptRecordError, match="partial batch"):
        read_snapshot(data[:-1])
    bad = build_batch([Record(0, 0, None, b"\x01\x02\x00")])  # a TopicRecord cut short
    with pytest.raises(CorruptRecordError, match="offset 0: TopicRecord"):
        read_snapshot(data[:first_batch_size] + bad)


# -- corrupt and invalid input ---------------------------------------------------------------

_OFFSET_KEY = struct.pack(">h", 1) + _str16("group") + _str16("topic") + struct.pack(">i", 0)
_OFFSET_VALUE = encode_offsets_record(1, {"group": "g", "topic": "t", "partition": 0}, 4,
                                      {"offset": 1, "metadata": "abc", "commitTimestamp": 2})[1]


@pytest.mark.parametrize("cut", range(len(_OFFSET_KEY)))
def test_truncated_offsets_keys_raise_corrupt_record_error_with_a_position(cut):
    with pytest.raises(CorruptRecordError) as info:
        decode_offsets_record(_OFFSET_KEY[:cut], None)
    assert info.value.position is not None and 0 <= info.value.position <= cut


@pytest.mark.parametrize("cut", range(len(_OFFSET_VALUE)))
def test_truncated_offsets_values_raise_corrupt_record_error_with_a_position(cut):
    with pytest.raises(CorruptRecordError) as info:
        decode_offsets_record(_OFFSET_KEY, _OFFSET_VALUE[:cut])
    assert info.value.position is not None and 0 <= info.value.position <= cut


def test_huge_lengths_are_refused_before_allocating():
    huge_array = b"\x01\x03\x00" + struct.pack(">i", 0) + uuid.uuid4().bytes + b"\xff\xff\xff\xff\x0f"
    with pytest.raises(CorruptRecordError, match="cannot fit"):
        decode_metadata_record(huge_array)
    huge_string = struct.pack(">h", 1) + struct.pack(">h", 0x7FFF)
    with pytest.raises(CorruptRecordError, match="needs 32767 bytes") as info:
        decode_offsets_record(huge_string, None)
    assert info.value.position == 4
    many_tags = b"\x01\x14\x00" + b"\xff\xff\xff\xff\x0f"
    with pytest.raises(CorruptRecordError, match="tagged fields cannot fit"):
        decode_metadata_record(many_tags)


def test_garbage_and_wrong_shapes_raise_corrupt_record_error():
    with pytest.raises(CorruptRecordError, match="bytes left after"):
        decode_offsets_record(_OFFSET_KEY + b"\x00", None)
    with pytest.raises(CorruptRecordError, match="non-nullable field group is null"):
        decode_offsets_record(struct.pack(">hh", 2, -1), None)
    with pytest.raises(CorruptRecordError, match="not valid UTF-8"):
        decode_offsets_record(struct.pack(">hh", 2, 1) + b"\xff", None)
    with pytest.raises(CorruptRecordError, match="appears twice"):
        decode_metadata_record(b"\x01\x17\x00\x02\x00\x01\x00\x00\x01\x00")
    with pytest.raises(CorruptRecordError, match="left 1 of its 2 bytes unread"):
        decode_metadata_record(b"\x01\x05\x00" + bytes(20) + b"\x01\x05\x02\x01\x00")
    with pytest.raises(CorruptRecordError, match="frame version 2"):
        decode_metadata_record(b"\x02\x02\x00")
    with pytest.raises(CorruptRecordError, match="longer than 5 bytes"):
        decode_metadata_record(b"\x01\xff\xff\xff\xff\xff\xff")


def test_unknown_record_types_and_versions_are_named():
    with pytest.raises(UnknownRecordTypeError, match="record type 99") as info:
        decode_offsets_record(struct.pack(">h", 99), None)
    assert (info.value.record_type, info.value.version) == (99, None)
    with pytest.raises(UnknownRecordTypeError, match="version 5 of OffsetCommitValue") as info:
        decode_offsets_record(_OFFSET_KEY, struct.pack(">h", 5))
    assert info.value.version == 5
    with pytest.raises(UnknownRecordTypeError, match="metadata record type 13"):
        decode_metadata_record(b"\x01\x0d\x00")
    with pytest.raises(UnknownRecordTypeError, match="version 1 of TopicRecord"):
        decode_metadata_record(b"\x01\x02\x01")
    with pytest.raises(UnknownRecordTypeError, match="control record type 0"):
        decode_control_record(struct.pack(">hh", 0, 0), b"")


def test_encoders_refuse_bad_input():
    key = {"group": "g", "topic": "t", "partition": 0}
    with pytest.raises(InvalidRecordError, match="'leaderEpoch' does not exist in this version"):
        encode_offsets_record(1, key, 1, {"offset": 1, "leaderEpoch": 3})
    with pytest.raises(InvalidRecordError, match="'nope' is not a field"):
        encode_offsets_record(1, {**key, "nope": 1}, None, None)
    with pytest.raises(InvalidRecordError, match="does not fit in int32"):
        encode_offsets_record(1, {**key, "partition": 1 << 31}, None, None)
    with pytest.raises(InvalidRecordError, match="not nullable"):
        encode_offsets_record(1, {**key, "group": None}, None, None)
    with pytest.raises(InvalidRecordError, match="no version 9"):
        encode_metadata_record("TopicRecord", 9, {})
    with pytest.raises(InvalidRecordError, match="not a metadata record type"):
        encode_metadata_record("NopeRecord", 0, {})
    with pytest.raises(InvalidRecordError, match="not a record type"):
        encode_offsets_record("Nope", key, None, None)
    with pytest.raises(InvalidRecordError, match="not flexible"):
        encode_offsets_record(1, key, 3, {"offset": 1, UNKNOWN_TAGS: {0: b""}})

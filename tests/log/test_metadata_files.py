"""`partition.metadata` and `meta.properties` (docs/FORMAT.md): one reader and writer each,
whose errors name the file and line that `verify` reports."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logstore.errors import CorruptMetadataFileError, InvalidConfigError
from logstore.kafka_uuid import kafka_uuid, parse_kafka_uuid
from logstore.meta_properties import MetaProperties, parse_meta_properties, read_meta_properties
from logstore.partition_metadata import (
    PARTITION_METADATA,
    parse_partition_metadata,
    read_partition_metadata,
    write_partition_metadata,
)
from logstore.server.meta_properties import load_or_create


@given(st.uuids())
def test_kafka_uuid_text_round_trips_in_22_characters(value):
    assert len(kafka_uuid(value)) == 22
    assert parse_kafka_uuid(kafka_uuid(value)) == value


def test_partition_metadata_round_trips_in_kafkas_two_lines(tmp_path):
    topic_id = uuid.UUID(int=1)
    write_partition_metadata(tmp_path, topic_id)
    assert (tmp_path / PARTITION_METADATA).read_text() == "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n"
    assert read_partition_metadata(tmp_path) == topic_id
    assert read_partition_metadata(tmp_path / "missing") is None


@pytest.mark.parametrize("text, detail, line", [
    ("version: 1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n", "version '1' is not 0", 1),
    ("version: 0\ntopic_id: nope\n", "topic_id 'nope' is not a base64 topic id", 2),
    ("topic_id: AAAAAAAAAAAAAAAAAAAAAQ\n", "version None is not 0", None),
])
def test_a_bad_partition_metadata_names_the_file_and_line(tmp_path, text, detail, line):
    (tmp_path / PARTITION_METADATA).write_text(text)
    with pytest.raises(CorruptMetadataFileError) as caught:
        read_partition_metadata(tmp_path)
    assert (caught.value.detail, caught.value.line) == (detail, line)
    assert str(tmp_path / PARTITION_METADATA) in str(caught.value)
    with pytest.raises(CorruptMetadataFileError):
        parse_partition_metadata(text.encode())


@pytest.mark.parametrize("text, detail", [
    ("version=2\n", "version '2' is not 0 or 1"),
    ("version=1\ncluster.id=x\n", "version 1 without node.id"),
    ("version=0\nbroker.id=zero\n", "broker.id 'zero' is not a number"),
])
def test_a_bad_meta_properties_is_refused_with_its_problem(text, detail):
    with pytest.raises(CorruptMetadataFileError) as caught:
        parse_meta_properties(text.encode(), "meta.properties")
    assert caught.value.detail == detail


def test_meta_properties_reads_both_versions():
    assert parse_meta_properties(b"#\nbroker.id=0\nversion=0\ncluster.id=abc\n") == \
        MetaProperties(0, 0, "abc", None)
    assert parse_meta_properties(b"node.id=3\nversion=1\ncluster.id=c\ndirectory.id=d\n") == \
        MetaProperties(1, 3, "c", "d")


def test_a_node_creates_then_rereads_its_identity_and_refuses_another_nodes(tmp_path):
    created = load_or_create(tmp_path, 1)
    assert read_meta_properties(tmp_path) == created
    assert load_or_create(tmp_path, 1) == created
    with pytest.raises(InvalidConfigError, match="does not match the configured node.id 2"):
        load_or_create(tmp_path, 2)
    (tmp_path / "meta.properties").write_text("version=0\nbroker.id=1\n")
    with pytest.raises(InvalidConfigError, match="not a KRaft node"):
        load_or_create(tmp_path, 1)

"""Fetch responses written in pieces are byte for byte the schema encoder's, for every
served version (topics by name to v12, by id from v13), and records larger than a page are passed through, not copied."""

from __future__ import annotations

import uuid

import pytest
from kafka.protocol.consumer import FetchResponse

from logstore.server.apis import APIS
from logstore.server.fetch_response import encode_fetch_response

FETCH = APIS[FetchResponse.API_KEY]
VERSIONS = range(FETCH.min_version, FETCH.max_version + 1)
LARGE = bytes(range(256)) * 40


def response(version: int):
    cls = FetchResponse
    part = cls.FetchableTopicResponse.PartitionData
    aborted = part.AbortedTransaction

    def partition(index: int, records, txns) -> object:
        return part(partition_index=index, error_code=index % 3, high_watermark=10**12 + index,
                    last_stable_offset=-1, log_start_offset=7, aborted_transactions=txns,
                    preferred_read_replica=-1, records=records)

    topics = [
        cls.FetchableTopicResponse(topic="t" * 200, topic_id=uuid.UUID(int=2**127 + 5), partitions=[
            partition(0, LARGE, None),
            partition(1, None, []),
            partition(2, b"", [aborted(producer_id=5, first_offset=9), aborted(producer_id=-1, first_offset=2**40)]),
            partition(3, memoryview(LARGE)[:100], None),
            partition(4, bytearray(LARGE) * 2, None),
        ]),
        cls.FetchableTopicResponse(topic="empty", topic_id=uuid.UUID(int=6), partitions=[]),
    ]
    return cls(version=version, throttle_time_ms=3, error_code=0, session_id=12345, responses=topics)


@pytest.mark.parametrize("version", VERSIONS)
def test_pieces_join_to_the_schema_encoders_bytes(version):
    expected = response(version)
    expected.with_header(correlation_id=99)
    pieces = encode_fetch_response(version, 99, response(version))
    assert b"".join(pieces) == bytes(expected.encode(header=True, framed=True))


@pytest.mark.parametrize("version", [FETCH.min_version, FETCH.max_version])
def test_an_answer_without_topics_matches_too(version):
    empty = FetchResponse(version=version, throttle_time_ms=0, error_code=0, session_id=0, responses=[])
    pieces = encode_fetch_response(version, 1, empty)
    empty.with_header(correlation_id=1)
    assert b"".join(pieces) == bytes(empty.encode(header=True, framed=True))


def test_large_records_are_sent_as_read():
    records = bytearray(LARGE)
    answer = response(FETCH.max_version)
    answer.responses[0].partitions[0].records = records
    assert any(piece is records for piece in encode_fetch_response(FETCH.max_version, 1, answer))

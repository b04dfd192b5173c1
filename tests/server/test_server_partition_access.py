"""The handlers reach partition data only through `ServerContext.partition` (PartitionAccess):
whatever partition it hands out, local or later replicated, is what Produce, Fetch,
ListOffsets, OffsetForLeaderEpoch and DeleteRecords read and write."""

from __future__ import annotations

import inspect
import time

import pytest
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from logstore.records import Record, build_batch, iter_batches
from logstore.server.partition_access import LocalPartition, PartitionAccess
from tests.support.wire import WireClient


def test_local_partition_offers_every_member_of_partition_access_with_its_signature():
    for name, declared in vars(PartitionAccess).items():
        if name.startswith("_"):
            continue
        implemented = getattr(LocalPartition, name)
        if isinstance(declared, property):
            assert isinstance(implemented, property), name
        else:
            assert inspect.signature(implemented) == inspect.signature(declared), name
            assert inspect.iscoroutinefunction(implemented) == inspect.iscoroutinefunction(declared), name


class Recording:
    """A PartitionAccess that records which data calls reach it, delegating to the real one."""

    def __init__(self, inner: PartitionAccess, calls: list[str]):
        self._inner, self._calls = inner, calls

    def __getattr__(self, name: str):
        return getattr(self._inner, name)

    async def append(self, records):
        self._calls.append("append")
        return await self._inner.append(records)

    async def read(self, offset, max_bytes, *, isolation, min_one_batch):
        self._calls.append("read")
        return await self._inner.read(offset, max_bytes, isolation=isolation, min_one_batch=min_one_batch)


@pytest.fixture
def seam_server(server):
    """conftest's broker with the one-partition topic "seam"."""
    server.context.topics.create("seam", 1)
    return server


def test_produce_and_fetch_go_through_the_partition_the_context_hands_out(seam_server, monkeypatch):
    calls: list[str] = []
    lookup = seam_server.context.partition
    monkeypatch.setattr(seam_server.context, "partition", lambda t, p: (found := lookup(t, p)) and Recording(found, calls))
    produce = ProduceRequest[7]
    batch = build_batch([Record(0, int(time.time() * 1000), b"k", b"v")])
    fetch = FetchRequest[11]
    with WireClient(seam_server.port, client_id="seam") as sock:
        produced = sock.call(produce(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
            produce.TopicProduceData(name="seam", partition_data=[
                produce.TopicProduceData.PartitionProduceData(index=0, records=batch)])]), ProduceResponse[7])
        fetched = sock.call(fetch(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                                        session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                                        topics=[fetch.FetchTopic(topic="seam", partitions=[
                                            fetch.FetchTopic.FetchPartition(
                                                partition=0, current_leader_epoch=-1, fetch_offset=0,
                                                log_start_offset=-1, partition_max_bytes=1 << 20)])]),
                            FetchResponse[11])
    assert produced.responses[0].partition_responses[0].error_code == 0
    records = fetched.responses[0].partitions[0].records
    assert [r.value for b in iter_batches(records) for r in b.records()] == [b"v"]
    assert calls == ["append", "read"]

"""A restarted node answers Metadata from its partition list, before the logs open (issue 32:
10,000 partitions took seconds to open), a partition's first Fetch opens it, and the
partition.metadata files it found missing are written in the background with the topic's id."""

from __future__ import annotations

import threading
import time

from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from logstore import LogManager, Record
from logstore.lazy_log import LazyLog
from logstore.log import Log
from logstore.partition_metadata import PARTITION_METADATA, read_partition_metadata
from logstore.records import build_batch
from logstore.server.pytest_plugin import serve_broker
from tests.support.clock import NOW
from tests.support.wire import WireClient

PARTITIONS = 12
WAIT_S = 60  # a bound on a blocked open, so that a failing test cannot hang


def fetch_request(topic: str, partition: int) -> FetchRequest:
    fetch = FetchRequest[11].FetchTopic
    return FetchRequest[11](replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                            session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                            topics=[fetch(topic=topic, partitions=[fetch.FetchPartition(
                                partition=partition, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                                partition_max_bytes=1 << 20)])])


def test_metadata_lists_every_partition_before_any_log_opens(tmp_path, monkeypatch):
    data = tmp_path / "data"
    with LogManager(data) as manager:
        for partition in range(PARTITIONS):
            manager.get_or_create("many", partition).append(build_batch([Record(0, NOW, b"k", b"v%d" % partition)]))
    release, opened = threading.Event(), []
    real_open = LogManager._open_log

    def held_open(self: LogManager, lazy: LazyLog) -> Log:
        if lazy.path.name.startswith("many-"):
            assert release.wait(WAIT_S), "the test never released the opens"
        log = real_open(self, lazy)
        opened.append(log.name)
        return log

    monkeypatch.setattr(LogManager, "_open_log", held_open)
    with serve_broker(data) as server, WireClient(server.port, timeout=WAIT_S) as client:
        try:
            response = client.call(MetadataRequest[12](topics=None, allow_auto_topic_creation=False,
                                                       include_topic_authorized_operations=False),
                                   MetadataResponse[12])
            [topic] = [t for t in response.topics if t.name == "many"]
            assert sorted(p.partition_index for p in topic.partitions) == list(range(PARTITIONS))
            assert not [name for name in opened if name.startswith("many-")]
            # the id is stored before the node serves: a crash cannot change it
            assert read_partition_metadata(data / "many-0") == topic.topic_id
        finally:
            release.set()  # before the server stops: its close waits for the opens
        [response] = client.call(fetch_request("many", 7), FetchResponse[11]).responses
        [partition] = response.partitions
        assert (partition.partition_index, partition.error_code, partition.high_watermark) == (7, 0, 1)
        assert b"v7" in bytes(partition.records)
        files = [data / f"many-{p}" / PARTITION_METADATA for p in range(PARTITIONS)]
        deadline = time.monotonic() + WAIT_S
        while not all(file.exists() for file in files) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert {read_partition_metadata(file.parent) for file in files} == {topic.topic_id}

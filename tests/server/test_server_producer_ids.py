"""A single node's producer ids: InitProducerId hands out ids above every producer id its logs
remember, read once, on the disk thread (opening thousands of logs on the event loop would stall
every client for seconds)."""

from __future__ import annotations

import threading
import time

from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from logstore import LogManager, Record
from logstore.records import build_batch
from logstore.server.pytest_plugin import serve_broker
from tests.support.wire import WireClient


def idempotent_producer_id(client: WireClient) -> int:
    response = client.call(InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=60_000,
                                                    producer_id=-1, producer_epoch=-1), InitProducerIdResponse[4])
    assert response.error_code == 0
    return response.producer_id


def test_a_restarted_node_hands_out_ids_above_its_logs_reading_them_off_the_event_loop(tmp_path, monkeypatch):
    data = tmp_path / "data"
    now_ms = int(time.time() * 1000)  # the server's clock: older producers would have expired
    with LogManager(data) as manager:
        for partition, producer_id in enumerate((5000, 7000, 6000)):
            manager.get_or_create("orders", partition).append(build_batch(
                [Record(0, now_ms, None, b"v")], producer_id=producer_id, producer_epoch=0, base_sequence=0))
    readers = []
    every_log = LogManager.logs

    def logs(self: LogManager) -> list:
        readers.append(threading.current_thread().name)
        return every_log(self)

    monkeypatch.setattr(LogManager, "logs", logs)
    with serve_broker(data) as server, WireClient(server.port) as client:
        assert [idempotent_producer_id(client) for _ in range(3)] == [7001, 7002, 7003]
    assert readers == ["logstore-disk_0"]  # once, on the data directory's disk thread

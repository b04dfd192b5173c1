"""Idle producer ids expire on LogManager's clock, as Kafka's PeriodicProducerExpirationCheck does."""

import pytest

from logstore import Log, LogManager, Record
from logstore.clock import ManualClock
from logstore.errors import UnknownProducerIdError
from logstore.records import build_batch

HOUR_MS = 3_600_000


def idempotent_batch(sequence: int, timestamp: int) -> bytes:
    records = [Record(offset=0, timestamp=timestamp, key=b"k", value=b"v")]
    return build_batch(records, producer_id=42, producer_epoch=0, base_sequence=sequence)


def test_an_idle_producer_is_forgotten_after_producer_id_expiration_ms(tmp_path):
    clock = ManualClock(1_700_000_000_000)
    config = {"producer.id.expiration.ms": HOUR_MS, "producer.id.expiration.check.interval.ms": 60_000}
    with LogManager(tmp_path, config, clock=clock) as manager:
        log = manager.get_or_create("orders", 0)
        log.append(idempotent_batch(0, clock.time_ms()))
        log.append(idempotent_batch(1, clock.time_ms()))  # the producer continues: known

        clock.advance(HOUR_MS - 60_000)
        manager.run_pending()
        log.append(idempotent_batch(2, clock.time_ms()))  # still known just before expiry

        clock.advance(HOUR_MS + 60_000)
        manager.run_pending()
        with pytest.raises(UnknownProducerIdError):
            log.append(idempotent_batch(3, clock.time_ms()))  # expired: a mid-stream sequence is refused
        assert log.append(idempotent_batch(0, clock.time_ms())).record_count == 1  # a fresh start is fine


def test_recovery_keeps_batches_larger_than_the_current_max_message_bytes(tmp_path):
    big = [Record(offset=i, timestamp=1_700_000_000_000, key=b"k", value=b"x" * 2000) for i in range(4)]
    log = Log.open(tmp_path / "t-0", {"max.message.bytes": 1_000_000})
    log.append(build_batch(big))
    log.flush()
    log.close()
    for marker in tmp_path.rglob(".kafka_cleanshutdown"):
        marker.unlink()

    # Reopened after an unclean shutdown with a lower limit: recovery must not cut the old batch.
    log = Log.open(tmp_path / "t-0", {"max.message.bytes": 1000})
    assert [r.offset for r in log.records(0)] == [0, 1, 2, 3]
    assert log.recovered_bytes == 0
    log.close()

"""The same moves made by confluent-kafka, kafka-python and aiokafka, for the cluster
acceptance tests: create a topic with a replication factor, produce with acks=all (calling
back midway), consume in a group with read_committed, and run one transaction in two steps."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

TIMEOUT_S = 60


class Consuming:
    """A group member consuming in the background; `seen` grows as records arrive."""

    def __init__(self) -> None:
        self.seen: set[bytes] = set()
        self.stopping = threading.Event()
        self.error: BaseException | None = None
        self.running: Any = None  # the thread or the future consuming

    def stop(self) -> None:
        """Leave the group and wait until the member has closed."""
        self.stopping.set()
        if isinstance(self.running, threading.Thread):
            self.running.join(TIMEOUT_S)
        else:
            self.running.result(TIMEOUT_S)


class ScenarioClient:
    """What the scenario holds a client by: `with` closes what the client keeps running."""

    def __enter__(self) -> ScenarioClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop what outlives the scenario's calls (nothing, unless a client says otherwise)."""


class ConfluentClient(ScenarioClient):
    name = "confluent-kafka"
    transaction_survives_coordinator = True

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap

    def create_topic(self, name: str, partitions: int, replication_factor: int) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(name, partitions, replication_factor)])[name].result(TIMEOUT_S)

    def produce(self, topic: str, values: list[bytes], midway: Callable[[], None]) -> set[bytes]:
        from confluent_kafka import Producer

        acked: set[bytes] = set()
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 5, "message.timeout.ms": TIMEOUT_S * 1000})
        on_delivery = lambda err, msg: err is None and acked.add(msg.value())  # noqa: E731
        half = len(values) // 2
        for index, value in enumerate(values):
            if index == half:
                assert producer.flush(TIMEOUT_S) == 0
                midway()
            producer.produce(topic, value, on_delivery=on_delivery)
            producer.poll(0)
        assert producer.flush(TIMEOUT_S) == 0
        return acked

    def consume(self, topic: str, group: str) -> Consuming:
        from confluent_kafka import Consumer

        consuming = Consuming()
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                             "isolation.level": "read_committed"})
        consumer.subscribe([topic])

        def run() -> None:
            try:
                while not consuming.stopping.is_set():
                    message = consumer.poll(0.2)
                    if message is not None and message.error() is None:
                        consuming.seen.add(message.value())
            finally:
                consumer.close()
        return _in_thread(consuming, run)

    def begin_transaction(self, transactional_id: str, topic: str, values: list[bytes]) -> Callable[[], bool]:
        from confluent_kafka import KafkaException, Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": transactional_id})
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, value)
        assert producer.flush(TIMEOUT_S) == 0

        def finish() -> bool:
            try:
                producer.commit_transaction(TIMEOUT_S)
                return True
            except KafkaException as exc:
                if not exc.args[0].txn_requires_abort():
                    raise
                producer.abort_transaction(TIMEOUT_S)
                return False
        return finish


class KafkaPythonClient(ScenarioClient):
    name = "kafka-python"
    # kafka-python 3's sender stops retrying EndTxn once FindCoordinator names the dead node again
    # (as a cluster does until the controller fences it): its transaction is coordinated elsewhere
    transaction_survives_coordinator = False

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap.split(",")

    def create_topic(self, name: str, partitions: int, replication_factor: int) -> None:
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap)
        try:
            admin.create_topics([NewTopic(name, partitions, replication_factor)])
        finally:
            admin.close()

    def produce(self, topic: str, values: list[bytes], midway: Callable[[], None]) -> set[bytes]:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", enable_idempotence=True,
                                 linger_ms=5, retries=1_000, delivery_timeout_ms=TIMEOUT_S * 1000)
        try:
            half = len(values) // 2
            futures = [(value, producer.send(topic, value)) for value in values[:half]]
            producer.flush(TIMEOUT_S)
            midway()
            futures += [(value, producer.send(topic, value)) for value in values[half:]]
            producer.flush(TIMEOUT_S)
            return {value for value, future in futures if future.succeeded()}
        finally:
            producer.close(TIMEOUT_S)

    def consume(self, topic: str, group: str) -> Consuming:
        from kafka import KafkaConsumer
        from kafka.errors import KafkaError

        consuming = Consuming()
        consumer = KafkaConsumer(topic, bootstrap_servers=self.bootstrap, group_id=group,
                                 auto_offset_reset="earliest", isolation_level="read_committed")

        def run() -> None:
            try:
                while not consuming.stopping.is_set():
                    try:
                        batches = consumer.poll(200).values()
                    except KafkaError as exc:
                        # kafka-python 3 raises from poll() what its metadata refresh met, such
                        # as ECONNREFUSED from the killed node; retriable, so an application polls on
                        if not exc.retriable:
                            raise
                        continue
                    for records in batches:
                        consuming.seen.update(r.value for r in records)
            finally:
                consumer.close()
        return _in_thread(consuming, run)

    def begin_transaction(self, transactional_id: str, topic: str, values: list[bytes]) -> Callable[[], bool]:
        from kafka import KafkaProducer
        from kafka.errors import KafkaError

        producer = KafkaProducer(bootstrap_servers=self.bootstrap, transactional_id=transactional_id)
        producer.init_transactions()
        producer.begin_transaction()
        for value in values:
            producer.send(topic, value)
        producer.flush(TIMEOUT_S)

        def finish() -> bool:
            try:
                producer.commit_transaction()
                return True
            except KafkaError:
                producer.abort_transaction()
                return False
            finally:
                producer.close(TIMEOUT_S)
        return finish


class AiokafkaClient(ScenarioClient):
    """aiokafka's coroutines run on a loop of their own thread, so the scenario reads the same."""

    name = "aiokafka"
    transaction_survives_coordinator = True

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the client's loop and its thread (the scenario's clients have closed by then)."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(TIMEOUT_S)
        self.loop.close()

    def run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(TIMEOUT_S * 2)

    def create_topic(self, name: str, partitions: int, replication_factor: int) -> None:
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic

        async def create() -> None:
            admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
            await admin.start()
            try:
                await admin.create_topics([NewTopic(name, partitions, replication_factor)])
            finally:
                await admin.close()
        self.run(create())

    def produce(self, topic: str, values: list[bytes], midway: Callable[[], None]) -> set[bytes]:
        from aiokafka import AIOKafkaProducer

        async def produce() -> set[bytes]:
            producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all", enable_idempotence=True,
                                        linger_ms=5, request_timeout_ms=TIMEOUT_S * 1000)
            await producer.start()
            try:
                half = len(values) // 2
                first = [await producer.send(topic, value) for value in values[:half]]
                await asyncio.gather(*first)
                await asyncio.get_running_loop().run_in_executor(None, midway)
                rest = [await producer.send(topic, value) for value in values[half:]]
                results = await asyncio.gather(*first, *rest, return_exceptions=True)
                return {v for v, r in zip(values, results, strict=True) if not isinstance(r, BaseException)}
            finally:
                await producer.stop()
        return self.run(produce())

    def consume(self, topic: str, group: str) -> Consuming:
        from aiokafka import AIOKafkaConsumer

        consuming = Consuming()

        async def consume() -> None:
            consumer = AIOKafkaConsumer(topic, bootstrap_servers=self.bootstrap, group_id=group,
                                        auto_offset_reset="earliest", isolation_level="read_committed")
            await consumer.start()
            try:
                while not consuming.stopping.is_set():
                    for records in (await consumer.getmany(timeout_ms=200)).values():
                        consuming.seen.update(r.value for r in records)
            except BaseException as exc:
                consuming.error = exc
            finally:
                await consumer.stop()
        consuming.running = asyncio.run_coroutine_threadsafe(consume(), self.loop)
        return consuming

    def begin_transaction(self, transactional_id: str, topic: str, values: list[bytes]) -> Callable[[], bool]:
        from aiokafka import AIOKafkaProducer
        from aiokafka.errors import KafkaError

        async def begin() -> AIOKafkaProducer:
            producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, transactional_id=transactional_id)
            await producer.start()
            await producer.begin_transaction()
            await asyncio.gather(*[await producer.send(topic, value) for value in values])
            return producer
        producer = self.run(begin())

        async def finish() -> bool:
            try:
                await producer.commit_transaction()
                return True
            except KafkaError:
                await producer.abort_transaction()
                return False
            finally:
                await producer.stop()
        return lambda: self.run(finish())


def _in_thread(consuming: Consuming, run: Callable[[], None]) -> Consuming:
    def guarded() -> None:
        try:
            run()
        except BaseException as exc:
            consuming.error = exc
    thread = threading.Thread(target=guarded, daemon=True)
    thread.start()
    consuming.running = thread
    return consuming


CLIENTS = [ConfluentClient, KafkaPythonClient, AiokafkaClient]

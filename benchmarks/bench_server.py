"""`logstore serve` under a real client: confluent-kafka (librdkafka) producing and consuming
against a `logstore serve` subprocess, beside the same client against librdkafka's in-process
mock cluster (`test.mock.num.brokers`: C, in memory) and plain file I/O of the same bytes.

- produce throughput: 100 B and 1 KiB values, linger.ms 5, acks=1 and acks=all, beside
  write() of the same bytes into a reused file and into new files (new page-cache pages,
  which is what a broker's appends take and what bounds them on a VM);
- consume throughput: the same records fetched from offset 0;
- the server's CPU seconds per GiB served while the client reads 1 GiB of 1 KiB records
  (extra_info `server_cpu_s_per_gib`, printed by report.py): the mock cluster keeps only a
  few MB, so the consume comparison above is short; this one is the server's own cost;
- p99 produce latency at 1,000 messages/s (extra_info `p99_ms`, printed by report.py).

Throughput rounds time the data only: each round's client is created, connected to the
partition's leader and its topic created before the clock starts, on both sides alike.
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MESSAGES = {100: 100_000, 1024: 30_000}
# About 4 MB per consume run: the mock cluster keeps only its last few MB of a partition.
CONSUME_MESSAGES = {100: 40_000, 1024: 4_000}
ROUNDS = 5
INTERLEAVED_ROUNDS = 9
CONSUME_ROUNDS = 15  # a consume round takes a few ms: more of them steady the median
GIB = 1 << 30
GIB_RECORDS = GIB // 1024  # 1 GiB of 1 KiB values
GIB_ROUNDS = 3
LATENCY_RATE = 1000
LATENCY_SECONDS = 3


@pytest.fixture(scope="module")
def logstore_process(tmp_path_factory):
    """`logstore serve` in its own process (the client's Python thread does not share its GIL):
    (the process, its bootstrap address)."""
    data = tmp_path_factory.mktemp("bench-server")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, "-m", "logstore", "serve", str(data), "--listen", "127.0.0.1:0"],
                               cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    try:
        match = re.search(r" on (\S+:\d+) ", process.stderr.readline())
        assert match, "logstore serve did not start"
        yield process, warmed(match.group(1))
    finally:  # also when the warm-up failed: the server must not outlive the session
        process.send_signal(signal.SIGTERM)
        process.wait(60)


@pytest.fixture(scope="module")
def logstore_server(logstore_process):
    return logstore_process[1]


@pytest.fixture(scope="module")
def mock_cluster():
    """librdkafka's mock cluster; the client holding it stays open, others connect over TCP."""
    holder = Producer({"test.mock.num.brokers": 1})
    broker = next(iter(holder.list_topics(timeout=10).brokers.values()))
    yield warmed(f"{broker.host}:{broker.port}")
    holder.flush(1)


def warmed(bootstrap: str) -> str:
    """`bootstrap` after one record produced and fetched, so no round pays the broker's first
    append or read (numba kernels loading from their cache, for logstore)."""
    produce_all(new_producer(bootstrap, "warm", "1"), "warm", b"w", 1)
    consumer = new_consumer(bootstrap, "warm")
    consume_all(consumer, ["warm"], 2)
    consumer.close()
    return bootstrap


def tag(benchmark, group: str, role: str, items: int, unit: str = "bytes") -> None:
    benchmark.group = group
    benchmark.extra_info.update(items=items, unit=unit, role=role)


def new_producer(bootstrap: str, topic: str, acks: str) -> Producer:
    """A producer already connected to `topic`'s leader, the topic created by its first record."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": acks,
                         "queue.buffering.max.messages": 1_000_000, "enable.idempotence": False})
    producer.produce(topic, b"warm", partition=0)
    assert producer.flush(30) == 0
    return producer


def produce_all(producer: Producer, topic: str, value: bytes, count: int) -> None:
    for _ in range(count):
        try:
            producer.produce(topic, value, partition=0)
        except BufferError:
            producer.poll(0.01)
            producer.produce(topic, value, partition=0)
    assert producer.flush(120) == 0


def new_consumer(bootstrap: str, topic: str) -> Consumer:
    """A consumer already connected to `topic`'s leader (a ListOffsets answered), not yet assigned."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                         "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760})
    consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    return consumer


def consume_all(consumer: Consumer, topics: list[str], count: int) -> None:
    """Read `count` records from partition 0 of `topics`, from offset 0."""
    consumer.assign([TopicPartition(topic, 0, 0) for topic in topics])
    seen = 0
    deadline = time.monotonic() + 120
    while seen < count and time.monotonic() < deadline:
        seen += sum(1 for m in consumer.consume(min(10_000, count - seen), 0.5) if not m.error())
    assert seen >= count


def _targets(request, target: str) -> str:
    return request.getfixturevalue("logstore_server" if target == "logstore" else "mock_cluster")


@pytest.mark.parametrize("acks", ["1", "all"])
@pytest.mark.parametrize("size", [100, 1024], ids=["100B", "1KiB"])
@pytest.mark.parametrize("target", ["logstore", "mock"])
def test_produce(benchmark, request, tmp_path, target, size, acks):
    bootstrap = _targets(request, target)
    count = MESSAGES[size]
    value = b"v" * size
    topics = (f"p{size}-{acks}-{i}" for i in range(100))
    producers: list[Producer] = []

    def setup():
        producers.clear()  # the last round's producer, all delivered, is destroyed here
        topic = next(topics)
        producers.append(new_producer(bootstrap, topic, acks))
        return (producers[0], topic, value, count), {}

    tag(benchmark, f"server produce {size} B acks={acks}", "ours" if target == "logstore" else "peer",
        count * size)
    benchmark.pedantic(produce_all, setup=setup, rounds=ROUNDS, warmup_rounds=1)
    if target == "logstore":
        mock = _targets(request, "mock")
        server = request.getfixturevalue("logstore_process")[0].pid
        ratio, server_cpu, medians = interleaved_produce({"ours": bootstrap, "baseline": mock}, size, acks, server,
                                                         tmp_path)
        benchmark.extra_info["interleaved"] = {"baseline": "the mock cluster", **ratio}
        benchmark.extra_info["server_cpu_s_per_gib_produced"] = server_cpu
        benchmark.extra_info["interleaved_median_ms"] = medians


def interleaved_produce(bootstraps: dict[str, str], size: int, acks: str, server: int,
                        scratch: Path) -> tuple[dict[str, float], float, dict[str, float]]:
    """The mock's median wall time over ours, from rounds that alternate the two (the groups'
    rows run a minute apart, and this VM's speed moves more than the difference between them);
    each round's producer is connected and its topic created before the clock starts. Also
    the CPU seconds per GiB of values that process `server` (ours) used in our rounds: a
    steadier figure of its own cost than the wall time a client shares two cores with. And
    the median milliseconds per round of each, beside a write() of the round's bytes into a
    new file under `scratch` in the same alternation: the page-cache pages a broker's log
    takes and the mock, which keeps a few MB in memory, does not."""
    times: dict[str, list[float]] = {name: [] for name in (*bootstraps, "write")}
    server_cpu = 0.0
    total = MESSAGES[size] * size
    for i in range(INTERLEAVED_ROUNDS):
        for name, bootstrap in bootstraps.items():
            topic = f"i{size}-{acks}-{name}-{i}"
            producer = new_producer(bootstrap, topic, acks)
            before, started = cpu_seconds(server), time.perf_counter()
            produce_all(producer, topic, b"v" * size, MESSAGES[size])
            times[name].append(time.perf_counter() - started)
            if name == "ours":
                server_cpu += cpu_seconds(server) - before
            del producer
        started = time.perf_counter()
        write_file(lambda path=scratch / f"interleaved-{i}": path, os.O_EXCL, b"v" * 1_000_000, total)
        times["write"].append(time.perf_counter() - started)
    gib = INTERLEAVED_ROUNDS * total / GIB
    return ({"wall": round(statistics.median(times["baseline"]) / statistics.median(times["ours"]), 2)},
            round(server_cpu / gib, 2), {name: round(statistics.median(t) * 1e3, 1) for name, t in times.items()})


@pytest.mark.parametrize("size", [100, 1024], ids=["100B", "1KiB"])
def test_produce_plain_write(benchmark, tmp_path, size):
    """The same bytes written with write() in 16 KiB chunks (no fsync) into one file truncated
    each round: page-cache pages just freed, the most any broker's write could get."""
    count = MESSAGES[size]
    chunk = b"v" * (16 * 1024)
    total = count * size
    tag(benchmark, f"server produce {size} B acks=1", "baseline", total)

    benchmark.pedantic(write_file, args=(lambda: tmp_path / "plain", os.O_TRUNC, chunk, total), rounds=ROUNDS,
                       iterations=1, warmup_rounds=1)


def write_file(path: Callable[[], Path], flags: int, chunk: bytes, total: int) -> None:
    """write() exactly `total` bytes, `chunk` at a time, into the file at `path()` (opened with
    `flags` added), so the baseline's throughput counts the bytes it wrote."""
    fd = os.open(path(), os.O_WRONLY | os.O_CREAT | flags)
    try:
        for _ in range(total // len(chunk)):
            os.write(fd, chunk)
        os.write(fd, chunk[:total % len(chunk)])
    finally:
        os.close(fd)


@pytest.mark.parametrize("acks", ["1", "all"])
@pytest.mark.parametrize("size", [100, 1024], ids=["100B", "1KiB"])
def test_produce_new_bytes_write(benchmark, tmp_path, size, acks):
    """The same bytes written with write() in 1 MB chunks (librdkafka's batch.size) to a new
    file each round, the earlier rounds' files kept: new page-cache pages, as a broker's log
    takes them. test_produce_plain_write rewrites one file, so its pages are the ones just
    freed; on a VM whose host backs new guest pages lazily, the two differ by up to 10x
    (2026-12-06: 3.6 GB/s rewriting against 260-300 MiB/s once a few hundred MB are new)."""
    count = MESSAGES[size]
    chunk = b"v" * 1_000_000
    total = count * size
    rounds = itertools.count()
    tag(benchmark, f"server produce {size} B acks={acks}", "baseline", total)

    benchmark.pedantic(write_file, args=(lambda: tmp_path / f"round-{next(rounds)}", os.O_EXCL, chunk, total),
                       rounds=ROUNDS, iterations=1, warmup_rounds=1)


@pytest.mark.parametrize("size", [100, 1024], ids=["100B", "1KiB"])
@pytest.mark.parametrize("target", ["logstore", "mock"])
def test_consume(benchmark, request, target, size):
    bootstrap = _targets(request, target)
    count = CONSUME_MESSAGES[size]
    topic = f"c{size}"
    produce_all(new_producer(bootstrap, topic, "1"), topic, b"v" * size, count - 1)
    consumers: list[Consumer] = []

    def setup():
        for consumer in consumers:
            consumer.close()
        consumers[:] = [new_consumer(bootstrap, topic)]
        return (consumers[0], [topic], count), {}

    tag(benchmark, f"server consume {size} B", "ours" if target == "logstore" else "peer", count * size)
    benchmark.pedantic(consume_all, setup=setup, rounds=CONSUME_ROUNDS, warmup_rounds=1)
    consumers[0].close()


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time the process `pid` has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the server's CPU time from /proc")
def test_consume_gib_server_cpu(benchmark, logstore_process):
    """A client reads 1 GiB of 1 KiB records; extra_info holds the server's CPU seconds per
    GiB served (the median round's), the throughput row is the client's."""
    process, bootstrap = logstore_process
    topic = "gib"
    produce_all(new_producer(bootstrap, topic, "1"), topic, b"v" * 1024, GIB_RECORDS - 1)
    consumers: list[Consumer] = []
    used: list[float] = []

    def setup():
        for consumer in consumers:
            consumer.close()
        consumers[:] = [new_consumer(bootstrap, topic)]
        return (consumers[0], [topic], GIB_RECORDS), {}

    def consume(*args) -> None:
        before = cpu_seconds(process.pid)
        consume_all(*args)
        used.append(cpu_seconds(process.pid) - before)

    tag(benchmark, "server consume 1 GiB of 1 KiB", "ours", GIB)
    benchmark.pedantic(consume, setup=setup, rounds=GIB_ROUNDS)
    consumers[0].close()
    benchmark.extra_info["server_cpu_s_per_gib"] = round(sorted(used)[len(used) // 2], 3)
    benchmark.extra_info["server_cpu_s_per_gib_rounds"] = [round(u, 3) for u in used]


@pytest.mark.parametrize("size", [100, 1024], ids=["100B", "1KiB"])
def test_consume_plain_read(benchmark, tmp_path, size):
    """The same bytes read back with read() in 1 MiB chunks from the page cache."""
    total = CONSUME_MESSAGES[size] * size
    path = tmp_path / "plain"
    path.write_bytes(b"v" * total)
    tag(benchmark, f"server consume {size} B", "baseline", total)

    def read() -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            while os.read(fd, 1 << 20):
                pass
        finally:
            os.close(fd)

    benchmark.pedantic(read, rounds=CONSUME_ROUNDS, iterations=1, warmup_rounds=1)


@pytest.mark.parametrize("target", ["logstore", "mock"])
def test_produce_latency_at_1000_per_second(benchmark, request, target):
    """Delivery-report latency of 100 B messages sent at 1,000/s, acks=all, linger.ms 5."""
    bootstrap = _targets(request, target)
    tag(benchmark, "server produce latency at 1,000 msg/s", "ours" if target == "logstore" else "peer",
        LATENCY_RATE * LATENCY_SECONDS, unit="records")
    measure_latency(benchmark, bootstrap, "latency")


def measure_latency(benchmark, bootstrap: str, topic: str) -> None:
    """One round of 100 B records to partition 0 of `topic` at LATENCY_RATE a second, acks=all,
    linger.ms 5; the delivery reports' p50 and p99 go to extra_info (`p50_ms`, `p99_ms`)."""
    latencies: list[float] = []

    def run() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
        producer.produce(topic, b"warm")
        producer.flush(10)
        start = time.perf_counter()
        for i in range(LATENCY_RATE * LATENCY_SECONDS):
            due = start + i / LATENCY_RATE
            while time.perf_counter() < due:
                producer.poll(0)
            sent = time.perf_counter()
            producer.produce(topic, b"x" * 100, partition=0,
                             on_delivery=lambda err, msg, sent=sent: latencies.append(time.perf_counter() - sent))
            producer.poll(0)
        assert producer.flush(30) == 0

    benchmark.pedantic(run, rounds=1, iterations=1)
    latencies.sort()
    benchmark.extra_info["p99_ms"] = round(latencies[int(len(latencies) * 0.99)] * 1000, 3)
    benchmark.extra_info["p50_ms"] = round(latencies[len(latencies) // 2] * 1000, 3)

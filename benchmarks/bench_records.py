"""Build and decode 1,000-record batches (16-byte keys, 100-byte values), uncompressed and zstd:
logstore's Record API and columnar/Arrow API next to kafka-python and aiokafka's compiled
(Cython) record code, in one run.

Neither peer has a zstd package installed here (kafka-python wants ``zstandard``, aiokafka
``cramjam``); the ``peer_zstd`` fixture plugs in pyarrow's zstd (level 3, like ours), so
every implementation spends the same time in the compressor and the comparison measures the
record code around it.
"""

from __future__ import annotations

import io
from types import SimpleNamespace

import aiokafka.codec
import kafka.codec
import kafka.record.default_records as kafka_default
import numpy as np
import pyarrow as pa
import pytest
from aiokafka.record._crecords import default_records as aiokafka_default
from kafka.record.default_records import DefaultRecordBatch as KafkaPythonBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KafkaPythonBuilder

from logstore.records import Record, RecordBatch, build_batch, build_batch_columnar

N_RECORDS = 1_000
KEY_SIZE = 16
VALUE_SIZE = 100
BASE_TIMESTAMP = 1_700_000_000_000
CODECS = {"none": 0, "zstd": 4}
BATCH_SIZE_LIMIT = 1 << 30
_ZSTD = pa.Codec("zstd", compression_level=3)


def _zstd_decompress(data) -> bytes:
    return pa.CompressedInputStream(io.BytesIO(bytes(data)), "zstd").read()


@pytest.fixture(scope="module", autouse=True)
def peer_zstd():
    """Give both peers pyarrow's zstd through the hooks their codec modules call."""
    cramjam = SimpleNamespace(zstd=SimpleNamespace(
        compress=lambda data, level=3: _ZSTD.compress(data, asbytes=True),
        decompress=_zstd_decompress))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(aiokafka.codec, "cramjam", cramjam)
        patch.setattr(kafka.codec, "zstd", SimpleNamespace())
        patch.setattr(kafka_default, "zstd_encode", lambda data: _ZSTD.compress(data, asbytes=True))
        patch.setattr(kafka_default, "zstd_decode", _zstd_decompress)
        yield


@pytest.fixture(scope="module")
def workload():
    """Keys, values and timestamps as Python lists, Record objects and Arrow/numpy columns."""
    rng = np.random.default_rng(2024)
    keys = [rng.bytes(KEY_SIZE) for _ in range(N_RECORDS)]
    # Values from a 32-letter alphabet: compressible, like typical payloads.
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz012345", np.uint8)
    values = [alphabet[rng.integers(0, 32, VALUE_SIZE)].tobytes() for _ in range(N_RECORDS)]
    timestamps = np.arange(N_RECORDS, dtype=np.int64) + BASE_TIMESTAMP
    return SimpleNamespace(
        keys=keys, values=values, timestamps=timestamps.tolist(),
        records=[Record(i, BASE_TIMESTAMP + i, k, v) for i, (k, v) in enumerate(zip(keys, values, strict=True))],
        key_array=pa.array(keys, pa.binary()), value_array=pa.array(values, pa.binary()),
        timestamp_array=timestamps)


def tag(benchmark, action: str, compression: str, role: str) -> None:
    benchmark.group = f"records {action}, 1,000 x (16 B key, 100 B value), {compression}"
    benchmark.extra_info.update(items=N_RECORDS, unit="records", role=role)


# -- build ------------------------------------------------------------------------------

@pytest.mark.parametrize("compression", CODECS)
def test_build_logstore_records(benchmark, workload, compression):
    tag(benchmark, "build", compression, "ours")
    data = benchmark(build_batch, workload.records, compression=compression)
    assert RecordBatch(data).record_count == N_RECORDS


@pytest.mark.parametrize("compression", CODECS)
def test_build_logstore_columnar(benchmark, workload, compression):
    tag(benchmark, "build", compression, "ours")
    data = benchmark(build_batch_columnar, workload.key_array, workload.value_array,
                     timestamps=workload.timestamp_array, compression=compression)
    assert RecordBatch(data).record_count == N_RECORDS


def _peer_build(builder_class, workload, code: int) -> bytes:
    builder = builder_class(2, code, 0, -1, -1, -1, BATCH_SIZE_LIMIT)
    append = builder.append
    for offset, (timestamp, key, value) in enumerate(
            zip(workload.timestamps, workload.keys, workload.values, strict=True)):
        append(offset, timestamp, key, value, [])
    return bytes(builder.build())


@pytest.mark.parametrize("compression", CODECS)
def test_build_kafka_python(benchmark, workload, compression):
    tag(benchmark, "build", compression, "peer")
    data = benchmark(_peer_build, KafkaPythonBuilder, workload, CODECS[compression])
    assert RecordBatch(data).record_count == N_RECORDS


@pytest.mark.parametrize("compression", CODECS)
def test_build_aiokafka_compiled(benchmark, workload, compression):
    tag(benchmark, "build", compression, "peer")
    data = benchmark(_peer_build, aiokafka_default.DefaultRecordBatchBuilder, workload,
                     CODECS[compression])
    assert RecordBatch(data).record_count == N_RECORDS


# -- decode -----------------------------------------------------------------------------

def encoded(workload, compression: str) -> bytes:
    return build_batch(workload.records, compression=compression)


@pytest.mark.parametrize("compression", CODECS)
def test_decode_logstore_records(benchmark, workload, compression):
    tag(benchmark, "decode", compression, "ours")
    data = encoded(workload, compression)
    records = benchmark(lambda: RecordBatch(data).records())
    assert records == workload.records


@pytest.mark.parametrize("compression", CODECS)
def test_decode_logstore_arrow(benchmark, workload, compression):
    tag(benchmark, "decode", compression, "ours")
    data = encoded(workload, compression)
    table = benchmark(lambda: RecordBatch(data).to_arrow())
    assert table.column("value").to_pylist() == workload.values


@pytest.mark.parametrize("compression", CODECS)
def test_decode_kafka_python(benchmark, workload, compression):
    tag(benchmark, "decode", compression, "peer")
    data = encoded(workload, compression)
    records = benchmark(lambda: list(KafkaPythonBatch(bytearray(data))))
    assert [r.value for r in records] == workload.values


@pytest.mark.parametrize("compression", CODECS)
def test_decode_aiokafka_compiled(benchmark, workload, compression):
    tag(benchmark, "decode", compression, "peer")
    data = encoded(workload, compression)
    records = benchmark(lambda: list(aiokafka_default.DefaultRecordBatch(data)))
    assert [r.value for r in records] == workload.values

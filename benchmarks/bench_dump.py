"""`logstore dump --deep-iteration --print-data-log` of one large segment, beside `cat` of it.

The segment is 1 GiB as the issue asks (about 15 s of dumping here, one round); set
LOGSTORE_BENCH_DUMP_MIB to another size (e.g. 128) for a quicker look. Throughput
(MiB/s) is what is compared, so the ratio to `cat` barely depends on the size.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from logstore.records import build_batch_columnar, set_base_offset_and_epoch

SEGMENT_MIB = int(os.environ.get("LOGSTORE_BENCH_DUMP_MIB", "1024"))
RECORDS_PER_BATCH = 200
KEY_BYTES = 12
VALUE_BYTES = 100
BASE_TIMESTAMP = 1_700_000_000_000


def _template_batch(rng: np.random.Generator) -> bytes:
    """One 200-record batch of printable keys and values (as the Kafka sample holds)."""
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", np.uint8)
    keys = [bytes(alphabet[rng.integers(0, alphabet.size, KEY_BYTES)]) for _ in range(RECORDS_PER_BATCH)]
    values = [bytes(alphabet[rng.integers(0, alphabet.size, VALUE_BYTES)]) for _ in range(RECORDS_PER_BATCH)]
    timestamps = BASE_TIMESTAMP + np.arange(RECORDS_PER_BATCH, dtype=np.int64)
    return build_batch_columnar(keys, values, timestamps=timestamps, partition_leader_epoch=0)


@pytest.fixture(scope="module")
def segment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A segment of SEGMENT_MIB MiB: one batch repeated with increasing base offsets."""
    template = bytearray(_template_batch(np.random.default_rng(7)))
    copies = SEGMENT_MIB * 2**20 // len(template)
    data = bytearray(template * copies)
    for i in range(copies):
        set_base_offset_and_epoch(data, i * len(template), i * RECORDS_PER_BATCH, 0)
    path = tmp_path_factory.mktemp("dump") / "00000000000000000000.log"
    path.write_bytes(data)
    return path


def _info(benchmark, path: Path, role: str) -> None:
    benchmark.group = f"dump {SEGMENT_MIB} MiB segment"
    benchmark.extra_info.update(items=path.stat().st_size, unit="bytes", role=role)


def test_logstore_dump_deep_print_data_log(benchmark, segment: Path):
    _info(benchmark, segment, "ours")
    cmd = [sys.executable, "-m", "logstore", "dump", "--deep-iteration", "--print-data-log",
           "--files", segment.name]

    def dump() -> None:
        subprocess.run(cmd, cwd=segment.parent, stdout=subprocess.DEVNULL, check=True)

    benchmark.pedantic(dump, rounds=1, iterations=1)


def test_cat_to_dev_null(benchmark, segment: Path):
    _info(benchmark, segment, "baseline")

    def cat() -> None:
        subprocess.run(["cat", str(segment)], stdout=subprocess.DEVNULL, check=True)

    benchmark.pedantic(cat, rounds=3, iterations=1)

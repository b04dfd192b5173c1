"""`make demo`: an end-to-end run of logstore on generated data, stage by stage."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from logstore.records import COMPRESSION_NAMES, RecordBatch, batches_to_arrow, build_batch_columnar

RECORDS_PER_BATCH = 1000


def generated_columns(n: int, seed: int = 7) -> tuple[pa.Array, pa.Array, np.ndarray]:
    """Keys `user-<zipf id>`, JSON-ish values of varying size, and increasing timestamps."""
    rng = np.random.default_rng(seed)
    ids = rng.zipf(1.3, n) % 5000
    keys = pa.array([f"user-{i:05d}".encode() for i in ids], pa.binary())
    sizes = rng.integers(40, 400, n)
    values = pa.array(
        [b'{"event":"click","pad":"' + b"x" * int(s) + b'"}' for s in sizes], pa.binary()
    )
    timestamps = 1_700_000_000_000 + np.cumsum(rng.integers(0, 50, n))
    return keys, values, timestamps


def codec_table() -> list[tuple[str, int, int, float, float, bool]]:
    """Build one 1,000-record batch per codec, decode it into Arrow, and check the round trip."""
    keys, values, timestamps = generated_columns(RECORDS_PER_BATCH)
    batches_to_arrow([build_batch_columnar(keys[:1], values[:1])])  # load the compiled kernels first
    rows = []
    for codec in COMPRESSION_NAMES:
        started = time.perf_counter()
        data = build_batch_columnar(keys, values, timestamps=timestamps, compression=codec)
        built = time.perf_counter()
        batch = RecordBatch(data)
        batch.validate()
        table = batches_to_arrow([data])
        decoded = time.perf_counter()
        same = table.column("key").equals(pa.chunked_array([keys])) and table.column(
            "value"
        ).equals(pa.chunked_array([values]))
        rows.append((codec, batch.record_count, len(data), (built - started) * 1e3,
                     (decoded - built) * 1e3, same))
    return rows


def print_codec_table() -> None:
    """Stage 1: the record format in every codec."""
    print("== 1. Kafka v2 record batches, every codec (1,000 records each) ==")
    print(f"{'codec':<8} {'records':>7} {'bytes':>8} {'build ms':>9} {'decode ms':>10}  round trip")
    for codec, count, size, build_ms, decode_ms, same in codec_table():
        print(f"{codec:<8} {count:>7} {size:>8} {build_ms:>9.2f} {decode_ms:>10.2f}  "
              f"{'ok' if same else 'MISMATCH'}")


def main() -> int:
    """Run every demo stage in order."""
    print_codec_table()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""OffsetMap: mmh3 128-bit hashes, Kafka's fill rule, bytes per key."""

from __future__ import annotations

import mmh3
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction import _kernels
from compaction.offset_map import BYTES_PER_SLOT, OffsetMap, hash_key
from logstore.errors import InvalidConfigError


@pytest.mark.parametrize("length", list(range(0, 40)) + [100, 1000])
def test_murmur3_kernel_matches_mmh3(length):
    data = bytes((i * 31 + 7) & 0xFF for i in range(length))
    buf = np.frombuffer(b"\x00\x01" + data, dtype=np.uint8)
    h1, h2 = _kernels.murmur3_128(buf, 2, length)
    assert (int(h1), int(h2)) == mmh3.hash64(data, 0, True, signed=False)
    assert int(h1) | (int(h2) << 64) == mmh3.hash128(data)


def test_bytes_per_key_is_within_24():
    m = OffsetMap(memory=1024 * 1024, load_factor=0.9)
    assert m.slots == 1024 * 1024 // BYTES_PER_SLOT
    assert m.bytes_per_key <= 24
    assert m.memory_bytes <= 1024 * 1024


def test_put_get_overwrite_and_absent():
    m = OffsetMap(memory=20 * 100)
    assert m.put(b"a", 5)
    assert m.put(b"b", 6)
    assert m.put(b"a", 9)
    assert m.get(b"a") == 9
    assert m.get(b"b") == 6
    assert m.get(b"zz") == -1
    assert m.size == 2
    assert m.latest_offset == 9


def test_put_refused_when_full_even_for_a_present_key():
    m = OffsetMap(memory=20 * 10, load_factor=0.2)  # 10 slots, 2 keys
    assert m.max_keys == 2
    assert m.put(b"a", 1) and m.put(b"b", 2)
    assert m.full
    assert not m.put(b"a", 3)  # Kafka checks size before every put
    assert m.get(b"a") == 1


def test_clear_resets_and_sets_the_base_offset():
    m = OffsetMap(memory=20 * 10)
    m.put(b"a", 1)
    m.clear(base_offset=10**12)
    assert m.size == 0 and m.get(b"a") == -1 and m.latest_offset == -1
    assert m.put(b"a", 10**12 + 5)
    assert m.get(b"a") == 10**12 + 5
    assert not m.fits(10**12 + 2**32)


def test_too_small_a_buffer_is_a_config_error():
    with pytest.raises(InvalidConfigError):
        OffsetMap(memory=19)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 5)), max_size=200),
       st.integers(1, 40))
def test_map_matches_a_dict_with_kafkas_fill_rule(ops, max_keys):
    m = OffsetMap(memory=20 * max_keys * 2, load_factor=0.5)
    model: dict[bytes, int] = {}
    offsets = np.arange(len(ops), dtype=np.int64)
    hashes = [hash_key(str(k).encode()) for k, _ in ops]
    h1 = np.array([h[0] for h in hashes], np.uint64)
    h2 = np.array([h[1] for h in hashes], np.uint64)
    consumed = m.put_hashes(h1, h2, offsets)
    expected_consumed = len(ops)
    for i, (k, _) in enumerate(ops):
        if len(model) >= m.max_keys:
            expected_consumed = i
            break
        model[str(k).encode()] = i
    assert consumed == expected_consumed
    assert m.size == len(model)
    for k in range(31):
        assert m.get(str(k).encode()) == model.get(str(k).encode(), -1)


def test_a_smaller_working_table_answers_the_same():
    m = OffsetMap(memory=20 * 100_000)
    m.clear(base_offset=0, expected_keys=10)
    for i in range(50):  # more than expected is still answered right while below max_keys
        assert m.put(b"k%d" % (i % 20), i)
    assert m.size == 20 and m.max_keys == 90_000
    assert [m.get(b"k%d" % i) for i in range(20)] == [i + 40 if i < 10 else i + 20 for i in range(20)]

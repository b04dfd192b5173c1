"""The CRC-32C compiled kernels call (logstore.records.native_crc) is the crc32c package's."""

from __future__ import annotations

import crc32c
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from logstore.records import native_crc


def test_the_packages_function_is_found_on_a_64_bit_machine():
    assert native_crc.ADDRESS != 0


@given(st.binary(max_size=70_000), st.data())
def test_any_slice_has_the_crc_that_crc32c_gives(data, draw):
    start = draw.draw(st.integers(0, len(data)))
    stop = draw.draw(st.integers(start, len(data)))
    buf = np.frombuffer(bytearray(data), np.uint8)
    assert native_crc.crc32c_of(native_crc.ADDRESS, buf, start, stop) == crc32c.crc32c(data[start:stop])

"""Corruption errors name the file and the byte position in it, once."""

from __future__ import annotations

import numpy as np
import pytest

from compaction.decode import decode
from logstore.errors import CorruptRecordError
from logstore.log_input_stream import scan_entries
from logstore.records import Record, build_batch
from logstore.records.header import MAGIC_OFFSET


def two_batches_second_bad() -> tuple[bytes, int]:
    first = build_batch([Record(0, 0, b"k", b"v")])
    second = bytearray(build_batch([Record(1, 0, b"k", b"w")], base_offset=1))
    second[MAGIC_OFFSET] = 255
    return first + bytes(second), len(first)


def test_a_bad_magic_found_by_the_scan_is_placed_once():
    data, at = two_batches_second_bad()
    with pytest.raises(CorruptRecordError) as caught:
        list(scan_entries(lambda pos, size: data[pos:pos + size], len(data), 0, full=False, path="x/0.log"))
    assert str(caught.value) == f"unknown magic 255 (x/0.log, position {at})"
    assert caught.value.detail == "unknown magic 255"


def test_the_cleaners_decoder_names_the_file_and_the_position_in_it():
    data, at = two_batches_second_bad()
    with pytest.raises(CorruptRecordError) as caught:
        decode(np.frombuffer(data, np.uint8), segment_base=0, path="x/0.log")
    assert str(caught.value) == f"unknown magic 255 (x/0.log, position {at})"

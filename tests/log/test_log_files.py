"""logstore.log_files: the names of a log's files and directories."""

from __future__ import annotations

import pytest

from logstore.errors import InvalidTopicError
from logstore.log_files import (
    is_partition_dir_name,
    offset_from_file_name,
    offset_prefix,
    parse_offset_file_name,
    parse_partition_dir,
    partition_dir_name,
    segment_file_name,
    segment_log_offsets,
    sibling_file_name,
)


def test_segment_file_name_is_twenty_digits_then_the_suffixes():
    assert segment_file_name(105, ".log") == "00000000000000000105.log"
    assert segment_file_name(105, ".index", ".cleaned") == "00000000000000000105.index.cleaned"


def test_offset_from_file_name_reads_only_a_twenty_ascii_digit_prefix():
    assert offset_from_file_name("00000000000000000105.log.swap") == 105
    assert offset_from_file_name("105.log") is None
    assert offset_from_file_name("0000000000000000010\u00b2.log") is None  # isdigit, but not int()able


def test_offset_prefix_reads_any_number_of_leading_digits_as_kafka_tools_do():
    assert offset_prefix("105.snapshot") == 105
    assert offset_prefix("00000000000000000105.log") == 105
    assert offset_prefix("x.log") is None and offset_prefix("1\u00b2.log") is None


def test_sibling_file_name_swaps_everything_after_the_first_dot():
    assert sibling_file_name("00000000000000000105.index.swap", ".log") == "00000000000000000105.log"


def test_parse_offset_file_name_knows_only_live_files_named_by_an_offset():
    assert parse_offset_file_name("00000000000000000105.timeindex") == (105, ".timeindex")
    assert parse_offset_file_name("00000000000000000105.snapshot") == (105, ".snapshot")
    assert parse_offset_file_name("00000000000000000105.log.deleted") is None
    assert parse_offset_file_name("leader-epoch-checkpoint") is None


def test_segment_log_offsets_lists_live_segments_ascending():
    names = ["00000000000000000007.log", "00000000000000000007.index", "00000000000000000000.log",
             "00000000000000000009.log.cleaned", ".lock"]
    assert segment_log_offsets(names) == [0, 7]


def test_partition_dir_names_round_trip_and_invalid_ones_are_refused():
    assert parse_partition_dir(partition_dir_name("my.topic", 12)) == ("my.topic", 12)
    assert is_partition_dir_name("orders-0")
    for name in ("orders", "bad topic-0", "t-1.9f8e7d6c-delete", "orders-2147483648"):
        assert not is_partition_dir_name(name)
        with pytest.raises(InvalidTopicError):
            parse_partition_dir(name)

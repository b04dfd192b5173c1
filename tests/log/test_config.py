"""LogConfig: Kafka's names, defaults, typed parsing and one clear error per bad key."""

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logstore import LogConfig
from logstore.config import LONG_MAX, parse_properties
from logstore.errors import InvalidConfigError


def test_defaults_are_kafkas():
    c = LogConfig()
    assert c.segment_bytes == 1024**3
    assert c.segment_ms == 7 * 24 * 3600 * 1000
    assert c.segment_jitter_ms == 0
    assert c.segment_index_bytes == 10 * 1024 * 1024
    assert c.index_interval_bytes == 4096
    assert c.max_message_bytes == 1048588
    assert c.message_timestamp_type == "CreateTime"
    assert c.message_timestamp_before_max_ms == LONG_MAX
    assert c.message_timestamp_after_max_ms == 3600000
    assert c.flush_messages == LONG_MAX and c.flush_ms == LONG_MAX
    assert c.retention_ms == 7 * 24 * 3600 * 1000 and c.retention_bytes == -1
    assert c.cleanup_policy == ["delete"] and c.delete and not c.compact
    assert c.min_cleanable_dirty_ratio == 0.5
    assert c.min_compaction_lag_ms == 0 and c.max_compaction_lag_ms == LONG_MAX
    assert c.delete_retention_ms == 86400000
    assert c.file_delete_delay_ms == 60000
    assert c.compression_type == "producer"
    assert c.min_insync_replicas == 1
    assert c.unclean_leader_election_enable is False and c.preallocate is False
    assert c.log_retention_check_interval_ms == 300000
    assert c.log_cleaner_dedupe_buffer_size == 128 * 1024 * 1024
    assert c.log_cleaner_io_buffer_load_factor == 0.9


def test_attribute_and_item_access_agree():
    c = LogConfig({"segment.bytes": 16384})
    assert c.segment_bytes == c["segment.bytes"] == 16384
    assert "segment.bytes" in c
    with pytest.raises(KeyError):
        c["no.such.key"]
    with pytest.raises(AttributeError):
        c.no_such_key  # noqa: B018


def test_strings_are_parsed_to_typed_values():
    c = LogConfig(
        {
            "segment.bytes": "1048576",
            "retention.ms": " -1 ",
            "min.cleanable.dirty.ratio": "0.25",
            "preallocate": "TRUE",
            "cleanup.policy": "compact, delete",
        }
    )
    assert c.segment_bytes == 1048576 and c.retention_ms == -1
    assert c.min_cleanable_dirty_ratio == 0.25 and c.preallocate is True
    assert c.cleanup_policy == ["compact", "delete"] and c.compact and c.delete


@pytest.mark.parametrize(
    "key, value",
    [
        ("segment.bytes", "abc"),
        ("segment.bytes", True),
        ("segment.bytes", 2**31),
        ("segment.bytes", 13),
        ("segment.ms", 0),
        ("retention.ms", -2),
        ("min.cleanable.dirty.ratio", 1.5),
        ("cleanup.policy", "delete,forever"),
        ("compression.type", "brotli"),
        ("message.timestamp.type", "createtime"),
        ("preallocate", "yes"),
        ("max.message.bytes", 1.5),
        ("not.a.kafka.key", 1),
    ],
)
def test_bad_values_raise_one_error_naming_the_key(key, value):
    with pytest.raises(InvalidConfigError, match=key.replace(".", r"\.")):
        LogConfig({key: value})


def test_snake_case_keywords_and_with_overrides():
    base = LogConfig(segment_bytes=16384)
    derived = base.with_overrides({"retention.bytes": "100"}, index_interval_bytes=10)
    assert (derived.segment_bytes, derived.retention_bytes, derived.index_interval_bytes) == (16384, 100, 10)
    assert base.retention_bytes == -1
    assert derived.overrides == {"segment.bytes", "retention.bytes", "index.interval.bytes"}
    with pytest.raises(InvalidConfigError, match="segment_bites"):
        base.with_overrides(segment_bites=1)


def test_coerce_accepts_config_dict_or_none():
    c = LogConfig(segment_bytes=2048)
    assert LogConfig.coerce(c) is c
    assert LogConfig.coerce({"segment.bytes": 2048}) == c
    assert LogConfig.coerce(None) == LogConfig()


def test_properties_file_round_trip(tmp_path):
    path = tmp_path / "topic.properties"
    path.write_text(
        "# a comment\n! another\nsegment.bytes=16384\nretention.ms : 1000\n"
        "cleanup.policy compact,\\\n    delete\n\n"
    )
    c = LogConfig.from_properties(path)
    assert (c.segment_bytes, c.retention_ms, c.cleanup_policy) == (16384, 1000, ["compact", "delete"])
    path.write_text(c.to_properties())
    assert LogConfig.from_properties(path) == c


def test_properties_file_with_unknown_key_names_it(tmp_path):
    path = tmp_path / "bad.properties"
    path.write_text("segment.bytes=16384\nsegment.byte=1\n")
    with pytest.raises(InvalidConfigError, match=r"segment\.byte:"):
        LogConfig.from_properties(path)


def test_parse_properties_separators():
    assert parse_properties("a=1\nb:2\nc 3\nd = 4\ne\n") == {"a": "1", "b": "2", "c": "3", "d": "4", "e": ""}


def test_config_is_immutable():
    c = LogConfig()
    with pytest.raises(AttributeError, match="with_overrides"):
        c.segment_bytes = 5


CONFIG_VALUES = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=12),
                          st.lists(st.text(max_size=6), max_size=3), st.binary(max_size=4),
                          st.sampled_from(["nan", "NaN", "inf", "-inf", "1e400", " 7 ", "0x10", "1_0"]))


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(st.one_of(st.sampled_from(sorted(LogConfig())), st.text(max_size=8), st.integers()),
                       CONFIG_VALUES, max_size=4))
def test_random_dicts_raise_only_invalid_config_error(values):
    try:
        config = LogConfig(values)
    except InvalidConfigError:
        return
    assert LogConfig(parse_properties(config.to_properties())) == config


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_random_properties_text_raises_only_invalid_config_error(text):
    with contextlib.suppress(InvalidConfigError):
        LogConfig(parse_properties(text))


@pytest.mark.parametrize("value", ["nan", "NaN", float("nan")])
def test_nan_is_not_a_number_a_config_accepts(value):
    with pytest.raises(InvalidConfigError, match="min.cleanable.dirty.ratio"):
        LogConfig({"min.cleanable.dirty.ratio": value})


def test_huge_integer_for_a_double_is_invalid_config():
    with pytest.raises(InvalidConfigError, match="log.cleaner.io.buffer.load.factor"):
        LogConfig({"log.cleaner.io.buffer.load.factor": 10**400})


def test_properties_file_that_is_not_utf8_names_the_file(tmp_path):
    path = tmp_path / "topic.properties"
    path.write_bytes(b"segment.bytes=\xff\xfe\n")
    with pytest.raises(InvalidConfigError, match="topic.properties"):
        LogConfig.from_properties(path)


@pytest.mark.parametrize("text", ["1_000", "\uff11\uff12", "0x10", "1e3", ""])
def test_integer_configs_take_only_what_java_parses(text):
    with pytest.raises(InvalidConfigError, match="retention.ms: expected an integer"):
        LogConfig({"retention.ms": text})

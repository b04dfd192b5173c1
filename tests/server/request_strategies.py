"""Hypothesis strategies for well-formed Kafka requests with hostile field values, built by
walking kafka-python 3's schema of each message (`cls._struct`: SimpleField, ArrayField,
StructField and StructArrayField, each knowing the versions it is in and whether it is
nullable or tagged there). The bytes always decode; what they say is drawn to hurt."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from hypothesis import strategies as st
from kafka.protocol.schemas.fields.codecs import (
    UUID,
    Boolean,
    Bytes,
    Float64,
    Int8,
    Int16,
    Int32,
    Int64,
    String,
    UnsignedInt16,
)

from logstore.records import Record, build_batch
from logstore.server.apis import APIS

INT_RANGES = {Int8: (-2**7, 2**7 - 1), Int16: (-2**15, 2**15 - 1), Int32: (-2**31, 2**31 - 1),
              Int64: (-2**63, 2**63 - 1), UnsignedInt16: (0, 2**16 - 1)}
SMALL_ARRAY = 3
INT16_MAX = 2**15 - 1  # the longest string a non-flexible version can carry
LONGER_THAN_INT16 = "w" * 40_000
BULK_ARRAY = 2_000  # "thousands of entries", once per request so the frame stays about a MiB
CONFIG_NAMES = ("cleanup.policy", "retention.ms", "retention.bytes", "segment.bytes", "segment.ms",
                "max.message.bytes", "compression.type", "message.timestamp.type", "min.insync.replicas",
                "min.cleanable.dirty.ratio", "segment.index.bytes", "preallocate", "no.such.config",
                "log.retention.hours", "")
CONFIG_VALUES = ("-1", "0", "1", "14", "compact", "delete", "compact,delete", "compact,,x", "gzip", "zstd",
                 "producer", "LogAppendTime", "true", "yes", "abc", "0.5", "1e3", "NaN", "9223372036854775807",
                 "99999999999999999999999", "", " 1 ")
PROTOCOL_NAMES = ("consumer", "range", "roundrobin", "cooperative-sticky")
# The strings a field of this struct and name is drawn from first: config keys where configs are
# named, config values where they are given.
FIELD_POOLS = {
    ("CreatableTopicConfig", "name"): CONFIG_NAMES,
    ("AlterableConfig", "name"): CONFIG_NAMES,
    ("DescribeConfigsResource", "configuration_keys"): CONFIG_NAMES,
    ("CreatableTopicConfig", "value"): CONFIG_VALUES,
    ("AlterableConfig", "value"): CONFIG_VALUES,
    ("JoinGroupRequestProtocol", "name"): PROTOCOL_NAMES,
}
# Response fields whose values the fuzz learns, by the kind of request field they fill.
LEARNT = {"member_id": "member", "generation_id": "generation", "producer_id": "producer",
          "producer_epoch": "epoch", "session_id": "session"}


def kind_of(field_name: str) -> str:
    """Which pool of plausible values a request field draws from, by its name."""
    name = field_name.removeprefix("v3_and_below_")
    for words, kind in ((("epoch",), "epoch"), (("member_id", "instance"), "member"), (("transactional",), "txn"),
                        (("group", "coordinator_keys"), "group"), (("protocol",), "protocol"),
                        (("generation",), "generation"), (("producer_id",), "producer"),
                        (("session_id",), "session"), (("partition", "index"), "partition"),
                        (("offset",), "offset"), (("timeout",), "timeout")):
        if any(word in name for word in words):
            return kind
    return "topic"


class Plausible:
    """Values of the server's state by kind (topic, group, member, producer, ...): seeded, then
    learnt from its answers; drawn half the time, so requests reach that state."""

    def __init__(self, seeded: dict[str, list], learnt_limit: int = 16):
        self._pools = {kind: list(values) for kind, values in seeded.items()}
        self._seeded = {kind: len(values) for kind, values in seeded.items()}
        self._limit = learnt_limit

    def pool(self, kind: str) -> list:
        """The values of `kind` (an empty list when none are known)."""
        return self._pools.setdefault(kind, [])

    def learn_from(self, message) -> None:
        """Learn the member ids, generations, producer ids, epochs and fetch sessions in a response."""
        for field in message._struct._fields:
            value = getattr(message, field.name, None)
            if field.name in LEARNT and value not in (None, "", -1):
                self._learn(LEARNT[field.name], value)
            elif field.is_struct_array() and value:
                for item in value:
                    self.learn_from(item)

    def _learn(self, kind: str, value) -> None:
        pool = self.pool(kind)
        if value not in pool:
            pool.append(value)
            if len(pool) > self._seeded.get(kind, 0) + self._limit:
                del pool[self._seeded.get(kind, 0)]


def consumer_subscription(topics: Sequence[str]) -> bytes:
    """A ConsumerProtocolSubscription v0 naming `topics` (JoinGroup metadata a consumer sends)."""
    body = b"".join(len(t.encode()).to_bytes(2, "big") + t.encode() for t in topics)
    return b"\x00\x00" + len(topics).to_bytes(4, "big") + body + b"\xff\xff\xff\xff"


def pick(pool: list, fallback: st.SearchStrategy) -> st.SearchStrategy:
    """An entry of `pool`, which grows as the server answers: the draw is an index of fixed
    range, so replaying an example draws the same way whatever was learnt since."""
    return st.tuples(st.integers(0, 255), fallback).map(lambda d: pool[d[0] % len(pool)] if pool else d[1])


def hostile_strings(plausible: list[str], compact: bool) -> st.SearchStrategy[str]:
    """Plausible names half the time; else invalid and over-long names, or arbitrary text.
    Compact (flexible-version) strings may pass the int16 length older versions have."""
    invalid = ("", ".", "..", "../escape", "a/b", "sp ace", "nul\x00", "é", "x" * 249, "y" * 300,
               "z" * 2_000, "__consumer_offsets", "__transaction_state", *((LONGER_THAN_INT16,) if compact else ()))
    hostile = st.one_of(st.sampled_from(invalid), st.sampled_from(PROTOCOL_NAMES), st.text(max_size=12))
    fitting = [v for v in plausible if isinstance(v, str) and (compact or len(v.encode()) <= INT16_MAX)]
    return st.one_of(pick(fitting, hostile), hostile)


def hostile_ints(codec: type, plausible: list[int]) -> st.SearchStrategy[int]:
    """Plausible values of the field a third of the time; else edge values of the type
    (-1, 0, 1, min, max), anything, or small values."""
    lo, hi = INT_RANGES[codec]
    edges = sorted({v for v in (-1, 0, 1, lo, lo + 1, hi - 1, hi) if lo <= v <= hi})
    small = st.integers(max(lo, -2), min(hi, 16))
    fitting = [v for v in plausible if isinstance(v, int) and lo <= v <= hi]
    return st.one_of(pick(fitting, small), st.one_of(st.sampled_from(edges), st.integers(lo, hi)), small)


def hostile_records(plausible: Plausible) -> st.SearchStrategy[bytes | None]:
    """A real record batch (plain, idempotent or transactional under a seeded producer), an
    empty or truncated one, random bytes, or null."""
    def batch(count: int, producer_id: int, epoch: int, sequence: int, transactional: bool) -> bytes:
        records = [Record(i, 1_700_000_000_000 + i, b"k%d" % i, b"fuzz-%d" % i) for i in range(count)]
        return build_batch(records, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
                           is_transactional=transactional and producer_id >= 0)

    ids = st.one_of(st.sampled_from((-1, 0, 1)), pick(plausible.pool("producer"), st.just(0)))
    real = st.builds(batch, st.integers(1, 5), ids, st.sampled_from((-1, 0, 1)), st.sampled_from((-1, 0, 7)),
                     st.booleans())
    return st.one_of(real, real.map(lambda b: b[:len(b) // 2]), st.binary(max_size=80), st.just(b""),
                     st.none())


class RequestBuilder:
    """Draws one request of a given API and version, field by field, from the schema."""

    def __init__(self, draw, plausible: Plausible):
        self._draw = draw
        self._plausible = plausible
        self._bulk_used = False
        self._compact = False

    def request(self, key: int, version: int):
        cls = APIS[key].request
        self._compact = cls.flexible_version_q(version)
        return cls(version=version, **self._fields(cls._struct, version))

    def _fields(self, struct, version: int) -> dict:
        values = {}
        for field in struct._fields:
            if not field.for_version_q(version):
                continue
            if field.tagged_field_q(version) and not self._draw(st.booleans()):
                continue
            values[field.name] = self._value(field, struct.type_str, version)
        return values

    def _value(self, field, parent: str, version: int):
        nullable = field.nullable_for_version_q(version)
        if nullable and self._draw(st.integers(0, 9)) == 0:
            return None
        if not nullable and _null_encodable(field) and self._draw(st.integers(0, 49)) == 0:
            return None  # a null the schema forbids: Kafka closes the connection, as it does not parse
        if field.is_struct_array():
            return self._array(lambda: field.data_class(**self._fields(field.array_of, version)))
        if field.is_struct():
            return field.data_class(**self._fields(field, version))
        if field.is_array():
            return self._array(lambda: self._simple(field.array_of, parent, field.name, False))
        return self._simple(field, parent, field.name, nullable)

    def _array(self, element) -> list:
        """0-3 entries mostly; once per request, thousands of copies of one entry (duplicates)."""
        if not self._bulk_used and self._draw(st.integers(0, 24)) == 0:
            self._bulk_used = True
            return [element()] * BULK_ARRAY
        return [element() for _ in range(self._draw(st.integers(0, SMALL_ARRAY)))]

    def _simple(self, field, parent: str, name: str, nullable: bool):
        codec, draw, plausible = field._type, self._draw, self._plausible
        if codec in INT_RANGES:
            return draw(hostile_ints(codec, plausible.pool(kind_of(name))))
        if codec is Boolean:
            return draw(st.booleans())
        if codec is UUID:
            return draw(st.one_of(st.just(uuid.UUID(int=0)), st.uuids()))
        if codec is Float64:
            return draw(st.floats())
        if isinstance(codec, String):
            pool = FIELD_POOLS.get((parent, name))
            strings = hostile_strings(plausible.pool(kind_of(name)), self._compact)
            return draw(st.one_of(st.sampled_from(pool), strings) if pool else strings)
        if codec is Bytes and field.type_str == "records":
            return draw(hostile_records(plausible))
        if codec is Bytes:
            topics = plausible.pool("topic")
            subscription = st.lists(pick(topics, st.just("t")), max_size=2).map(consumer_subscription)
            choices = st.one_of(subscription, st.binary(max_size=40), st.just(b""))
            return draw(st.one_of(choices, st.none()) if nullable else choices)
        raise TypeError(f"no strategy for {field!r}")


def _null_encodable(field) -> bool:
    """Whether the wire has a null for `field` (a -1 length) though its schema may forbid one."""
    return field.is_array() or field.type_str in ("string", "bytes", "records")


@st.composite
def requests(draw, plausible: Plausible, keys: Sequence[int] = tuple(sorted(APIS))):
    """(api key, version, request body) for any implemented API at any served version."""
    key = draw(st.sampled_from(keys))
    spec = APIS[key]
    version = draw(st.integers(spec.min_version, spec.max_version))
    return key, version, RequestBuilder(draw, plausible).request(key, version)

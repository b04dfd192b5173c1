"""The three compiled walkers of the v2 record grammar agree with the plain-Python reference
(records.record_grammar) on valid and damaged record bodies: same verdict, same status, same
place, as aiokafka checks its compiled records against `_MemoryRecordsPy`."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from compaction import _kernels as cleaner_kernels
from logstore import _kernels as validator_kernels
from logstore.records import Record, build_batch
from logstore.records import _kernels as codec_kernels
from logstore.records.header import V2_HEADER_SIZE
from logstore.records.record_grammar import MIN_RECORD_BODY, OK, walk_records

_bytes = st.none() | st.binary(max_size=20)
_records = st.lists(st.tuples(st.integers(-2**40, 2**40), _bytes, _bytes,
                              st.lists(st.tuples(st.text(max_size=4), _bytes), max_size=3)),
                    min_size=1, max_size=6)


@st.composite
def bodies(draw) -> tuple[bytes, int]:
    """(record bytes of one uncompressed batch, its record count), often damaged: bytes flipped,
    set to small varints, cut, inserted or dropped; or the count changed."""
    fields = draw(_records)
    records = [Record(i, 1_700_000_000_000 + ts, key, value, tuple(headers))
               for i, (ts, key, value, headers) in enumerate(fields)]
    body = bytearray(build_batch(records)[V2_HEADER_SIZE:])
    count = len(records)
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(body)))
        kind = draw(st.sampled_from(["flip", "small", "cut", "insert", "drop", "count"]))
        if kind == "flip" and at < len(body):
            body[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "small" and at < len(body):
            body[at] = draw(st.sampled_from([0x00, 0x01, 0x03, 0x0A, 0x0B, 0x7F, 0x80, 0xFF]))
        elif kind == "cut":
            del body[at:]
        elif kind == "insert":
            body[at:at] = draw(st.binary(min_size=1, max_size=3))
        elif kind == "drop":
            del body[at:at + draw(st.integers(1, 3))]
        elif kind == "count":
            count = draw(st.integers(0, count + 2))
    return bytes(body), count


def cleaner_walk(buf: np.ndarray, count: int) -> bool:
    """compaction's scan_records over one batch body: True when it accepts it."""
    one = lambda value: np.array([value], np.int64)  # noqa: E731
    columns = [np.empty(count, np.int64) for _ in range(8)] + [np.empty(count, np.uint64) for _ in range(2)]
    return cleaner_kernels.scan_records(buf, one(0), one(len(buf)), one(count), one(0), one(0), one(-1),
                                        *columns) < 0


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies())
@example((bytes([2 * 5]) + bytes(5), 1))  # a body one byte below the minimum, fields that fit it
@example((bytes([2 * MIN_RECORD_BODY, 0, 0, 0, 1, 1, 6]), 1))  # three headers in one byte
def test_compiled_walkers_agree_with_the_reference(body_and_count):
    body, count = body_and_count
    buf = np.frombuffer(body, np.uint8)
    reference = walk_records(body, 0, len(body), count)
    status, at, _headers, _arrays = codec_kernels.decode_records(buf, 0, len(body), count)
    assert (status, at) == (reference.status, reference.field_position)
    assert cleaner_walk(buf, count) == (reference.status == OK)
    validating = walk_records(body, 0, len(body), count, check_offset_delta=True)
    status, at, *_ = validator_kernels._scan_records(buf, 0, len(body), count, 0)
    assert (status, at) == (validating.status, validating.record_position)


@given(_records)
def test_the_reference_reads_back_what_the_builder_wrote(fields):
    records = [Record(i, 1_700_000_000_000 + ts, key, value, tuple(headers))
               for i, (ts, key, value, headers) in enumerate(fields)]
    body = build_batch(records)[V2_HEADER_SIZE:]
    walk = walk_records(body, 0, len(body), len(records), check_offset_delta=True)
    assert walk.status == OK and walk.field_position == len(body)
    assert [(r.offset_delta, r.timestamp_delta, r.key_length, r.value_length, r.header_count)
            for r in walk.records] == [
        (i, ts - fields[0][0], -1 if key is None else len(key), -1 if value is None else len(value),
         len(headers)) for i, (ts, key, value, headers) in enumerate(fields)]

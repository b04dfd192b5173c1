"""The leader's common append in one compiled call: validate and stamp the batches (the
validator's kernel), apply the roll rule and append them to the active segment (the segment's
kernels), so a 16 KiB producer batch costs one Python-to-numba call, its CRC included.

Only the plain case is finished here: one batch filling the buffer with a matching CRC, no
producer id, no timestamp to rewrite, an epoch the cache already holds, no roll. Anything
else comes back validated but unwritten, for Log's general path to finish.
"""

from __future__ import annotations

import numpy as np
from numba import literal_unroll, njit, types

from logstore import _kernels
from logstore import _segment_kernels as segment_kernels
from logstore.config import LogConfig
from logstore.log_validator import LeaderChecks
from logstore.records import crc32c, native_crc
from logstore.records.header import (
    ATTRIBUTES_OFFSET,
    LOG_OVERHEAD,
    SIZE_FIELD,
    SIZE_OFFSET,
    V2_HEADER_SIZE,
)
from logstore.segment import LogSegment

# What append() did: the first value of its result. WRITTEN is followed by the last offset, the
# max timestamp, its offset and the record count; FAILED by the segment kernel's status and
# value and the last offset; NOT_WRITTEN by zeros, the validator's result being in the `validated` array.
WRITTEN = 0
NOT_WRITTEN = 1  # validated (or failed validation) only: the general path takes over
FAILED = 2  # the segment append failed after validation: raise the segment's error
# The `validated` array: the validator's result (logstore._kernels.leader_batches), then
# whether the kernel checked the single batch's CRC and found it matching (1) or not (0).
CRC_CHECKED = 11
VALIDATED_FIELDS = 12

# The limits array: a topic config's validation and roll limits.
_TARGET_CODE, _MAX_MESSAGE_BYTES, _FLAGS, _BEFORE_MAX, _AFTER_MAX, _SEGMENT_BYTES, _MAX_SEGMENT_MS = range(7)


def limits(checks: LeaderChecks, segment_bytes: int, max_segment_ms: int) -> np.ndarray:
    """A config's limits as the kernel reads them (kept by Log per config)."""
    return np.array([checks.target_code, checks.max_message_bytes, checks.flags, checks.before_max_ms,
                     checks.after_max_ms, segment_bytes, max_segment_ms], np.int64)


def append(data: np.ndarray, size: int, table: np.ndarray, validated: np.ndarray, config_limits: np.ndarray,
           segment: LogSegment, first_offset: int, leader_epoch: int, client: bool, now_ms: int,
           epoch_known: bool) -> tuple[int, int, int, int, int]:
    """Validate the first `size` bytes of `data` (a writable uint8 array of batches), stamped
    in place from `first_offset`, and in the plain case write them to `segment`.
    `epoch_known`: the epoch cache already starts `leader_epoch` at or before `first_offset`.
    Returns five ints, WRITTEN/NOT_WRITTEN/FAILED first (see there); the validator's result
    goes to `validated` (VALIDATED_FIELDS int64s). Five ints, not the validator's whole
    tuple: boxing each returned value costs the call."""
    address = native_crc.ADDRESS
    if address:
        crc = -1  # the kernel computes it
    else:
        single = size >= V2_HEADER_SIZE and SIZE_FIELD.unpack_from(data, SIZE_OFFSET)[0] + LOG_OVERHEAD == size
        crc = crc32c(data[ATTRIBUTES_OFFSET:size]) if single else -1
    state, offset_index, time_index = segment.compiled_append_arrays()
    return (_compiled or _compile())(data, size, table, validated, config_limits, state, offset_index, time_index,
                                     first_offset, leader_epoch, client, now_ms, address, crc, epoch_known)


_BYTES = types.Array(types.uint8, 1, "C")
_INT64S = types.Array(types.int64, 1, "C")
# _append's argument types as append() builds them (writable contiguous arrays, ints, bools).
_SIGNATURE = (_BYTES, types.int64, types.Array(types.int64, 2, "C"), _INT64S, _INT64S, _INT64S, _BYTES, _BYTES,
              types.int64, types.int64, types.boolean, types.int64, types.int64, types.int64, types.boolean)
_compiled = None


def _compile():
    """_append compiled (or loaded from numba's cache) for _SIGNATURE, as a plain function.
    Calling it skips numba's typing of all 15 arguments on every call, a third of the call's
    cost; it converts them to these types instead, which is right because append() builds
    every argument with exactly these types."""
    global _compiled
    _compiled = _append.compile(_SIGNATURE)
    return _compiled


@njit(cache=True, nogil=True)
def _append(data, size, table, validated, limits, state, offset_index, time_index, first_offset, leader_epoch, client,
            now, crc_address, crc, epoch_known):
    buf = data[:size]
    flags = limits[_FLAGS] | _kernels.CLIENT if client else limits[_FLAGS]
    result = _kernels.leader_batches(buf, table, limits[_TARGET_CODE], first_offset, leader_epoch,
                                     limits[_MAX_MESSAGE_BYTES], flags, now, limits[_BEFORE_MAX], limits[_AFTER_MAX])
    # result: status, row, value, at, last offset, max timestamp, its offset, record count,
    # any producer id, any max timestamp to rewrite, rows
    field = 0
    for value in literal_unroll(result):
        validated[field] = value
        field += 1  # noqa: SIM113 (numba's literal_unroll cannot be enumerated)
    crc_checked = False
    if result[0] == _kernels.OK and result[10] == 1:  # one batch, spanning the buffer
        if crc_address:
            crc = native_crc.crc32c_of(crc_address, buf, ATTRIBUTES_OFFSET, size)
        crc_checked = crc == table[0, _kernels.CRC]
    validated[CRC_CHECKED] = crc_checked
    if (not crc_checked or result[8] or result[9] or flags & _kernels.LOG_APPEND_TIME or not epoch_known
            or size > limits[_SEGMENT_BYTES]):
        return NOT_WRITTEN, 0, 0, 0, 0
    if segment_kernels.should_roll(state, limits[_SEGMENT_BYTES], limits[_MAX_SEGMENT_MS], size, result[5], result[4],
                                   now) != segment_kernels.OK:
        return NOT_WRITTEN, 0, 0, 0, 0
    status, value = segment_kernels.append(state, offset_index, time_index, buf, size, result[4], result[5],
                                           result[6], segment_kernels.WRITE)
    if status == segment_kernels.NOT_READY:
        return NOT_WRITTEN, 0, 0, 0, 0
    if status != segment_kernels.OK:
        return FAILED, status, value, result[4], 0
    return WRITTEN, result[4], result[5], result[6], result[7]


def max_segment_ms(config: LogConfig) -> int:
    """The age at which the active segment rolls: segment.ms, or for a compacted topic
    max.compaction.lag.ms when lower (Kafka's UnifiedLog.maxSegmentMs)."""
    if config.compact and config.max_compaction_lag_ms > 0:
        return min(config.max_compaction_lag_ms, config.segment_ms)
    return config.segment_ms


def append_reads(config: LogConfig) -> tuple[LeaderChecks, int, np.ndarray]:
    """What appends read of a config, read once per config (its properties cost more than a
    small batch's validation): the leader checks, the roll age, the compiled append's limits."""
    checks = LeaderChecks.of(config)
    roll_age = max_segment_ms(config)
    return checks, roll_age, limits(checks, config.segment_bytes, roll_age)

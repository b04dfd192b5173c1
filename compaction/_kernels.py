"""numba kernels for the cleaner's per-record loops: key hashing, the offset map, record scans.

Everything here works on flat numpy arrays so the Python side stays per batch.
Byte layouts follow docs/FORMAT.md ("Record batch, magic 2" and "Record").
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.core import event

from logstore.records import native_crc
from logstore.records._kernels import (  # _memcpy: llvm.memcpy, where numba's slice copies go byte by byte
    MIN_HEADER_SIZE,
    MIN_RECORD_BODY,
    _memcpy,
    read_zigzag,
    write_zigzag,
    zigzag_size,
)
from logstore.records.header import ATTRIBUTES_OFFSET, CRC_OFFSET

# Why a record was dropped (per record, int8). KEPT for records that stay.
KEPT = 0
DUPLICATE = 1  # a later record has the same key
TOMBSTONE_EXPIRED = 2  # a tombstone past its batch's delete horizon
ABORTED = 3  # data of an aborted transaction
MARKER_EXPIRED = 4  # a transaction marker whose data is gone and whose horizon passed
KEYLESS = 5  # a record without a key in the cleaned range

EMPTY_SLOT = np.uint32(0)  # an unused offset-map slot; slots store relative offset + 1

# Time spent holding numba's compiler lock: compiling kernels or loading them from the cache.
_KERNEL_LOADING = event.TimingListener()
event.register("numba:compiler_lock", _KERNEL_LOADING)


def kernel_loading_seconds() -> float:
    """Seconds this process has spent compiling numba kernels (any package's) or loading them
    from numba's cache, so reported timings can leave that one-off cost out."""
    return _KERNEL_LOADING.duration if _KERNEL_LOADING.done else 0.0


_C1 = np.uint64(0x87C37B91114253D5)
_C2 = np.uint64(0x4CF5AD432745937F)
_FMIX1 = np.uint64(0xFF51AFD7ED558CCD)
_FMIX2 = np.uint64(0xC4CEB9FE1A85EC53)
_M5 = np.uint64(5)
_N1 = np.uint64(0x52DCE729)
_N2 = np.uint64(0x38495AB5)
_NULL_KEY = np.int64(-1)


@njit(cache=True, inline="always")
def _rotl(x, r):
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@njit(cache=True, inline="always")
def _fmix(k):
    k ^= k >> np.uint64(33)
    k *= _FMIX1
    k ^= k >> np.uint64(33)
    k *= _FMIX2
    k ^= k >> np.uint64(33)
    return k


@njit(cache=True, inline="always")
def _le64(buf, p):
    v = np.uint64(0)
    for i in range(8):
        v |= np.uint64(buf[p + i]) << np.uint64(8 * i)
    return v


@njit(cache=True)
def murmur3_128(buf, start, length):
    """MurmurHash3 x64 128 (seed 0) of buf[start:start+length]; the same value as mmh3.hash64."""
    h1 = np.uint64(0)
    h2 = np.uint64(0)
    nblocks = length // 16
    for b in range(nblocks):
        p = start + b * 16
        k1 = _le64(buf, p)
        k2 = _le64(buf, p + 8)
        k1 *= _C1
        k1 = _rotl(k1, 31)
        k1 *= _C2
        h1 ^= k1
        h1 = _rotl(h1, 27)
        h1 += h2
        h1 = h1 * _M5 + _N1
        k2 *= _C2
        k2 = _rotl(k2, 33)
        k2 *= _C1
        h2 ^= k2
        h2 = _rotl(h2, 31)
        h2 += h1
        h2 = h2 * _M5 + _N2
    tail = start + nblocks * 16
    rem = length & 15
    k1 = np.uint64(0)
    k2 = np.uint64(0)
    if rem > 8:
        for i in range(rem - 1, 7, -1):
            k2 ^= np.uint64(buf[tail + i]) << np.uint64(8 * (i - 8))
        k2 *= _C2
        k2 = _rotl(k2, 33)
        k2 *= _C1
        h2 ^= k2
    if rem > 0:
        for i in range(min(rem, 8) - 1, -1, -1):
            k1 ^= np.uint64(buf[tail + i]) << np.uint64(8 * i)
        k1 *= _C1
        k1 = _rotl(k1, 31)
        k1 *= _C2
        h1 ^= k1
    h1 ^= np.uint64(length)
    h2 ^= np.uint64(length)
    h1 += h2
    h2 += h1
    h1 = _fmix(h1)
    h2 = _fmix(h2)
    h1 += h2
    h2 += h1
    return h1, h2


@njit(cache=True, inline="always")
def _slot(h, slots):
    """Home slot of hash h in a table of `slots` (< 2**32) slots: the high 32 bits scaled to
    the table (a multiply and a shift, where a modulo would divide)."""
    return np.int64(((h >> np.uint64(32)) * np.uint64(slots)) >> np.uint64(32))


@njit(cache=True)
def map_put(h1s, h2s, rels, size, max_size, k1, k2, offsets, base_offset, valid, slot_out):
    """Insert (hash -> offset) in order, Kafka-style: stop before a put once size >= max_size.

    Returns (number of input rows consumed, new size, last offset put or -1). Rows with
    valid == False are skipped. An offset outside the map's 32-bit window also stops the
    fill (the map counts as full). A non-empty slot_out receives the slot of each row put.
    """
    slots = h1s.shape[0]
    last_put = np.int64(-1)
    n = k1.shape[0]
    for i in range(n):
        if not valid[i]:
            continue
        if size >= max_size or size >= slots - 1:  # a table never fills: probes must end
            return i, size, last_put
        rel = offsets[i] - base_offset
        if rel < 0 or rel >= np.int64(0xFFFFFFFF):
            return i, size, last_put
        stored = np.uint32(rel + 1)
        a = k1[i]
        b = k2[i]
        pos = _slot(a, slots)
        while True:
            if rels[pos] == EMPTY_SLOT:
                h1s[pos] = a
                h2s[pos] = b
                rels[pos] = stored
                size += 1
                break
            if h1s[pos] == a and h2s[pos] == b:
                rels[pos] = stored
                break
            pos += 1
            if pos == slots:
                pos = 0
        if slot_out.shape[0]:
            slot_out[i] = pos
        last_put = offsets[i]
    return n, size, last_put


@njit(cache=True)
def map_get(h1s, h2s, rels, k1, k2, base_offset, out, known_slots):
    """Look up every hash; out[i] = mapped offset or -1 when absent. A non-empty known_slots
    gives the slot row i was put in since the map was cleared (-1: not put), read directly."""
    slots = h1s.shape[0]
    known = known_slots.shape[0] > 0
    for i in range(k1.shape[0]):
        if known and known_slots[i] >= 0:
            out[i] = base_offset + np.int64(rels[known_slots[i]]) - 1
            continue
        a = k1[i]
        b = k2[i]
        pos = _slot(a, slots)
        out[i] = -1
        while rels[pos] != EMPTY_SLOT:
            if h1s[pos] == a and h2s[pos] == b:
                out[i] = base_offset + np.int64(rels[pos]) - 1
                break
            pos += 1
            if pos == slots:
                pos = 0


@njit(cache=True)
def decide_records(batch_index, offsets, has_key, is_tombstone, found, latest_offset,
                   retain_deletes, discard, is_control, keep, reason, kept, kept_tombstone, total):
    """Per record: keep it or give the reason code for dropping it, and per batch
    count records, kept records and whether a kept one is a tombstone.

    found[i] is the offset map's offset for record i's key (-1: absent); retain_deletes,
    discard and is_control are per batch. kept, kept_tombstone and total must start zeroed.
    """
    for i in range(offsets.shape[0]):
        b = batch_index[i]
        total[b] += 1
        latest_for_key = offsets[i] >= found[i]
        if discard[b]:
            keep[i] = False
            reason[i] = MARKER_EXPIRED if is_control[b] else ABORTED
            continue
        keep[i] = is_control[b] or offsets[i] > latest_offset or (
            has_key[i] and latest_for_key and (not is_tombstone[i] or retain_deletes[b]))
        if keep[i]:
            reason[i] = KEPT
            kept[b] += 1
            if is_tombstone[i]:
                kept_tombstone[b] = True
        elif not has_key[i]:
            reason[i] = KEYLESS
        elif not latest_for_key:
            reason[i] = DUPLICATE
        else:
            reason[i] = TOMBSTONE_EXPIRED


@njit(cache=True)
def scan_records(buf, body_starts, body_ends, counts, base_offsets, base_timestamps,
                 log_append_times, rec_start, rec_end, offsets, timestamps, key_starts,
                 key_lengths, value_lengths, batch_index, key_hash1, key_hash2):
    """Decode the record framing of v2 batch bodies into columns (no copies of keys/values),
    refusing what records.record_grammar refuses.

    Each key is hashed (murmur3_128; a null key as (0, 0)) while its bytes are in cache.

    Batch b's records lie in buf[body_starts[b]:body_ends[b]]; its columns start at row
    sum(counts[:b]). log_append_times[b] >= 0 overrides record timestamps (LogAppendTime).
    Returns -1 on success, else the index of the first malformed batch.
    """
    row = 0
    for b in range(body_starts.shape[0]):
        p = np.int64(body_starts[b])
        end = np.int64(body_ends[b])
        for _ in range(counts[b]):
            length, q = read_zigzag(buf, p, end, 5)
            if q < 0 or length < MIN_RECORD_BODY or length > end - q:
                return b
            stop = q + length
            q += 1  # attributes
            ts_delta, q = read_zigzag(buf, q, stop, 10)
            if q < 0:
                return b
            off_delta, q = read_zigzag(buf, q, stop, 5)
            if q < 0:
                return b
            klen, q = read_zigzag(buf, q, stop, 5)
            if q < 0 or klen < -1 or klen > stop - q:
                return b
            kstart = q
            if klen > 0:
                q += klen
            vlen, q = read_zigzag(buf, q, stop, 5)
            if q < 0 or vlen < -1 or vlen > stop - q:
                return b
            if vlen > 0:
                q += vlen
            headers, q = read_zigzag(buf, q, stop, 5)
            if q < 0 or headers < 0 or headers > (stop - q) // MIN_HEADER_SIZE:
                return b
            for _ in range(headers):
                n, q = read_zigzag(buf, q, stop, 5)
                if q < 0 or n < 0 or n > stop - q:
                    return b
                q += n
                n, q = read_zigzag(buf, q, stop, 5)
                if q < 0 or n < -1 or n > stop - q:
                    return b
                if n > 0:
                    q += n
            if q != stop:
                return b
            rec_start[row] = p
            rec_end[row] = stop
            offsets[row] = base_offsets[b] + off_delta
            if log_append_times[b] >= 0:
                timestamps[row] = log_append_times[b]
            else:
                timestamps[row] = base_timestamps[b] + ts_delta
            key_starts[row] = kstart
            key_lengths[row] = klen if klen >= 0 else -1
            if klen >= 0:
                key_hash1[row], key_hash2[row] = murmur3_128(buf, kstart, klen)
            else:
                key_hash1[row] = np.uint64(0)
                key_hash2[row] = np.uint64(0)
            value_lengths[row] = vlen if vlen >= 0 else -1
            batch_index[row] = b
            row += 1
            p = stop
        if p != end:
            return b
    return -1


@njit(cache=True)
def rewrite_records(buf, rec_start, rec_end, new_ts_deltas, gaps, out, out_end, write):
    """Lay records out with a new timestampDelta each (rest of the record unchanged),
    leaving gaps[i] bytes free before record i (room for a batch header).

    out_end[i] receives the end of record i in the layout; returns the bytes it spans. With
    `write` the records are copied into out, which must have room for the records' lengths +
    gaps + 20 bytes per record; without, only the ends are computed (a size count). A record
    whose delta does not change keeps its bytes: back-to-back runs of those are copied whole.
    """
    w = 0
    run_src = 0  # the open run of unchanged records: buf[run_src:run_src + run_len] -> out[run_dst:]
    run_dst = 0
    run_len = 0
    for i in range(rec_start.shape[0]):
        p = np.int64(rec_start[i])
        end = np.int64(rec_end[i])
        _, q = read_zigzag(buf, p, end, 5)
        body = q  # attributes byte
        old_delta, after_ts = read_zigzag(buf, body + 1, end, 10)
        same = old_delta == new_ts_deltas[i]
        if run_len and (gaps[i] or not same or run_src + run_len != p):
            if write:
                _memcpy(out, run_dst, buf, run_src, run_len)
            run_len = 0
        w += gaps[i]
        if same:
            if not run_len:
                run_src, run_dst = p, w
            run_len += end - p
            w += end - p
        else:
            rest = end - after_ts
            new_len = 1 + zigzag_size(new_ts_deltas[i]) + rest
            if write:
                w = write_zigzag(out, w, new_len)
                out[w] = buf[body]
                w += 1
                w = write_zigzag(out, w, new_ts_deltas[i])
                _memcpy(out, w, buf, after_ts, rest)
                w += rest
            else:
                w += zigzag_size(new_len) + new_len
        out_end[i] = w
    if run_len and write:
        _memcpy(out, run_dst, buf, run_src, run_len)
    return w


@njit(cache=True)
def stamp_crcs(address, buf, batch_start, batch_end):
    """Write each v2 batch's CRC-32C (of its bytes from the attributes on) into its header, for
    the batches at buf[batch_start[k]:batch_end[k]]; `address` is native_crc.ADDRESS (not 0)."""
    for k in range(batch_start.shape[0]):
        crc = native_crc.crc32c_of(address, buf, batch_start[k] + ATTRIBUTES_OFFSET, batch_end[k])
        at = batch_start[k] + CRC_OFFSET
        for i in range(4):
            buf[at + i] = np.uint8((crc >> np.int64(24 - 8 * i)) & 0xFF)


@njit(cache=True)
def walk_entries(buf, start, end, out_pos, out_size, fill):
    """Walk log entries (int64 offset, int32 size, ...) in buf[start:end].

    Returns (count of complete entries, byte position where they end); fills out_pos/out_size
    when `fill` is set (call once without to size the arrays).
    """
    p = np.int64(start)
    count = 0
    while p + 12 <= end:
        size = np.int64(0)
        for i in range(4):
            size = (size << 8) | np.int64(buf[p + 8 + i])
        if size >= 0x80000000:
            size -= 0x100000000
        size += 12
        if size < 26 or p + size > end:
            break
        if fill:
            out_pos[count] = p
            out_size[count] = size
        count += 1
        p += size
    return count, p

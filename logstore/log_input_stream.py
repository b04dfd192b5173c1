"""Walking the entries of a `.log` file by their size fields (Kafka's FileLogInputStream): each
entry's header is parsed from chunks read with `pread`, never the whole file at once."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from logstore.errors import CorruptRecordError
from logstore.records import BatchHeader, read_batch_header
from logstore.records.header import (
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    RECORD_OVERHEAD_V0,
    SIZE_OFFSET,
    V2_HEADER_SIZE,
)

# Bytes read per pread while scanning: small for header-only scans (a few batches between
# index entries), larger for recovery, which reads every batch in full.
HEADER_SCAN_CHUNK = 16 * 1024
FULL_SCAN_CHUNK = 1024 * 1024


def scan_entries(
    read_bytes: Callable[[int, int], bytes], end: int, start: int, *, full: bool,
    max_entry_size: int | None = None, path: str | None = None,
) -> Iterator[tuple[int, BatchHeader, bytes, int]]:
    """Yield (position, header, buffer, offset in buffer) for each entry in [start, end).

    `read_bytes(position, size)` reads the file. With `full` the whole entry is in the buffer,
    else at least its header. Stops at a torn tail (an entry running past `end`), like Kafka's
    FileLogInputStream; raises CorruptRecordError naming `path` for an impossible size or magic.
    """
    chunk = FULL_SCAN_CHUNK if full else HEADER_SCAN_CHUNK
    buf, buf_start = b"", start
    position = start
    while position + HEADER_SIZE_UP_TO_MAGIC < end:
        off = position - buf_start
        if off + HEADER_SIZE_UP_TO_MAGIC > len(buf):
            buf, buf_start, off = read_bytes(position, chunk), position, 0
        size_field = int.from_bytes(buf[off + SIZE_OFFSET : off + LOG_OVERHEAD], "big", signed=True)
        if size_field < RECORD_OVERHEAD_V0:
            raise CorruptRecordError(
                f"entry size {size_field} is smaller than the minimum {RECORD_OVERHEAD_V0}",
                position=position, path=path)
        entry_size = size_field + LOG_OVERHEAD
        if max_entry_size is not None and entry_size > max_entry_size:
            raise CorruptRecordError(
                f"entry size {entry_size} is larger than the maximum {max_entry_size}",
                position=position, path=path)
        if position > end - entry_size:
            return
        need = entry_size if full else min(entry_size, V2_HEADER_SIZE)
        if off + need > len(buf):
            buf, buf_start, off = read_bytes(position, max(chunk, need)), position, 0
        try:
            header = read_batch_header(buf, off)
        except CorruptRecordError as exc:
            raise CorruptRecordError(exc.detail, position=position, path=path) from exc
        yield position, header, buf, off
        position += entry_size

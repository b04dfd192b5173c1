"""Small builders shared by the Log, LogLoader and LogValidator tests."""

from logstore import Log, Record
from logstore.records import build_batch
from logstore.segment import LogSegment
from logstore.segment_options import SegmentOptions
from tests.support.clock import NOW


def open_log(tmp_path, clock, **config):
    return Log.open(tmp_path / "t-0", config, clock=clock)


def batch(n=3, *, ts=NOW, key=b"k", value=b"v" * 10, base_offset=0, **kw):
    records = [Record(base_offset + i, ts + i, key, value) for i in range(n)]
    return build_batch(records, base_offset=base_offset, **kw)


def offsets(log):
    return [r.offset for r in log.records()]


def cleaned_copy(log, old):
    """A `.cleaned` segment holding the batches of `old`, as the cleaner leaves it before a swap."""
    new = LogSegment.create(log.dir, old[0].base_offset, SegmentOptions(file_suffix=".cleaned"))
    for seg in old:
        for b in seg.iter_batches():
            new.append_batches(bytes(b.view))
    new.flush()
    new.on_become_inactive_segment()
    return new


def log_with_cleaned_copy(log):
    """Append six one-record batches to `log` (opened with segment.bytes 200) and return the
    first two segments, the log's offsets and a `.cleaned` copy of the two segments."""
    for _ in range(6):
        log.append(batch(1))
    old = log.segments[:2]
    return old, offsets(log), cleaned_copy(log, old)

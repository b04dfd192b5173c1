"""Atomic text checkpoint files in Kafka's format (docs/FORMAT.md "Checkpoint files").

    <version>
    <entry count>
    <entry>            one per line, fields separated by a single space

Writes are crash-ordered: write a `.tmp` sibling, flush, fsync, rename over the target, fsync
the directory. Readers check the version, the count and every field, and name the file and line.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from logstore.config import LONG_MAX, LONG_MIN, java_integer
from logstore.errors import CorruptCheckpointError

CHECKPOINT_VERSION = 0
# Fewer ASCII digits than this always fit a Java long (whose maximum has 19 digits).
_SURELY_LONG_DIGITS = 19
TMP_SUFFIX = ".tmp"

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
#: Every per-data-directory `topic partition offset` checkpoint Kafka keeps.
OFFSET_CHECKPOINTS = (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
                      CLEANER_OFFSET_CHECKPOINT)


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """fsync a directory so renames and creations inside it survive a crash."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace `path` with `data` so a crash leaves either the old or the new file, never a mix."""
    target = Path(path)
    tmp = target.with_name(target.name + TMP_SUFFIX)
    with open(tmp, "wb") as f:
        f.write(data)  # write
        f.flush()  # flush Python's buffer to the OS
        os.fsync(f.fileno())  # fsync the bytes
    os.replace(tmp, target)  # rename over the target (atomic on POSIX)
    fsync_dir(target.parent)  # fsync the directory entry


def write_checkpoint(
    path: str | os.PathLike[str], entries: Iterable[Sequence[Any]], version: int = CHECKPOINT_VERSION
) -> None:
    """Atomically write a checkpoint file whose entries are tuples of fields."""
    lines = [" ".join(str(field) for field in entry) for entry in entries]
    text = f"{version}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)
    atomic_write(path, text.encode("utf-8"))


def read_checkpoint(
    path: str | os.PathLike[str],
    fields: Sequence[Callable[[str], Any]],
    version: int = CHECKPOINT_VERSION,
) -> list[tuple[Any, ...]]:
    """Read a checkpoint file, converting each entry's fields with `fields` (e.g. `(str, int, int)`).

    Integer fields are read as Java longs. A missing file reads as no entries; a malformed one
    raises CorruptCheckpointError naming the line.
    """
    p = path
    try:
        with open(path, "rb") as file:
            text = file.read().decode("utf-8")
    except FileNotFoundError:
        return []
    except UnicodeDecodeError as exc:
        raise CorruptCheckpointError(f"{p}: not UTF-8 text ({exc})") from None
    lines = text.replace("\r\n", "\n").split("\n")  # Java's readLine takes either ending
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        raise CorruptCheckpointError(f"{p}: truncated checkpoint (expected a version and a count line)")
    found_version = _int_field(p, 1, lines[0], "version")
    if found_version != version:
        raise CorruptCheckpointError(f"{p} line 1: unsupported version {found_version} (expected {version})")
    count = _int_field(p, 2, lines[1], "entry count")
    body = lines[2:]
    if count != len(body):
        raise CorruptCheckpointError(f"{p} line 2: expected {count} entries but found {len(body)}")
    converters = [_long if conv is int else conv for conv in fields]
    entries = []
    for number, line in enumerate(body, start=3):
        parts = line.split(" ")
        if len(parts) != len(fields):
            raise CorruptCheckpointError(
                f"{p} line {number}: expected {len(fields)} fields, got {line!r}"
            )
        try:
            entries.append(tuple([conv(part) for conv, part in zip(converters, parts, strict=True)]))
        except ValueError:
            raise CorruptCheckpointError(f"{p} line {number}: malformed entry {line!r}") from None
    return entries


def _int_field(path: Path, number: int, line: str, what: str) -> int:
    try:
        return _long(line.strip())
    except ValueError:
        raise CorruptCheckpointError(f"{path} line {number}: malformed {what} {line!r}") from None


def _long(text: str) -> int:
    """Java's Long.parseLong: ASCII digits with an optional sign, within int64; else ValueError."""
    if len(text) < _SURELY_LONG_DIGITS and text.isdigit() and text.isascii():
        return int(text)  # every offset of a checkpoint: parsed without the general rules below
    value = java_integer(text)
    if not LONG_MIN <= value <= LONG_MAX:
        raise ValueError(f"out of the long range: {text!r}")
    return value


def _topic(text: str) -> str:
    if not text:
        raise ValueError("empty topic")
    return text


def read_offsets_checkpoint(path: str | os.PathLike[str]) -> dict[tuple[str, int], int]:
    """Read a per-data-directory `topic partition offset` checkpoint as {(topic, partition): offset}."""
    return {(t, p): o for t, p, o in read_checkpoint(path, (_topic, int, int))}


def write_offsets_checkpoint(
    path: str | os.PathLike[str], offsets: Mapping[tuple[str, int], int]
) -> None:
    """Atomically write {(topic, partition): offset} as a `topic partition offset` checkpoint."""
    write_checkpoint(path, [(t, p, o) for (t, p), o in sorted(offsets.items())])


_UPDATE_LOCK = threading.Lock()


def update_offsets_checkpoints(directory: str | os.PathLike[str], topic: str, partition: int,
                               values: dict[str, int]) -> None:
    """Set one partition's entry in several offsets checkpoints of `directory` (checkpoint
    name -> offset), keeping the other partitions' entries; safe across threads."""
    key = (topic, partition)
    with _UPDATE_LOCK:  # standalone logs of one data directory share these files
        for name, offset in values.items():
            path = Path(directory) / name
            offsets = read_offsets_checkpoint(path)
            offsets[key] = offset
            write_offsets_checkpoint(path, offsets)

"""The files and directories a Kafka broker leaves in a log directory besides segments: which
ones the operator tools check (meta.properties, partition.metadata, quorum-state, KRaft
snapshots) and the note for each they skip (a partition being deleted or moved, leftovers of an
interrupted clean, anything unknown). A broker directory never makes a tool crash."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from logstore.checkpoint import OFFSET_CHECKPOINTS
from logstore.epoch import CHECKPOINT_FILE_NAME as LEADER_EPOCH_CHECKPOINT
from logstore.errors import CorruptMetadataFileError
from logstore.lock import LOCK_FILE_NAME
from logstore.log_files import (
    BOOTSTRAP_SNAPSHOT,
    CHECKPOINT_SUFFIX,
    CLEAN_SHUTDOWN_FILE,
    CLEANED_SUFFIX,
    DELETE_DIR_SUFFIX,
    DELETED_SUFFIX,
    FUTURE_DIR_SUFFIX,
    STRAY_DIR_SUFFIX,
    SWAP_SUFFIX,
    is_partition_dir_name,
    parse_kraft_snapshot_name,
    parse_offset_file_name,
)
from logstore.meta_properties import META_PROPERTIES, parse_meta_properties
from logstore.partition_metadata import PARTITION_METADATA, parse_partition_metadata
from logstore.topic_configs import TOPIC_CONFIGS_FILE

PART_SUFFIX = ".part"
QUORUM_STATE = "quorum-state"

LEFTOVER_NOTES = {
    CHECKPOINT_SUFFIX + PART_SUFFIX: "a KRaft snapshot still being written (Kafka removes it on open)",
    CHECKPOINT_SUFFIX + DELETED_SUFFIX: "a KRaft snapshot awaiting deletion (Kafka removes it on open)",
    DELETED_SUFFIX: "a segment file awaiting deletion (Kafka removes it on open)",
    CLEANED_SUFFIX: "output of an interrupted clean (Kafka removes it on open)",
    SWAP_SUFFIX: "a segment swap a crash interrupted (Kafka completes or undoes it on open)",
}
DIR_NOTES = {
    DELETE_DIR_SUFFIX: "a partition Kafka is deleting",
    FUTURE_DIR_SUFFIX: "a future replica Kafka is moving to this directory",
    STRAY_DIR_SUFFIX: "a stray partition Kafka will remove",
}
UNKNOWN_FILE = "not a file Kafka's log layer writes; not checked"


def check_meta_properties(data: bytes) -> str | None:
    """The problem with a broker's `meta.properties` (Kafka's MetaProperties v0 or v1), or None."""
    try:
        parse_meta_properties(data)
    except CorruptMetadataFileError as exc:
        return exc.detail
    return None


def check_partition_metadata(data: bytes) -> str | None:
    """The problem with a `partition.metadata` file ("version: 0", "topic_id: <uuid>"), or None."""
    try:
        parse_partition_metadata(data)
    except CorruptMetadataFileError as exc:
        return exc.detail
    return None


def check_quorum_state(data: bytes) -> str | None:
    """The problem with a KRaft `quorum-state` file (a JSON object with its epoch), or None."""
    try:
        state = json.loads(data)
    except ValueError as exc:
        return f"not JSON: {exc}"
    if not isinstance(state, dict) or not isinstance(state.get("leaderEpoch"), int) \
            or not isinstance(state.get("data_version"), int):
        return "not a quorum state (no integer leaderEpoch and data_version)"
    return None


def check_topic_configs(path: Path) -> str | None:
    """The problem with logstore's stored topic configs next to `path`, or None."""
    from logstore.errors import InvalidConfigError
    from logstore.topic_configs import read_topic_configs

    try:
        read_topic_configs(path.parent)
    except InvalidConfigError as exc:
        return str(exc).removeprefix(f"{path}: ")
    return None


def check_kraft_snapshot(data: bytes) -> tuple[str, int | None] | None:
    """(problem, byte position) of a KRaft `.checkpoint` snapshot file, or None when every
    batch is sound and it opens with a snapshot header and closes with a footer."""
    from logstore.errors import CorruptRecordError
    from logstore.internal_topics import read_snapshot

    try:
        read_snapshot(data)
    except CorruptRecordError as exc:
        from logstore.cli._common import corruption_detail

        return corruption_detail(exc), exc.position
    return None


def is_kraft_snapshot(name: str) -> bool:
    """True for `<offset>-<epoch>.checkpoint` and `bootstrap.checkpoint`."""
    return name == BOOTSTRAP_SNAPSHOT or parse_kraft_snapshot_name(name) is not None


def root_file_note(name: str) -> str | None:
    """None for a file of a data directory's root the tools know, else the note for skipping it."""
    if name in (*OFFSET_CHECKPOINTS, META_PROPERTIES, BOOTSTRAP_SNAPSHOT, CLEAN_SHUTDOWN_FILE, LOCK_FILE_NAME,
                TOPIC_CONFIGS_FILE):
        return None
    return UNKNOWN_FILE


def partition_file_note(name: str) -> str | None:
    """None for a file of a partition directory the tools know, else the note for skipping it."""
    if parse_offset_file_name(name) is not None or is_kraft_snapshot(name) \
            or name in (LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA, QUORUM_STATE, LOCK_FILE_NAME):
        return None
    for suffix, note in LEFTOVER_NOTES.items():
        if name.endswith(suffix):
            return note
    return UNKNOWN_FILE


def dir_note(name: str) -> str:
    """The note for a directory of a data directory that is not a live partition."""
    for suffix, note in DIR_NOTES.items():
        if name.endswith(suffix):
            return note
    return "not a <topic>-<partition> directory"


def skipped_dirs(paths: Iterable[str | Path]) -> list[tuple[Path, str]]:
    """(directory, note) for each directory inside the data directories among `paths` that is
    not a live partition (`partition_dirs` leaves them out)."""
    skipped = []
    for raw in paths:
        path = Path(raw)
        if not path.is_dir() or is_partition_dir_name(path.resolve().name):
            continue
        skipped += [(child, dir_note(child.name)) for child in sorted(path.iterdir())
                    if child.is_dir() and not is_partition_dir_name(child.name)]
    return skipped


def note_skipped_dirs(paths: Iterable[str | Path]) -> None:
    """Say on stderr which directories of the data directories in `paths` a command skips."""
    import sys

    for path, note in skipped_dirs(paths):
        sys.stderr.write(f"logstore: note: skipped {path}: {note}\n")

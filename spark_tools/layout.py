"""Find partitions and their segment files under paths on any filesystem pyarrow can open.

A path may be a data directory (holding ``<topic>-<partition>`` directories and the root
checkpoint files), one partition directory, or one ``.log`` segment file. Only live segment
files count (``<20 digits>.log``); ``.deleted``, ``.cleaned`` and ``.swap`` files are work in
progress of a running engine and are not part of the log.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from os import PathLike, fspath
from pathlib import Path

import pyarrow.fs as pafs

from logstore.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    read_offsets_checkpoint,
)
from logstore.errors import InvalidTopicError, LogstoreError
from logstore.log_files import (
    CLEAN_SHUTDOWN_FILE,
    is_partition_dir_name,
    parse_partition_dir,
    segment_log_offset,
)

PathArg = str | PathLike[str]


@dataclass(frozen=True, slots=True)
class SegmentFile:
    """One live ``.log`` file: where it is, whose it is, its base offset and size in bytes."""

    path: str
    topic: str
    partition: int
    base_offset: int
    size: int
    mtime_ms: int


@dataclass(frozen=True, slots=True)
class PartitionFiles:
    """A partition's segments (ascending base offset) and its data directory's checkpoints.

    An offset is ``None`` when the data directory has no checkpoint entry for the partition;
    ``clean_shutdown`` says whether the data directory holds Kafka's clean-shutdown marker. The
    listing reads each data directory's files once, so a task never rereads a file that holds
    every partition's entry.
    """

    topic: str
    partition: int
    directory: str
    segments: tuple[SegmentFile, ...]
    log_start_offset: int | None = None
    high_watermark: int | None = None
    cleaner_checkpoint: int | None = None
    checkpoints_found: tuple[str, ...] = field(default=())
    recovery_point: int | None = None
    clean_shutdown: bool = False


# Hadoop's names for S3 (s3a:// from Spark and Hadoop configs, the old s3n://) are S3 to pyarrow.
_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3"}
_HDFS_HINT = ("hdfs:// needs Hadoop's libhdfs and a JVM: set JAVA_HOME, ARROW_LIBHDFS_DIR (or "
              "HADOOP_HOME) and CLASSPATH=$(hadoop classpath --glob)")


def redact(uri: str) -> str:
    """``uri`` without credentials: no ``user:secret@`` part and no query string (pyarrow takes
    keys and tokens there), so it can be printed and logged."""
    if "://" not in uri:
        return uri
    scheme, rest = uri.split("://", 1)
    rest = rest.split("?", 1)[0]
    authority, slash, tail = rest.partition("/")
    return f"{scheme}://{authority.rsplit('@', 1)[-1]}{slash}{tail}"


def resolve_filesystem(
    path: PathArg, filesystem: pafs.FileSystem | None = None
) -> tuple[pafs.FileSystem, str]:
    """The filesystem and the path inside it for a local path or a URI (``file://``, ``s3://``,
    ``s3a://``, ``gs://``, ``hdfs://``); credentials come from the environment or the URI.

    Raises LogstoreError (one line, credentials removed) for a URI pyarrow cannot open, naming
    what is missing for ``hdfs://``.
    """
    text = fspath(path)
    if filesystem is not None:
        return filesystem, text
    if "://" not in text:
        return pafs.LocalFileSystem(), str(Path(text).absolute())
    scheme, rest = text.split("://", 1)
    scheme = _SCHEME_ALIASES.get(scheme.lower(), scheme.lower())
    try:
        return pafs.FileSystem.from_uri(f"{scheme}://{rest}")
    except (OSError, ValueError) as exc:
        detail = str(exc).replace(text, redact(text)).strip().splitlines()
        cause = detail[0] if detail else type(exc).__name__
        if scheme == "hdfs":
            raise LogstoreError(f"{_HDFS_HINT} (pyarrow: {cause})") from None
        raise LogstoreError(f"cannot open {redact(text)}: {cause}") from None


def list_partitions(
    paths: PathArg | Sequence[PathArg], filesystem: pafs.FileSystem | None = None
) -> list[PartitionFiles]:
    """Every partition under ``paths`` with its live segment files, sorted by (topic, partition).

    Raises LogstoreError for a path that does not exist or holds no segment file.
    """
    if isinstance(paths, str | PathLike):
        paths = [paths]
    found: dict[tuple[str, int], dict[str, SegmentFile]] = {}
    dirs: dict[tuple[str, int], str] = {}
    fs_by_dir: dict[str, pafs.FileSystem] = {}
    for path in paths:
        fs, root = resolve_filesystem(path, filesystem)
        segments = list(_segments_under(fs, root))
        if not segments:
            raise LogstoreError(f"no segment files (<base offset>.log) under {redact(fspath(path))}")
        for seg in segments:
            key = (seg.topic, seg.partition)
            directory = parent_path(seg.path)
            previous = dirs.setdefault(key, directory)
            if previous != directory:
                raise LogstoreError(
                    f"partition {seg.topic}-{seg.partition} found in two directories: "
                    f"{previous} and {directory}"
                )
            found.setdefault(key, {})[seg.path] = seg
            fs_by_dir[directory] = fs
    data_dirs = {parent_path(d): fs_by_dir[d] for d in dirs.values()}
    checkpoints = _checkpoints(data_dirs)
    clean = {d for d, fs in data_dirs.items()
             if fs.get_file_info(join_path(d, CLEAN_SHUTDOWN_FILE)).type == pafs.FileType.File}
    result = []
    for key in sorted(found):
        directory = dirs[key]
        data_dir = parent_path(directory)
        per_file = checkpoints.get(data_dir, {})
        result.append(
            PartitionFiles(
                topic=key[0],
                partition=key[1],
                directory=directory,
                segments=tuple(sorted(found[key].values(), key=lambda s: s.base_offset)),
                log_start_offset=per_file.get(LOG_START_OFFSET_CHECKPOINT, {}).get(key),
                high_watermark=per_file.get(REPLICATION_OFFSET_CHECKPOINT, {}).get(key),
                cleaner_checkpoint=per_file.get(CLEANER_OFFSET_CHECKPOINT, {}).get(key),
                checkpoints_found=tuple(sorted(per_file)),
                recovery_point=per_file.get(RECOVERY_POINT_CHECKPOINT, {}).get(key),
                clean_shutdown=data_dir in clean,
            )
        )
    return result


def join_path(directory: str, name: str) -> str:
    """``directory/name`` for filesystem paths (just ``name`` at the root)."""
    return f"{directory}/{name}" if directory else name


def parent_path(path: str) -> str:
    """The directory part of a filesystem path ("" at the root)."""
    return path.rsplit("/", 1)[0] if "/" in path else ""


def _basename(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _segment_file(info: pafs.FileInfo) -> SegmentFile | None:
    base_offset = segment_log_offset(info.base_name)
    if base_offset is None or info.type != pafs.FileType.File:
        return None
    directory = parent_path(info.path)
    try:
        topic, partition = parse_partition_dir(_basename(directory))
    except InvalidTopicError as exc:
        raise LogstoreError(
            f"segment {info.path} is not inside a <topic>-<partition> directory: {exc}"
        ) from None
    mtime_ns = info.mtime_ns if info.mtime_ns is not None else 0
    return SegmentFile(info.path, topic, partition, base_offset, int(info.size), mtime_ns // 1_000_000)


def _segments_under(fs: pafs.FileSystem, root: str) -> Iterable[SegmentFile]:
    info = fs.get_file_info(root)
    if info.type == pafs.FileType.NotFound:
        raise LogstoreError(f"{root}: no such file or directory")
    if info.type == pafs.FileType.File:
        seg = _segment_file(info)
        if seg is None:
            raise LogstoreError(f"{root} is not a segment file (<20-digit base offset>.log)")
        yield seg
        return
    # A data directory holds partition directories one level down; nothing deeper counts.
    # Kafka's `<topic>-<partition>.<id>-delete`, `-future` and `-stray` directories, and any
    # other whose name is not a valid `<topic>-<partition>`, are not live partitions: skipped.
    # One recursive listing: on an object store that is one paged request, not one per partition.
    prefix = f"{root.rstrip('/')}/"
    partition_dirs: dict[str, bool] = {}
    for child in fs.get_file_info(pafs.FileSelector(root, recursive=True)):
        parent = parent_path(child.path.removeprefix(prefix))
        if "/" in parent:
            continue
        if parent and not partition_dirs.setdefault(parent, is_partition_dir_name(parent)):
            continue
        seg = _segment_file(child)
        if seg is not None:
            yield seg


def _checkpoints(
    data_dirs: dict[str, pafs.FileSystem],
) -> dict[str, dict[str, dict[tuple[str, int], int]]]:
    """{data dir: {checkpoint file name: {(topic, partition): offset}}} for files that exist."""
    names = (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
             CLEANER_OFFSET_CHECKPOINT)
    result: dict[str, dict[str, dict[tuple[str, int], int]]] = {}
    for data_dir, fs in data_dirs.items():
        for name in names:
            path = join_path(data_dir, name)
            if fs.get_file_info(path).type != pafs.FileType.File:
                continue
            result.setdefault(data_dir, {})[name] = _read_checkpoint(fs, path)
    return result


def _read_checkpoint(fs: pafs.FileSystem, path: str) -> dict[tuple[str, int], int]:
    if isinstance(fs, pafs.LocalFileSystem):
        return read_offsets_checkpoint(path)
    with fs.open_input_stream(path) as stream:
        data = stream.read()
    # logstore.checkpoint parses local files; a remote checkpoint is tiny, so copy it.
    with tempfile.TemporaryDirectory() as tmp:
        local = Path(tmp) / _basename(path)
        local.write_bytes(data)
        return read_offsets_checkpoint(local)


def resolve_paths(
    paths: PathArg | Sequence[PathArg], filesystem: pafs.FileSystem | None = None
) -> tuple[pafs.FileSystem, list[str]]:
    """One filesystem and the paths inside it, for local paths or URIs of a single filesystem.

    Executors get the returned filesystem so they open exactly what the driver listed.
    Raises LogstoreError when URIs name different filesystems.
    """
    if isinstance(paths, str | PathLike):
        paths = [paths]
    resolved = [resolve_filesystem(p, filesystem) for p in paths]
    if not resolved:
        raise LogstoreError("no paths given")
    fs = resolved[0][0]
    for other, _ in resolved[1:]:
        if not other.equals(fs):
            raise LogstoreError("all paths of one audit must be on the same filesystem")
    return fs, [inner for _, inner in resolved]

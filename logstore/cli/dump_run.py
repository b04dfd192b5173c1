"""What one `logstore dump` run carries: its resolved options, its output (text lines or JSON
objects written in large chunks), the problems it reports at the end, and the read-only
mapping it reads a file through."""

from __future__ import annotations

import contextlib
import json
import mmap
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

WRITE_CHUNK_BYTES = 1 << 20


class MappedFile:
    """A file mapped read-only (an empty file reads as b""); a context manager."""

    def __init__(self, path: str):
        self._file = open(path, "rb")  # noqa: SIM115 - closed in close()
        size = os.fstat(self._file.fileno()).st_size
        self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if size else None
        self.data: Any = self._map if self._map is not None else b""

    def close(self) -> None:
        """Unmap and close."""
        if self._map is not None:
            # Batch views may still point in; the mapping then goes when they are collected.
            with contextlib.suppress(BufferError):
                self._map.close()
        self._file.close()

    def __enter__(self) -> MappedFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Problems:
    """What the dump found wrong, reported after all files as Kafka does."""

    index_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_out_of_order: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    non_consecutive: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    found: bool = False  # anything that makes the exit code 1

    def add(self, table: dict[str, list[tuple[int, int]]], path: str, pair: tuple[int, int]) -> None:
        """Record one (expected, found) pair for `path`."""
        table.setdefault(os.path.abspath(path), []).append(pair)


@dataclass
class Options:
    """The dump options, resolved as Kafka resolves them."""

    deep: bool
    print_data: bool
    verify_only: bool
    sanity_only: bool
    max_bytes: int
    max_message_size: int
    skip_metadata: bool
    json: bool
    decoder: Any  # a logstore.tools.record_decoders.RecordDecoder


class Output:
    """Text lines or JSON objects, gathered as UTF-8 bytes and written in large chunks."""

    def __init__(self, stream: TextIO, as_json: bool):
        self.stream = stream
        self.json = as_json
        self._binary = getattr(stream, "buffer", None)
        self._chunks: list[bytes | memoryview] = []
        self._size = 0

    def _add(self, data: bytes | memoryview) -> None:
        self._chunks.append(data)
        self._size += len(data)
        if self._size >= WRITE_CHUNK_BYTES:
            self.flush()

    def line(self, text: str) -> None:
        """One text line (ignored in JSON mode)."""
        if not self.json:
            self._add(f"{text}\n".encode())

    def lines(self, texts: Iterable[str]) -> None:
        """Text lines (ignored in JSON mode)."""
        if not self.json:
            block = "\n".join(texts)
            if block:
                self._add(f"{block}\n".encode())

    def obj(self, obj: dict[str, Any]) -> None:
        """One JSON object on its own line (ignored in text mode)."""
        if self.json:
            self._add(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n")

    def flush(self) -> None:
        """Write what is gathered."""
        data = b"".join(self._chunks)
        self._chunks.clear()
        self._size = 0
        if self._binary is None:
            self.stream.write(data.decode())
            self.stream.flush()
        else:
            self.stream.flush()
            self._binary.write(data)
            self._binary.flush()

"""A small codec driven by Kafka's message-schema rules, for the internal topics' records.

A Message is a list of Fields; each Field says in which versions it exists, is nullable or
is tagged, and what its default is, exactly as Kafka's JSON message schemas do. From that
one description this module reads, writes and renders (as Kafka's generated JsonConverter
classes do) every version of a message. The tables of messages live in
``coordinator_schemas`` and ``metadata_schemas``.

Wire rules (Kafka's protocol "flexible versions", KIP-482): in a flexible version strings,
bytes and arrays carry an unsigned-varint length + 1 (0 = null) and every struct ends with
a tagged-field section: count, then (tag, size, data) per field, in ascending tag order. In
other versions strings carry an int16 length, bytes and arrays an int32 length, -1 = null.
Decoded messages are plain dicts keyed by the JSON (camelCase) field names; unknown tagged
fields are kept under UNKNOWN_TAGS and written back, never dropped.
"""

from __future__ import annotations

import base64
import math
import struct
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from logstore.errors import CorruptRecordError, InvalidRecordError
from logstore.kafka_uuid import kafka_uuid
from logstore.records.varint import encode_unsigned_varint

UNKNOWN_TAGS = "_unknownTaggedFields"
ZERO_UUID = uuid.UUID(int=0)
_NEVER = (1, 0)  # an empty version range
_MAX_VERSION = 0x7FFF
_MAX_UVARINT_BYTES = 5

INT8, INT16, INT32, INT64 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
UINT16, FLOAT64 = struct.Struct(">H"), struct.Struct(">d")
_FIXED = {"int8": INT8, "int16": INT16, "int32": INT32, "int64": INT64, "uint16": UINT16,
          "float64": FLOAT64}
_MIN_SIZE = {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint16": 2, "float64": 8, "bool": 1,
             "uuid": 16, "string": 1, "bytes": 1, "records": 1}
PRIMITIVES = frozenset(_MIN_SIZE)


def versions(spec: str | None) -> tuple[int, int]:
    """Parse a schema version range: "3", "1-4", "2+" or None/"none" (no version)."""
    if spec is None or spec == "none":
        return _NEVER
    if spec.endswith("+"):
        return int(spec[:-1]), _MAX_VERSION
    low, _, high = spec.partition("-")
    return int(low), int(high or low)


def _within(rng: tuple[int, int], version: int) -> bool:
    return rng[0] <= version <= rng[1]


@dataclass(frozen=True)
class Struct:
    """A named list of fields (a message body, or a struct nested inside one)."""

    name: str
    fields: tuple[Field, ...]


@dataclass(frozen=True)
class Field:
    """One schema field. ``type`` is a primitive name, a Struct, or a list of one of those
    (Kafka's "[]T"). ``tag`` is None for untagged fields."""

    name: str
    type: str | Struct | list
    versions: tuple[int, int]
    nullable: tuple[int, int] = _NEVER
    tagged: tuple[int, int] = _NEVER
    tag: int | None = None
    default: object = None
    json_name: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "json_name", self.name[0].lower() + self.name[1:])

    def default_value(self, version: int):
        """Kafka's default for this field: the schema's, else zero, "", [] or all defaults."""
        if self.default == "null":
            return None
        kind = self.type
        if isinstance(kind, list):
            return []
        if isinstance(kind, Struct):
            return {f.json_name: f.default_value(version) for f in kind.fields
                    if _within(f.versions, version)}
        if self.default is not None:
            return self.default
        return {"string": "", "bytes": b"", "records": b"", "bool": False, "uuid": ZERO_UUID,
                "float64": 0.0}.get(kind, 0)


def F(name: str, kind, spec: str, *, nullable: str | None = None, tag: int | None = None,
      tagged: str | None = None, default: object = None) -> Field:
    """Table shorthand for a Field: F("LeaderEpoch", "int32", "3+", default=-1).

    A tagged field's taggedVersions default to its versions.
    """
    rng = versions(spec)
    tag_rng = versions(tagged) if tagged is not None else (rng if tag is not None else _NEVER)
    return Field(name, kind, rng, versions(nullable), tag_rng, tag, default)


@dataclass(frozen=True)
class Message:
    """A top-level schema: its name, valid versions, flexible versions and body."""

    name: str
    valid: tuple[int, int]
    flexible: tuple[int, int]
    body: Struct

    def has_version(self, version: int) -> bool:
        return _within(self.valid, version)


def message(name: str, valid: str, flexible: str | None, *fields: Field) -> Message:
    """Table shorthand for a Message."""
    return Message(name, versions(valid), versions(flexible), Struct(name, tuple(fields)))


# ---------------------------------------------------------------------------------------
# Reading


class Reader:
    """Bounds-checked big-endian reads over a bytes-like object; every failure is a
    CorruptRecordError naming the byte position (relative to the buffer) and ``what``."""

    __slots__ = ("buf", "pos", "end", "what")

    def __init__(self, buf, what: str, pos: int = 0, end: int | None = None):
        self.buf = memoryview(buf).cast("B") if not isinstance(buf, bytes) else buf
        self.pos = pos
        self.end = len(buf) if end is None else end
        self.what = what

    def fail(self, message: str, position: int | None = None) -> CorruptRecordError:
        return CorruptRecordError(f"{self.what}: {message}",
                                  position=self.pos if position is None else position)

    def remaining(self) -> int:
        return self.end - self.pos

    def take(self, size: int, label: str) -> bytes:
        if size > self.end - self.pos:
            raise self.fail(f"{label} needs {size} bytes but {self.end - self.pos} remain")
        start = self.pos
        self.pos += size
        return bytes(self.buf[start:self.pos])

    def fixed(self, layout: struct.Struct, label: str):
        if layout.size > self.end - self.pos:
            raise self.fail(f"{label} needs {layout.size} bytes but {self.end - self.pos} remain")
        (value,) = layout.unpack_from(self.buf, self.pos)
        self.pos += layout.size
        return value

    def uvarint(self, label: str) -> int:
        start, value = self.pos, 0
        for i in range(_MAX_UVARINT_BYTES):
            if self.pos >= self.end:
                raise self.fail(f"{label}: varint runs past the end", start)
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << (7 * i)
            if b < 0x80:
                if value > 0xFFFFFFFF:
                    break
                return value
        raise self.fail(f"{label}: unsigned varint longer than {_MAX_UVARINT_BYTES} bytes", start)


def read_message(msg: Message, version: int, reader: Reader) -> dict:
    """Read one ``msg`` body at ``version``; CorruptRecordError for malformed bytes."""
    return _read_struct(msg.body, version, _within(msg.flexible, version), reader)


def _read_struct(schema: Struct, version: int, flexible: bool, r: Reader) -> dict:
    out: dict = {}
    tagged: dict[int, Field] = {}
    for f in schema.fields:
        if not _within(f.versions, version):
            continue
        if flexible and _within(f.tagged, version):
            tagged[f.tag] = f
            out[f.json_name] = f.default_value(version)
        else:
            out[f.json_name] = _read_value(f, f.type, version, flexible, r)
    if flexible:
        _read_tagged(tagged, version, r, out)
    return out


def _read_tagged(tagged: dict[int, Field], version: int, r: Reader, out: dict) -> None:
    count = r.uvarint("tagged field count")
    if count > r.remaining() // 2:  # each tagged field takes at least a tag and a size byte
        raise r.fail(f"{count} tagged fields cannot fit in {r.remaining()} bytes")
    seen: set[int] = set()
    unknown: dict[int, bytes] = {}
    for _ in range(count):
        start = r.pos
        tag = r.uvarint("tag")
        size = r.uvarint(f"size of tagged field {tag}")
        if tag in seen:
            raise r.fail(f"tagged field {tag} appears twice", start)
        seen.add(tag)
        if size > r.remaining():
            raise r.fail(f"tagged field {tag} of {size} bytes runs past the end", start)
        f = tagged.get(tag)
        if f is None:
            unknown[tag] = r.take(size, f"tagged field {tag}")
            continue
        sub = Reader(r.buf, r.what, r.pos, r.pos + size)
        out[f.json_name] = _read_value(f, f.type, version, True, sub)
        if sub.pos != sub.end:
            raise sub.fail(f"tagged field {f.name} left {sub.end - sub.pos} of its {size} bytes unread")
        r.pos = sub.end
    if unknown:
        out[UNKNOWN_TAGS] = unknown


def _length(f: Field, version: int, flexible: bool, r: Reader, wide: bool) -> int | None:
    """Read a string/bytes/array length prefix; None for null (checked against nullability)."""
    start = r.pos
    if flexible:
        n = r.uvarint(f"length of {f.name}") - 1
    else:
        n = r.fixed(INT32 if wide else INT16, f"length of {f.name}")
    if n < 0:
        if n != -1:
            raise r.fail(f"negative length {n} for {f.name}", start)
        if not _within(f.nullable, version):
            raise r.fail(f"non-nullable field {f.name} is null", start)
        return None
    return n


def _read_value(f: Field, kind, version: int, flexible: bool, r: Reader):
    if isinstance(kind, list):
        n = _length(f, version, flexible, r, wide=True)
        if n is None:
            return None
        element = kind[0]
        least = max(1, _min_size(element, version, flexible))
        if n > r.remaining() // least:
            raise r.fail(f"array {f.name} of {n} elements cannot fit in {r.remaining()} bytes")
        if isinstance(element, Struct):
            return [_read_struct(element, version, flexible, r) for _ in range(n)]
        return [_read_primitive(f, element, version, flexible, r, nullable_ok=False) for _ in range(n)]
    if isinstance(kind, Struct):
        if _within(f.nullable, version):
            marker = r.fixed(INT8, f"null marker of {f.name}")
            if marker < 0:
                return None
        return _read_struct(kind, version, flexible, r)
    return _read_primitive(f, kind, version, flexible, r, nullable_ok=True)


def _read_primitive(f: Field, kind: str, version: int, flexible: bool, r: Reader, *, nullable_ok: bool):
    layout = _FIXED.get(kind)
    if layout is not None:
        return r.fixed(layout, f.name)
    if kind == "bool":
        return r.fixed(INT8, f.name) != 0
    if kind == "uuid":
        return uuid.UUID(bytes=r.take(16, f.name))
    start = r.pos
    n = _length(f, version if nullable_ok else -1, flexible, r, wide=kind != "string")
    if n is None:
        return None
    raw = r.take(n, f.name)
    if kind != "string":
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise r.fail(f"{f.name} is not valid UTF-8 ({exc.reason})", start) from None


def _min_size(kind, version: int, flexible: bool) -> int:
    if isinstance(kind, Struct):
        size = 1 if flexible else 0
        for f in kind.fields:
            if _within(f.versions, version) and not (flexible and _within(f.tagged, version)):
                size += _min_size(f.type, version, flexible) if not isinstance(f.type, list) else 1
        return size
    if isinstance(kind, list):
        return 1
    return _MIN_SIZE[kind]


# ---------------------------------------------------------------------------------------
# Writing


def write_message(msg: Message, version: int, values: Mapping) -> bytes:
    """Encode ``values`` as ``msg`` at ``version``; missing fields take their defaults.

    Raises InvalidRecordError for an unknown field name, a field that version lacks, a
    null where the field is not nullable, or a value out of its type's range.
    """
    out: list[bytes] = []
    _write_struct(msg.body, version, _within(msg.flexible, version), values, out)
    return b"".join(out)


def _write_struct(schema: Struct, version: int, flexible: bool, values: Mapping, out: list) -> None:
    if not isinstance(values, Mapping):
        raise InvalidRecordError(f"{schema.name} must be a mapping of field names, not {type(values).__name__}")
    present = {f.json_name: f for f in schema.fields if _within(f.versions, version)}
    for name in values:
        if name not in present and name != UNKNOWN_TAGS:
            known = {f.json_name for f in schema.fields}
            where = "is not a field of" if name not in known else "does not exist in this version of"
            raise InvalidRecordError(f"{name!r} {where} {schema.name} v{version}")
    if values.get(UNKNOWN_TAGS) and not flexible:
        raise InvalidRecordError(f"{schema.name} v{version} is not flexible: it has no tagged fields")
    tagged: dict[int, bytes] = dict(values.get(UNKNOWN_TAGS) or {})
    for f in present.values():
        value = values[f.json_name] if f.json_name in values else f.default_value(version)
        if flexible and _within(f.tagged, version):
            if not _is_default(f, value, version):
                if f.tag in tagged:
                    raise InvalidRecordError(f"tag {f.tag} of {f.name} is also an unknown tagged field")
                sub: list[bytes] = []
                _write_value(f, f.type, version, True, value, sub)
                tagged[f.tag] = b"".join(sub)
        else:
            _write_value(f, f.type, version, flexible, value, out)
    if flexible:
        out.append(encode_unsigned_varint(len(tagged)))
        for tag in sorted(tagged):
            data = tagged[tag]
            out += (encode_unsigned_varint(tag), encode_unsigned_varint(len(data)), data)


def _is_default(f: Field, value, version: int) -> bool:
    default = f.default_value(version)
    if isinstance(f.type, Struct) and isinstance(value, Mapping) and isinstance(default, dict):
        return {k: v for k, v in value.items() if k != UNKNOWN_TAGS} == default and not value.get(UNKNOWN_TAGS)
    return value == default and type(value) is type(default)


def _write_length(f: Field, n: int | None, version: int, flexible: bool, out: list, wide: bool) -> None:
    if n is None and not _within(f.nullable, version):
        raise InvalidRecordError(f"{f.name} is not nullable in version {version}")
    if flexible:
        out.append(encode_unsigned_varint(0 if n is None else n + 1))
    elif wide:
        out.append(INT32.pack(-1 if n is None else n))
    else:
        if n is not None and n > 0x7FFF:
            raise InvalidRecordError(f"{f.name} is {n} bytes, longer than an int16 length allows")
        out.append(INT16.pack(-1 if n is None else n))


def _write_value(f: Field, kind, version: int, flexible: bool, value, out: list) -> None:
    if isinstance(kind, list):
        if value is None:
            _write_length(f, None, version, flexible, out, wide=True)
            return
        if isinstance(value, str | bytes | Mapping):
            raise InvalidRecordError(f"{f.name} must be a list, not {type(value).__name__}")
        items = list(value)
        _write_length(f, len(items), version, flexible, out, wide=True)
        element = kind[0]
        for item in items:
            if isinstance(element, Struct):
                _write_struct(element, version, flexible, item, out)
            else:
                _write_primitive(f, element, version, flexible, item, out, nullable_ok=False)
        return
    if isinstance(kind, Struct):
        if _within(f.nullable, version):
            if value is None:
                out.append(INT8.pack(-1))
                return
            out.append(INT8.pack(1))
        elif value is None:
            raise InvalidRecordError(f"{f.name} is not nullable in version {version}")
        _write_struct(kind, version, flexible, value, out)
        return
    _write_primitive(f, kind, version, flexible, value, out, nullable_ok=True)


def _write_primitive(f: Field, kind: str, version: int, flexible: bool, value, out: list, *,
                     nullable_ok: bool) -> None:
    layout = _FIXED.get(kind)
    try:
        if layout is not None:
            if kind == "float64":
                out.append(layout.pack(float(value)))
            elif isinstance(value, bool) or not isinstance(value, int):
                raise InvalidRecordError(f"{f.name} must be an int, not {type(value).__name__}")
            else:
                out.append(layout.pack(value))
            return
    except struct.error:
        raise InvalidRecordError(f"{f.name}={value!r} does not fit in {kind}") from None
    except TypeError:
        raise InvalidRecordError(f"{f.name} must be a number, not {type(value).__name__}") from None
    if kind == "bool":
        if not isinstance(value, bool):
            raise InvalidRecordError(f"{f.name} must be a bool, not {type(value).__name__}")
        out.append(b"\x01" if value else b"\x00")
        return
    if kind == "uuid":
        if not isinstance(value, uuid.UUID):
            raise InvalidRecordError(f"{f.name} must be a uuid.UUID, not {type(value).__name__}")
        out.append(value.bytes)
        return
    check = version if nullable_ok else -1
    if value is None:
        _write_length(f, None, check, flexible, out, wide=kind != "string")
        return
    if kind == "string":
        if not isinstance(value, str):
            raise InvalidRecordError(f"{f.name} must be a str, not {type(value).__name__}")
        raw = value.encode("utf-8")
    elif isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
    else:
        raise InvalidRecordError(f"{f.name} must be bytes, not {type(value).__name__}")
    _write_length(f, len(raw), check, flexible, out, wide=kind != "string")
    out.append(raw)


# ---------------------------------------------------------------------------------------
# JSON, as Kafka's generated JsonConverter classes and Jackson's ObjectNode.toString write it


def to_json_tree(msg: Message | Struct, version: int, values: Mapping) -> dict:
    """The JSON tree Kafka's <Message>JsonConverter.write(message, version) builds: fields of
    that version in schema order, tagged fields only when not default, bytes as base64,
    uuids as Kafka's base64 strings. Unknown tagged fields are not shown (as in Kafka)."""
    schema = msg.body if isinstance(msg, Message) else msg
    return _json_struct(schema, version, values)


def _json_struct(schema: Struct, version: int, values: Mapping) -> dict:
    node: dict = {}
    for f in schema.fields:
        if not _within(f.versions, version):
            continue
        value = values.get(f.json_name, f.default_value(version))
        if _within(f.tagged, version) and _is_default(f, value, version):
            continue
        node[f.json_name] = _json_value(f.type, version, value)
    return node


def _json_value(kind, version: int, value):
    if value is None:
        return None
    if isinstance(kind, list):
        return [_json_value(kind[0], version, item) for item in value]
    if isinstance(kind, Struct):
        return _json_struct(kind, version, value)
    if kind == "uuid":
        return kafka_uuid(value)
    if kind == "bytes":
        return base64.b64encode(value).decode("ascii")
    if kind == "records":
        return ""  # JsonConverter.write(..., serializeRecords=true) writes an empty BinaryNode
    if kind == "float64":
        return JavaDouble(value)
    return value


class JavaDouble(float):
    """A float that dump_json writes as Java's Double.toString does (1.0E7, 0.001, NaN)."""


def java_double(value: float) -> str:
    """Java's Double.toString: plain between 1e-3 and 1e7, else d.dddE<n>; NaN, Infinity."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    digits_tuple, exponent = Decimal(repr(abs(value))).normalize().as_tuple()[1:]
    digits = "".join(map(str, digits_tuple))
    point = len(digits) + exponent  # decimal point position relative to the digit string
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{sign}{digits}{'0' * (point - len(digits))}.0"
        return f"{sign}{digits[:point]}.{digits[point:]}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{point - 1}"


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def _json_string(text: str) -> str:
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def dump_json(node) -> str:
    """Serialise a JSON tree compactly, as Jackson's JsonNode.toString does (no spaces,
    non-ASCII kept, control characters as uppercase \\uXXXX, doubles as Java prints them)."""
    if node is None:
        return "null"
    if node is True:
        return "true"
    if node is False:
        return "false"
    if isinstance(node, JavaDouble):
        text = java_double(node)
        return f'"{text}"' if text in ("NaN", "Infinity", "-Infinity") else text
    if isinstance(node, int):
        return str(node)
    if isinstance(node, float):
        return java_double(node)
    if isinstance(node, str):
        return _json_string(node)
    if isinstance(node, Mapping):
        return "{" + ",".join(f"{_json_string(k)}:{dump_json(v)}" for k, v in node.items()) + "}"
    return "[" + ",".join(dump_json(item) for item in node) + "]"

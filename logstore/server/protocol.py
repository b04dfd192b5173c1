"""The wire format: request and response framing over kafka-python 3's schema-driven message
classes (generated from Kafka's own JSON message schemas: flexible versions, compact strings
and tagged fields included), driven by the declaration of each API (`ApiSpec`, declared in
apis.py).

Only the versions an API declares are decoded; ApiVersions advertises exactly those.

Why kafka-python's protocol and not kio: both are generated from Kafka's JSON schemas and
measured alike here (Produce decode 1x1 MiB 99 vs 88 us, 50x16 KiB 92 vs 36 us; Fetch encode
1x1 MiB 390 vs 89 us, 50x16 KiB 603 vs 893 us), well under the append of the same bytes;
kafka-python is already the project's peer and test client, and its mutable containers with
schema defaults let a handler fill one response across versions without per-version types.

Record payloads bypass the codec's copies: a Produce request's records are views of the
received frame (`request_views`), and a Fetch response is written as pieces around the records
read, only records of up to 4 KiB joining the bytes around them (fetch_response.py); larger
ones are FileSlices the connection sends from the segment file with sendfile.
Decoding a 1 MiB Produce request takes about 10 us.
"""

from __future__ import annotations

import functools
import struct
import types
import warnings
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NamedTuple

from logstore.extras import require
from logstore.file_slice import FileSlice
from logstore.server import error_codes as ec

require("server", "kafka")  # kafka-python's generated message classes are the codec
with warnings.catch_warnings():
    # kafka-python 3 reads its schemas through importlib.resources' deprecated API as it imports:
    # a user's test run would otherwise show two warnings per message schema.
    warnings.simplefilter("ignore", DeprecationWarning)
    # apis.py takes the message modules from here, imported once under this filter
    from kafka.protocol import admin, consumer, metadata, producer  # noqa: F401
    from kafka.protocol.api_message import ApiMessage

_KEY_VERSION = struct.Struct(">hh")
API_VERSIONS_KEY = metadata.ApiVersionsRequest.API_KEY
Decoder = Callable[[memoryview, int], tuple[Any, int]]
Buffer = bytes | bytearray | memoryview
# What a response is written as: buffers, and FileSlices of segment files sent with sendfile.
Piece = Buffer | FileSlice
# A response's own encoder: (version, correlation id, response) -> size-prefixed pieces.
Encoder = Callable[[int, int, ApiMessage], list[Piece]]


class ApiSpec(NamedTuple):
    """One API this server serves, declared once (apis.py): its messages, the versions served
    and advertised, the handler answering it, and how its bytes differ from the schema's codec.

    `handler` is the unbound method of the service (DataApi, GroupApi, ...) that answers it;
    `request_views` decodes the request's bytes fields as views of the frame, not copies;
    `encode` replaces the schema's response encoder (Fetch writes its records through);
    `advertised_min_version`, when set, is the lower bound ApiVersions advertises instead of
    `min_version`, versions below `min_version` still being refused; `advertised_max_version`,
    when set, the upper bound advertised, versions above it up to `max_version` still served.
    """

    request: type[ApiMessage]
    response: type[ApiMessage]
    min_version: int
    max_version: int
    handler: Callable[..., Awaitable[Any]]
    request_views: bool = False
    encode: Encoder | None = None
    advertised_min_version: int | None = None
    advertised_max_version: int | None = None

    @property
    def advertised_versions(self) -> tuple[int, int]:
        """The (min, max) versions ApiVersions lists."""
        low = self.min_version if self.advertised_min_version is None else self.advertised_min_version
        high = self.max_version if self.advertised_max_version is None else self.advertised_max_version
        return low, high

    @property
    def key(self) -> int:
        return self.request.API_KEY

    @property
    def name(self) -> str:
        return self.request.__name__.removesuffix("Request")




class ProtocolError(Exception):
    """A request that cannot be decoded: the connection is closed (Kafka's InvalidRequestException)."""


class UnsupportedVersion(Exception):
    """A known or unknown API at a version this server does not serve."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int):
        super().__init__(f"api {api_key} v{api_version} is not supported")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class Request(NamedTuple):
    """A decoded request: its spec, version, header (correlation id, client id) and body."""

    spec: ApiSpec
    version: int
    correlation_id: int
    client_id: str | None
    body: Any

    @property
    def api_key(self) -> int:
        return self.spec.request.API_KEY

    def response(self, **fields: Any) -> ApiMessage:
        """A response of this request's API and version with `fields` set."""
        return self.spec.response(version=self.version, **fields)


def decode_request(frame: bytes | bytearray | memoryview, apis: Mapping[int, ApiSpec]) -> Request:
    """Decode one request frame (without its size prefix) as `apis` declare it.

    Raises UnsupportedVersion for an API or version not in `apis` and ProtocolError for
    bytes that do not decode as the schema says.
    """
    if len(frame) < 8:
        raise ProtocolError(f"request of {len(frame)} bytes is shorter than a header")
    api_key, api_version = _KEY_VERSION.unpack_from(frame, 0)
    correlation_id = struct.unpack_from(">i", frame, 4)[0]
    spec = apis.get(api_key)
    if spec is None or not spec.min_version <= api_version <= spec.max_version:
        raise UnsupportedVersion(api_key, api_version, correlation_id)
    data = memoryview(frame)
    try:
        header, start = _header_decoder(spec.request, api_version)(data, 0)
        body, end = _body_decoder(spec.request, api_version, spec.request_views)(data, start)
    except Exception as exc:  # the schema decoder raises ValueError, struct.error, IndexError, ...
        raise ProtocolError(f"malformed api {api_key} v{api_version} request: {exc!r}") from None
    if end > len(data):  # a length field pointed past the frame; slicing hid it
        raise ProtocolError(f"api {api_key} v{api_version} request claims {end} bytes, the frame has {len(data)}")
    null = _first_null(body, _null_plan(spec.request, api_version))
    if null is not None:  # Kafka's generated readers refuse it: the request does not parse
        raise ProtocolError(f"api {api_key} v{api_version} request has a null {null}, which is not nullable")
    body._header = header
    return Request(spec, api_version, header.correlation_id, header.client_id, body)


# What to look at for nulls in one struct: (field name, nullable, plan of its entries or value
# when it is an array of structs or a struct, ELEMENTS when it is an array of strings or bytes).
NullPlan = tuple[tuple[str, bool, Any], ...]
ELEMENTS = "elements"


@functools.cache
def _null_plan(cls: type[ApiMessage], version: int) -> NullPlan:
    """Where a decoded `cls` at `version` may hold a null its schema forbids (the decoder reads
    a -1 length as None whatever the field's nullable versions say)."""
    return _struct_null_plan(cls._struct, version)


def _struct_null_plan(struct: Any, version: int) -> NullPlan:
    plan = []
    for field in struct._fields:
        if not field.for_version_q(version) or field.tagged_field_q(version):
            continue
        nullable = field.nullable_for_version_q(version)
        if field.is_struct_array():
            plan.append((field.name, nullable, _struct_null_plan(field.array_of, version)))
        elif field.is_struct():
            plan.append((field.name, nullable, _struct_null_plan(field, version)))
        elif field.is_array():
            simple = field.array_of.type_str in ("string", "bytes", "records")
            plan.append((field.name, nullable, ELEMENTS if simple else None))
        elif field.type_str in ("string", "bytes", "records") and not nullable:
            plan.append((field.name, False, None))
    return tuple(plan)


def _first_null(value: Any, plan: NullPlan) -> str | None:
    """The name of the first field in `value` that is null against `plan`, else None."""
    for name, nullable, inner in plan:
        item = getattr(value, name)
        if item is None:
            if not nullable:
                return name
        elif inner == ELEMENTS:
            if None in item:
                return name
        elif inner is not None:
            for entry in (item if isinstance(item, list) else (item,)):
                null = _first_null(entry, inner)
                if null is not None:
                    return f"{name}.{null}"
    return None


@functools.cache
def _header_decoder(cls: type[ApiMessage], version: int) -> Decoder:
    """The schema's compiled decoder of `cls`'s request header at `version` (v2 when flexible, else v1)."""
    header = cls.header_class
    flexible = cls.flexible_version_q(version)
    header_version = header._flexible_versions[0] if flexible else header._valid_versions[0]
    return header._struct.compiled_decode_from(header_version, compact=False, tagged=flexible, data_class=header)


@functools.cache
def _body_decoder(cls: type[ApiMessage], version: int, views: bool) -> Decoder:
    """The schema's compiled decoder of `cls` at `version`; with `views`, a twin of it
    whose `bytes(...)` of a frame slice keeps the slice (the generated code names `bytes`)."""
    flexible = cls.flexible_version_q(version)
    decode = cls._struct.compiled_decode_from(version, compact=flexible, tagged=flexible, data_class=cls)
    if not views:
        return decode
    return types.FunctionType(decode.__code__, {**decode.__globals__, "bytes": _view_or_bytes}, decode.__name__)


def _view_or_bytes(value: Any) -> Any:
    return value if type(value) is memoryview else bytes(value)


def encode_response(request: Request, response: ApiMessage) -> list[Piece]:
    """The size-prefixed bytes of `response` to `request`, as pieces to write in order (a
    Fetch response's records are passed through, not copied: FileSlices are sent from the file)."""
    if request.spec.encode is not None:
        return request.spec.encode(request.version, request.correlation_id, response)
    response.with_header(correlation_id=request.correlation_id)
    return [response.encode(header=True, framed=True)]


def api_versions_entries(cls: type[ApiMessage], apis: Mapping[int, ApiSpec]) -> list:
    """ApiVersions' `api_keys` array: the declared APIs and their version ranges."""
    entry = cls.ApiVersion
    return [entry(api_key=key, min_version=apis[key].advertised_versions[0], max_version=apis[key].advertised_versions[1])
            for key in sorted(apis)]


def unsupported_version_response(error: UnsupportedVersion, apis: Mapping[int, ApiSpec]) -> bytes:
    """Kafka's answer to an unsupported version: for ApiVersions a v0 response carrying the
    supported ranges (so the client can retry lower); for any other API, no answer can be
    encoded in a version the client does not speak, so the caller closes the connection."""
    cls = metadata.ApiVersionsResponse
    body = cls(version=0, error_code=ec.UNSUPPORTED_VERSION, api_keys=api_versions_entries(cls, apis))
    body.with_header(correlation_id=error.correlation_id)
    return body.encode(header=True, framed=True)

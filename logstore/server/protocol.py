"""The wire format: request and response framing over kafka-python 3's schema-driven message
classes (generated from Kafka's own JSON message schemas: flexible versions, compact strings
and tagged fields included), and the table of APIs and versions this server implements.

Only the versions in API_VERSIONS are decoded; ApiVersions advertises exactly that table.

Why kafka-python's protocol and not kio: both are generated from Kafka's JSON schemas and
measured alike here (Produce decode 1x1 MiB 99 vs 88 us, 50x16 KiB 92 vs 36 us; Fetch encode
1x1 MiB 390 vs 89 us, 50x16 KiB 603 vs 893 us), well under the append of the same bytes;
kafka-python is already the project's peer and test client, and its mutable containers with
schema defaults let a handler fill one response across versions without per-version types.

Record payloads bypass the codec's copies: a Produce request's records are views of the
received frame (BYTES_AS_VIEWS), and a Fetch response is written as pieces around the records
read, only records of up to 4 KiB joining the bytes around them (fetch_response.py).
Decoding a 1 MiB Produce request takes about 10 us.
"""

from __future__ import annotations

import functools
import struct
import types
import warnings
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from logstore.server import error_codes as ec
from logstore.server.fetch_response import encode_fetch_response

with warnings.catch_warnings():
    # kafka-python 3 reads its schemas through importlib.resources' deprecated API as it imports:
    # a user's test run would otherwise show two warnings per message schema.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol import admin, consumer, metadata, producer
    from kafka.protocol.api_message import ApiMessage

_KEY_VERSION = struct.Struct(">hh")


class ApiSpec(NamedTuple):
    """One implemented API: its request and response classes and the versions served."""

    request: type[ApiMessage]
    response: type[ApiMessage]
    min_version: int
    max_version: int


def _spec(request: type[ApiMessage], response: type[ApiMessage], lo: int, hi: int) -> tuple[int, ApiSpec]:
    return request.API_KEY, ApiSpec(request, response, lo, hi)


# The versions kafka-python 3, aiokafka 0.14 and librdkafka 2.x negotiate, capped where a later
# version needs what a single node without topic-id fetches or KIP-848 groups does not have.
API_VERSIONS: dict[int, ApiSpec] = dict([
    _spec(producer.ProduceRequest, producer.ProduceResponse, 3, 11),
    _spec(consumer.FetchRequest, consumer.FetchResponse, 4, 12),
    _spec(consumer.ListOffsetsRequest, consumer.ListOffsetsResponse, 1, 7),
    _spec(metadata.MetadataRequest, metadata.MetadataResponse, 0, 12),
    _spec(consumer.OffsetCommitRequest, consumer.OffsetCommitResponse, 2, 8),
    _spec(consumer.OffsetFetchRequest, consumer.OffsetFetchResponse, 1, 7),
    _spec(metadata.FindCoordinatorRequest, metadata.FindCoordinatorResponse, 0, 4),
    _spec(consumer.JoinGroupRequest, consumer.JoinGroupResponse, 0, 7),
    _spec(consumer.HeartbeatRequest, consumer.HeartbeatResponse, 0, 4),
    _spec(consumer.LeaveGroupRequest, consumer.LeaveGroupResponse, 0, 4),
    _spec(consumer.SyncGroupRequest, consumer.SyncGroupResponse, 0, 5),
    _spec(admin.DescribeGroupsRequest, admin.DescribeGroupsResponse, 0, 5),
    _spec(admin.ListGroupsRequest, admin.ListGroupsResponse, 0, 4),
    _spec(metadata.ApiVersionsRequest, metadata.ApiVersionsResponse, 0, 3),
    _spec(admin.CreateTopicsRequest, admin.CreateTopicsResponse, 2, 7),
    _spec(admin.DeleteTopicsRequest, admin.DeleteTopicsResponse, 1, 5),
    _spec(admin.DeleteRecordsRequest, admin.DeleteRecordsResponse, 0, 2),
    _spec(producer.InitProducerIdRequest, producer.InitProducerIdResponse, 0, 4),
    _spec(consumer.OffsetForLeaderEpochRequest, consumer.OffsetForLeaderEpochResponse, 2, 4),
    _spec(producer.AddPartitionsToTxnRequest, producer.AddPartitionsToTxnResponse, 0, 3),
    _spec(producer.AddOffsetsToTxnRequest, producer.AddOffsetsToTxnResponse, 0, 3),
    _spec(producer.EndTxnRequest, producer.EndTxnResponse, 0, 3),
    _spec(producer.TxnOffsetCommitRequest, producer.TxnOffsetCommitResponse, 0, 3),
    _spec(admin.DescribeConfigsRequest, admin.DescribeConfigsResponse, 1, 4),
    _spec(admin.CreatePartitionsRequest, admin.CreatePartitionsResponse, 0, 3),
    _spec(admin.DeleteGroupsRequest, admin.DeleteGroupsResponse, 0, 2),
    _spec(admin.IncrementalAlterConfigsRequest, admin.IncrementalAlterConfigsResponse, 0, 1),
])
API_VERSIONS_KEY = metadata.ApiVersionsRequest.API_KEY
FETCH_KEY = consumer.FetchRequest.API_KEY
# Requests whose bytes fields are decoded as views of the request frame, not copies: a
# Produce request's records reach `Log.append` as one writable buffer over the bytes received.
BYTES_AS_VIEWS = frozenset({producer.ProduceRequest.API_KEY})
Decoder = Callable[[memoryview, int], tuple[Any, int]]
Buffer = bytes | bytearray | memoryview


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


def decode_request(frame: bytes | bytearray | memoryview, implemented: Iterable[int] = API_VERSIONS) -> Request:
    """Decode one request frame (without its size prefix).

    Raises UnsupportedVersion for an API or version not in API_VERSIONS and ProtocolError for
    bytes that do not decode as the schema says.
    """
    if len(frame) < 8:
        raise ProtocolError(f"request of {len(frame)} bytes is shorter than a header")
    api_key, api_version = _KEY_VERSION.unpack_from(frame, 0)
    correlation_id = struct.unpack_from(">i", frame, 4)[0]
    spec = API_VERSIONS.get(api_key) if api_key in implemented else None
    if spec is None or not spec.min_version <= api_version <= spec.max_version:
        raise UnsupportedVersion(api_key, api_version, correlation_id)
    data = memoryview(frame)
    try:
        header, start = _header_decoder(spec.request, api_version)(data, 0)
        body, end = _body_decoder(spec.request, api_version)(data, start)
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
def _body_decoder(cls: type[ApiMessage], version: int) -> Decoder:
    """The schema's compiled decoder of `cls` at `version`; for BYTES_AS_VIEWS, a twin of it
    whose `bytes(...)` of a frame slice keeps the slice (the generated code names `bytes`)."""
    flexible = cls.flexible_version_q(version)
    decode = cls._struct.compiled_decode_from(version, compact=flexible, tagged=flexible, data_class=cls)
    if cls.API_KEY not in BYTES_AS_VIEWS:
        return decode
    return types.FunctionType(decode.__code__, {**decode.__globals__, "bytes": _view_or_bytes}, decode.__name__)


def _view_or_bytes(value: Any) -> Any:
    return value if type(value) is memoryview else bytes(value)


def encode_response(request: Request, response: ApiMessage) -> list[Buffer]:
    """The size-prefixed bytes of `response` to `request`, as buffers to write in order (a
    Fetch response's records are passed through, not copied)."""
    if request.api_key == FETCH_KEY:
        return encode_fetch_response(request.version, request.correlation_id, response)
    response.with_header(correlation_id=request.correlation_id)
    return [response.encode(header=True, framed=True)]


def api_versions_entries(cls: type[ApiMessage], implemented: Iterable[int]) -> list:
    """ApiVersions' `api_keys` array: the `implemented` APIs and their version ranges."""
    entry = cls.ApiVersion
    return [entry(api_key=key, min_version=API_VERSIONS[key].min_version, max_version=API_VERSIONS[key].max_version)
            for key in sorted(implemented)]


def unsupported_version_response(error: UnsupportedVersion, implemented: Iterable[int]) -> bytes:
    """Kafka's answer to an unsupported version: for ApiVersions a v0 response carrying the
    supported ranges (so the client can retry lower); for any other API, no answer can be
    encoded in a version the client does not speak, so the caller closes the connection."""
    cls = metadata.ApiVersionsResponse
    body = cls(version=0, error_code=ec.UNSUPPORTED_VERSION, api_keys=api_versions_entries(cls, implemented))
    body.with_header(correlation_id=error.correlation_id)
    return body.encode(header=True, framed=True)

"""The one home of the messages this server generates from Kafka's JSON message definitions,
the way kafka-python 3 generates its own: a class declared with the name of a definition is
built from it at import (fields, versions, flexible versions, tagged fields, defaults), and
encodes and decodes by version like kafka-python's classes.

The definitions are Kafka's files, license header kept, in `resources/` (installed as package
data, read through importlib.resources). Kafka 4.0's versions are the reference; a later
release's additions are left out so that what is written is what 4.0 writes.

Adding a message:

1. Put Kafka's `<Name>.json` in `resources/` (clients/src/main/resources/common/message/ for
   APIs, group-coordinator/... or metadata/... for records), unchanged but for fields or
   versions Kafka 4.0 does not have.
2. Declare it in the module of its concept (consumer_group_apis.py, consumer_group_records.py,
   or a new one named after its concept), inside `schema_loading()`:

       with schema_loading():
           class BrokerRegistrationRequest(ApiMessage, load_json=RESOURCES): pass

   An API's request and response are `kafka.protocol.api_message.ApiMessage`s: `ApiSpec`
   (apis.py) serves them as it serves kafka-python's own. A record of an internal topic
   (`"type": "coordinator-key"`, `"coordinator-value"` or `"metadata"`) is a `SchemaRecord`:
   `record.to_bytes()` writes the int16 that opens it (the key's type id, the value's version)
   and its fields, `Class.from_bytes(data)` reads them back.
"""

from __future__ import annotations

import contextlib
import struct
import warnings
from collections.abc import Iterator
from typing import Any

from logstore.extras import require

RESOURCES = __name__ + ".resources"
_INT16 = struct.Struct(">h")
KEY_TYPES = ("coordinator-key",)


@contextlib.contextmanager
def schema_loading() -> Iterator[None]:
    """Declare classes under this: kafka-python reads definitions through importlib.resources'
    calls that Python 3.11 deprecates, and a user's test run would show a warning per message."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


with schema_loading():  # importing kafka-python declares its own messages
    require("server", "kafka")
    from kafka.protocol.api_data import JsonSchemaData
    from kafka.protocol.data_container import DataContainer
    from kafka.protocol.schemas import BaseField


class SchemaRecord(DataContainer, metaclass=JsonSchemaData, init=False):
    """A record of an internal topic, generated from its JSON definition: an int16 (a key's
    record type id, a value's version), then its fields at that version."""

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if cls._struct is not None:
            cls._flexible_versions = BaseField.parse_versions(cls._json["flexibleVersions"])
            cls._valid_versions = BaseField.parse_versions(cls._json["validVersions"])

    @classmethod
    def is_key(cls) -> bool:
        return cls._json["type"] in KEY_TYPES

    @classmethod
    def record_type(cls) -> int:
        """The record type id (Kafka's apiKey of the definition)."""
        return cls._json["apiKey"]

    @classmethod
    def latest_version(cls) -> int:
        return cls._valid_versions[1]

    @classmethod
    def _flexible(cls, version: int) -> bool:
        low, high = cls._flexible_versions
        return low >= 0 and low <= version and (high < 0 or version <= high)

    def to_bytes(self, version: int | None = None) -> bytes:
        """The record's bytes: a key at its version 0 after its type id, a value after its
        version (the latest unless given)."""
        version = (0 if self.is_key() else self.latest_version()) if version is None else version
        prefix = self.record_type() if self.is_key() else version
        flexible = self._flexible(version)
        body = self._struct.encode(self, version=version, compact=flexible, tagged=flexible)
        return _INT16.pack(prefix) + bytes(body)

    @classmethod
    def from_bytes(cls, data: bytes) -> SchemaRecord:
        """The record of `data` (as to_bytes writes it). Raises ValueError for another type or
        an unknown version, and the codec's errors for bytes that do not decode."""
        (prefix,) = _INT16.unpack_from(data, 0)
        version = 0 if cls.is_key() else prefix
        if cls.is_key() and prefix != cls.record_type():
            raise ValueError(f"{cls.__name__} has type {cls.record_type()}, the record {prefix}")
        if not cls._valid_versions[0] <= version <= cls._valid_versions[1]:
            raise ValueError(f"{cls.__name__} has no version {version}")
        flexible = cls._flexible(version)
        decode = cls._struct.compiled_decode_from(version, compact=flexible, tagged=flexible, data_class=cls)
        record, _ = decode(memoryview(data), 2)
        return record

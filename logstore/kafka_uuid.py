"""Kafka's Uuid as text: URL-safe base64 of the 16 bytes without padding (22 characters), the
form topic ids take in `partition.metadata` and cluster and directory ids in `meta.properties`."""

from __future__ import annotations

import base64
import uuid

UUID_TEXT_LENGTH = 22
ZERO_UUID = uuid.UUID(int=0)  # Kafka's Uuid.ZERO_UUID: no topic; kafka-python decodes it as None


def kafka_uuid(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString() of `value`."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    """The Uuid Kafka's Uuid.fromString() reads from `text`; ValueError if it is not 22
    base64 characters of 16 bytes."""
    if len(text) != UUID_TEXT_LENGTH:
        raise ValueError(f"{text!r} is not {UUID_TEXT_LENGTH} characters")
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


def random_uuid() -> str:
    """A fresh random Uuid in Kafka's text form."""
    return kafka_uuid(uuid.uuid4())

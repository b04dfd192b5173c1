"""Kafka's internal topics' records: __consumer_offsets, __transaction_state and
__cluster_metadata (with KRaft control records and snapshot files), for every version
Kafka 4.0 defines. Pure: no files, no clocks."""

from logstore.internal_topics.records import (
    InternalRecord,
    UnknownRecordTypeError,
    decode_control_record,
    decode_metadata_record,
    decode_offsets_record,
    decode_transaction_log_record,
    encode_control_record,
    encode_metadata_record,
    encode_offsets_record,
    encode_transaction_log_record,
    format_control_for_dump,
    format_metadata_for_dump,
    format_offsets_for_dump,
    format_transaction_log_for_dump,
    metadata_type,
    record_json,
)
from logstore.internal_topics.snapshot import (
    build_snapshot,
    read_snapshot,
)

__all__ = [
    "InternalRecord",
    "UnknownRecordTypeError",
    "build_snapshot",
    "decode_control_record",
    "decode_metadata_record",
    "decode_offsets_record",
    "decode_transaction_log_record",
    "encode_control_record",
    "encode_metadata_record",
    "encode_offsets_record",
    "encode_transaction_log_record",
    "format_control_for_dump",
    "format_metadata_for_dump",
    "format_offsets_for_dump",
    "format_transaction_log_for_dump",
    "metadata_type",
    "read_snapshot",
    "record_json",
]

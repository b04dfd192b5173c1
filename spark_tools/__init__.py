"""Spark + pyarrow storage audits: segment files to Arrow, and compaction and retention reports."""

from spark_tools.dataframes import segment_metadata_dataframe, segments_dataframe
from spark_tools.reader import (
    METADATA_SCHEMA,
    RECORD_SCHEMA,
    read_segment_metadata,
    read_segments,
)
from spark_tools.report_files import write_report
from spark_tools.reports import (
    COMPACTION_SCHEMA,
    RETENTION_SCHEMA,
    audit_reports,
    audit_tables,
    compaction_report,
    local_report,
    local_reports,
    retention_report,
)
from spark_tools.session import find_java_home, spark_session
from spark_tools.topic_configs import TopicConfigs

__all__ = [
    "COMPACTION_SCHEMA",
    "METADATA_SCHEMA",
    "RECORD_SCHEMA",
    "RETENTION_SCHEMA",
    "TopicConfigs",
    "audit_reports",
    "audit_tables",
    "compaction_report",
    "find_java_home",
    "local_report",
    "local_reports",
    "read_segment_metadata",
    "read_segments",
    "retention_report",
    "segment_metadata_dataframe",
    "segments_dataframe",
    "spark_session",
    "write_report",
]

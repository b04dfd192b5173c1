"""Spark + pyarrow storage audits: segment files to Arrow, and compaction and retention reports."""

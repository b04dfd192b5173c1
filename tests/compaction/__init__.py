"""Tests of the compaction package: planning, offset map, cleaner."""

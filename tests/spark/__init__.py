"""Tests of spark_tools: Spark readers, audits and reports."""

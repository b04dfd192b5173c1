"""Tests of the index package: offset and time indexes."""

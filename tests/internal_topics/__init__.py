"""Tests of logstore.internal_topics: coordinator and metadata record schemas."""

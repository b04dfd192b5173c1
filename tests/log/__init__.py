"""Tests of the core log engine (logstore): Log, segments, loading, producer state, manager."""

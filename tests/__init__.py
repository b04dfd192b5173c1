"""The logstore test suite."""

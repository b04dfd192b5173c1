"""Tests of logstore.replication on real and in-memory logs."""

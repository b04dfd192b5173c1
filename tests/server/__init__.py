"""Tests of logstore.server: the Kafka-wire-protocol broker."""

"""Tests of logstore.records: batch and record encoding, compression, CRCs, corruption."""

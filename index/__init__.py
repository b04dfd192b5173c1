"""Sparse on-disk indexes of a segment: the offset index (8-byte entries) and the time index (12-byte entries)."""

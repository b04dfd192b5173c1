"""Helpers shared by test folders: repository paths, the Kafka sample, broker directories."""

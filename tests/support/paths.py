"""Where the tests find the repository and the Kafka-written sample, relative to this file."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# The partition Kafka wrote (tests/data/kafka-samples/README.md): inputs, logdir, dump texts.
KAFKA_SAMPLE = REPO_ROOT / "tests" / "data" / "kafka-samples" / "plain"
# The sample's Kafka log directory root (the plain-0 partition and the root checkpoints).
KAFKA_LOGDIR = KAFKA_SAMPLE / "logdir"

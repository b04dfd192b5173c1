"""Waiting for what other threads or processes bring about (a broker fenced, a leader elected,
a replica caught up): poll a condition until it holds, with a timeout generous enough for a
loaded machine, since a test must not depend on how fast the machine is."""

from __future__ import annotations

import time
from collections.abc import Callable

WAIT_S = 60  # as long as a cluster may take to start (KafkaCluster's READY_TIMEOUT_S)
POLL_S = 0.01


def eventually(condition: Callable[[], object], what: str = "the condition did not hold",
               timeout_s: float = WAIT_S) -> None:
    """Return once `condition()` is true; AssertionError saying `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s} s: {what}"
        time.sleep(POLL_S)

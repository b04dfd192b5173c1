"""KIP-227 incremental fetch sessions: a session remembers the partitions a consumer fetches,
so later fetches send and receive only what changed."""

from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import dataclass, field

from logstore.server import error_codes as ec

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_SESSIONS = 1000  # Kafka's max.incremental.fetch.session.cache.slots default


@dataclass
class SessionPartition:
    """One partition of a session: what the consumer asked for and what it was last told."""

    fetch_offset: int
    max_bytes: int
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1


@dataclass
class FetchSession:
    """A cached session: its id, the epoch expected next and its partitions in fetch order."""

    session_id: int
    epoch: int
    partitions: OrderedDict[tuple[str, int], SessionPartition] = field(default_factory=OrderedDict)


class FetchSessionError(Exception):
    """A fetch naming an unknown session or the wrong epoch; `code` is Kafka's error."""

    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


class FetchSessionCache:
    """Sessions by id, oldest evicted first when the cache is full."""

    def __init__(self, max_sessions: int = MAX_SESSIONS):
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._ids = itertools.count(1)
        self._max = max_sessions

    def resolve(self, session_id: int, epoch: int, wanted: list[tuple[str, int, int, int]],
                forgotten: list[tuple[str, int]]) -> tuple[FetchSession | None, bool]:
        """The session a fetch uses and whether its answer is a full one.

        `wanted` holds (topic, partition, fetch offset, max bytes). Returns (None, True) for a
        sessionless fetch. Raises FetchSessionError for an unknown session or a wrong epoch.
        """
        if session_id and epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            self._sessions.pop(session_id, None)
        if epoch == FINAL_EPOCH:
            return None, True
        if epoch == INITIAL_EPOCH:
            session = FetchSession(next(self._ids), 1)
            for topic, partition, offset, max_bytes in wanted:
                session.partitions[(topic, partition)] = SessionPartition(offset, max_bytes)
            self._sessions[session.session_id] = session
            while len(self._sessions) > self._max:
                self._sessions.popitem(last=False)
            return session, True
        session = self._sessions.get(session_id)
        if session is None:
            raise FetchSessionError(ec.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            raise FetchSessionError(ec.INVALID_FETCH_SESSION_EPOCH)
        session.epoch = 1 if epoch == 2**31 - 1 else epoch + 1
        self._sessions.move_to_end(session_id)
        for key in forgotten:
            session.partitions.pop(key, None)
        for topic, partition, offset, max_bytes in wanted:
            entry = session.partitions.get((topic, partition))
            if entry is None:
                session.partitions[(topic, partition)] = SessionPartition(offset, max_bytes)
            else:
                entry.fetch_offset, entry.max_bytes = offset, max_bytes
        return session, False

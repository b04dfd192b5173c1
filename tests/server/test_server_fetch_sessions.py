"""KIP-227 fetch sessions: creation, incremental updates, forgotten partitions, epochs."""

from __future__ import annotations

import pytest

from logstore.server import error_codes as ec
from logstore.server.fetch_sessions import FetchSessionCache, FetchSessionError


def test_sessionless_fetches_keep_no_state():
    cache = FetchSessionCache()
    session, full = cache.resolve(0, -1, [("t", 0, 5, 100)], [])
    assert session is None and full


def test_a_full_fetch_opens_a_session_that_incremental_fetches_update():
    cache = FetchSessionCache()
    session, full = cache.resolve(0, 0, [("t", 0, 5, 100), ("t", 1, 7, 100)], [])
    assert full and session.session_id > 0 and session.epoch == 1
    same, full = cache.resolve(session.session_id, 1, [("t", 0, 9, 100), ("u", 0, 0, 50)], [("t", 1)])
    assert same is session and not full and session.epoch == 2
    assert {k: v.fetch_offset for k, v in session.partitions.items()} == {("t", 0): 9, ("u", 0): 0}


@pytest.mark.parametrize("session_id, epoch, code", [(999, 1, ec.FETCH_SESSION_ID_NOT_FOUND),
                                                     (1, 5, ec.INVALID_FETCH_SESSION_EPOCH)])
def test_unknown_sessions_and_wrong_epochs_are_refused(session_id, epoch, code):
    cache = FetchSessionCache()
    cache.resolve(0, 0, [("t", 0, 0, 10)], [])
    with pytest.raises(FetchSessionError) as caught:
        cache.resolve(session_id, epoch, [], [])
    assert caught.value.code == code


def test_the_final_epoch_closes_a_session_and_the_cache_is_bounded():
    cache = FetchSessionCache(max_sessions=2)
    first, _ = cache.resolve(0, 0, [("t", 0, 0, 10)], [])
    assert cache.resolve(first.session_id, -1, [("t", 0, 0, 10)], []) == (None, True)
    with pytest.raises(FetchSessionError):
        cache.resolve(first.session_id, 1, [], [])
    ids = [cache.resolve(0, 0, [], [])[0].session_id for _ in range(3)]
    with pytest.raises(FetchSessionError):  # the oldest was evicted
        cache.resolve(ids[0], 1, [], [])
    assert cache.resolve(ids[2], 1, [], [])[0].session_id == ids[2]

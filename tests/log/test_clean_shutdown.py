"""The clean-shutdown marker of standalone logs: a clean close vouches only for logs nobody
is still writing, in this process or another."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from logstore import Log, LogManager
from logstore.lock import LOCK_FILE_NAME
from logstore.log_files import CLEAN_SHUTDOWN_FILE


def test_the_last_standalone_log_closed_writes_the_marker_and_the_next_open_trusts_it(tmp_path: Path):
    first, second = Log.open(tmp_path / "a-0"), Log.open(tmp_path / "b-0")
    first.close()
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()  # b-0 is still being written
    second.close()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    with Log.open(tmp_path / "a-0") as log:
        assert log.had_clean_shutdown
        assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()  # a crash from here on leaves none


def test_a_clean_close_leaves_no_marker_while_another_process_writes_there(tmp_path: Path):
    with Log.open(tmp_path / "a-0"):
        pass
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()
    # Another process's standalone writer holds the data directory's lock shared, as ours does
    # (flock belongs to the open file description, so this descriptor stands for that process).
    other = os.open(tmp_path / LOCK_FILE_NAME, os.O_RDWR)
    fcntl.flock(other, fcntl.LOCK_SH | fcntl.LOCK_NB)
    try:
        Log.open(tmp_path / "a-0").close()
        assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()  # it would vouch for the other's logs
    finally:
        os.close(other)
    Log.open(tmp_path / "a-0").close()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()


def test_a_standalone_log_in_a_managed_directory_leaves_the_marker_to_the_manager(tmp_path: Path):
    with LogManager(tmp_path) as manager:
        manager.get_or_create("t", 0)
        with Log.open(tmp_path / "other-0") as log:
            assert not log.had_clean_shutdown
        assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()  # the manager's own clean stop

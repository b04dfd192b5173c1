"""Shared pytest fixtures. Keep each fixture generic; add new ones below the existing ones."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    """One local Spark session (``local[2]``) for the whole test session; stopped at the end."""
    from spark_tools.session import spark_session

    session = spark_session("local[2]", app_name="logstore-tests")
    yield session
    session.stop()

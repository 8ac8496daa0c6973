"""The schema installs and the test database is usable."""

from __future__ import annotations

import psycopg


def test_schema_installed(conn: psycopg.Connection) -> None:
    row = conn.execute("SELECT count(*) FROM timers.timers").fetchone()
    assert row == (0,)

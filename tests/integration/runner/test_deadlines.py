"""Every wait of a runner's session for the server has a deadline: past it the
connection is cut off, one connection_stalled line says so, and the caller gets Stalled
(pgtimers/runner/session.py), on a real server."""

from __future__ import annotations

import asyncio
import logging
import time

import psycopg
import pytest

from pgtimers.runner.connect import connect
from pgtimers.runner.session import QUICK, Stalled
from tests.conftest import Database, scalar


def test_an_answer_past_the_deadline_cuts_the_connection_off(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pgtimers.runner")

    async def main() -> tuple[float, bool, int]:
        conn = await connect(db.dsn, "pgtimers runner test", "w9", "app")
        pid = conn.get_server_pid()
        assert conn.deadline == QUICK
        began = time.monotonic()
        with pytest.raises(Stalled) as stalled, conn.deadline_of(0.5):
            await conn.fetchval("SELECT timers._iso(now()) FROM pg_sleep(3)")
        took = time.monotonic() - began
        assert stalled.value.doing == "timers._iso"
        assert conn.deadline == QUICK  # the block's deadline is the block's only
        return took, conn.is_closed(), pid

    took, closed, pid = asyncio.run(main())
    assert took < 2.5 and closed
    line = next(r.getMessage() for r in caplog.records if "connection_stalled" in r.getMessage())
    assert "session=w9" in line and "database=app" in line and "doing=timers._iso" in line
    # the server's side of it is gone too (terminated, not left running the statement)
    with psycopg.connect(db.dsn, autocommit=True) as conn:
        deadline = time.monotonic() + 5
        while scalar(conn, "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid]):
            assert time.monotonic() < deadline, "the cut-off session still runs"
            time.sleep(0.1)


def test_an_answer_within_the_deadline_is_the_answer(db: Database) -> None:
    async def main() -> object:
        conn = await connect(db.dsn)
        try:
            with conn.deadline_of(5):
                return await conn.fetchval("SELECT 41 + 1 FROM pg_sleep(0.2)")
        finally:
            await conn.close()

    assert asyncio.run(main()) == 42

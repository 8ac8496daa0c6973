"""Importing a real exchange matches exchange_calendars' own session list, day for day."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys

import psycopg
import pytest

from pgtimers.cli.calendar_import import CalendarImportError, apply_plan, plan_from_exchange
from tests.conftest import Database

xc = pytest.importorskip("exchange_calendars")


def test_xnys_over_a_year_matches_day_for_day(conn: psycopg.Connection) -> None:
    start, end = dt.date(2027, 1, 1), dt.date(2027, 12, 31)
    plan = plan_from_exchange("XNYS", start, end)
    counts = apply_plan(conn, "nyse", plan)
    assert counts["holidays"] >= 9  # New Year's, MLK, Presidents', Good Friday, ...
    ours = [
        r[0]
        for r in conn.execute(
            "SELECT d FROM timers.trading_days('nyse', %s, %s) d", [start, end]
        ).fetchall()
    ]
    theirs = [
        ts.date()
        for ts in xc.get_calendar("XNYS", start=start.isoformat(), end=end.isoformat()).sessions
    ]
    assert ours == theirs
    # Past the imported range the calendar refuses to guess.
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="known from 2027-01-01"):
        conn.execute("SELECT timers.is_trading_day('nyse', '2028-01-03')")


def test_reimport_is_idempotent_and_removes_stale_days(conn: psycopg.Connection) -> None:
    start, end = dt.date(2027, 1, 1), dt.date(2027, 3, 31)
    plan = plan_from_exchange("XNYS", start, end)
    apply_plan(conn, "nyse", plan)
    conn.execute("SELECT timers.add_holiday('nyse', '2027-03-03', 'stale')")
    counts = apply_plan(conn, "nyse", plan)
    assert counts["removed"] == 1 and counts["changed"] == 0
    assert conn.execute("SELECT timers.is_trading_day('nyse', '2027-03-03')").fetchone() == (True,)


def test_unknown_exchange_and_bad_range() -> None:
    with pytest.raises(CalendarImportError, match="unknown exchange 'XXXX'"):
        plan_from_exchange("XXXX", dt.date(2027, 1, 1), dt.date(2027, 2, 1))
    with pytest.raises(CalendarImportError, match="is before"):
        plan_from_exchange("XNYS", dt.date(2027, 2, 1), dt.date(2027, 1, 1))


def test_cli_import(db: Database) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pgtimers",
            "calendar",
            "import",
            "XNYS",
            "--from",
            "2027-01-01",
            "--to",
            "2027-06-30",
            "--name",
            "nyse",
            "--dsn",
            db.dsn,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "nyse" in result.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "pgtimers", "calendar", "import", "NOPE", "--dsn", db.dsn],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2 and "unknown exchange 'NOPE'" in bad.stderr

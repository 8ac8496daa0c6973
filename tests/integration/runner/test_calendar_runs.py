"""Trading timers run by a real runner on a test clock: extra days, holidays, dropped calendars."""

from __future__ import annotations

from collections.abc import Callable

import psycopg

from tests.integration.runner.conftest import LOG_SQL, history, save, status
from tests.support.runner import RunnerProcess

StartRunner = Callable[..., RunnerProcess]
Fired = Callable[..., list[tuple[str, str]]]


def advance(conn: psycopg.Connection, to: str) -> None:
    conn.execute("CALL timers.advance_test_clock('c', %s)", [to])


def test_weekend_extra_trading_day_is_run(
    conn: psycopg.Connection, start_runner: StartRunner, fired: Fired
) -> None:
    conn.execute("SELECT timers.create_test_clock('c', '2027-01-08 00:00+00')")  # a Friday
    conn.execute("SELECT timers.save_calendar('wk', 'mon-fri')")
    conn.execute("SELECT timers.add_trading_day('wk', '2027-01-09', 'make-up Saturday')")
    save(conn, "close", "trading wk 10:00", LOG_SQL, timezone="UTC", test_clock="c")
    start_runner()
    advance(conn, "2027-01-11 12:00+00")
    assert [due for _, due in fired("close")] == [
        "2027-01-08T10:00:00Z",
        "2027-01-09T10:00:00Z",
        "2027-01-11T10:00:00Z",
    ]


def test_holiday_added_in_the_morning_is_skipped_that_afternoon(
    conn: psycopg.Connection, start_runner: StartRunner, fired: Fired
) -> None:
    conn.execute("SELECT timers.create_test_clock('c', '2027-01-05 08:00+05:45')")
    conn.execute("SELECT timers.save_calendar('nepse', 'sun-thu')")
    save(conn, "candles", "trading nepse 15:05", LOG_SQL, timezone="Asia/Kathmandu", test_clock="c")
    start_runner()
    conn.execute("SELECT timers.add_holiday('nepse', '2027-01-05', 'declared this morning')")
    advance(conn, "2027-01-06 16:00+05:45")
    assert [due for _, due in fired("candles")] == ["2027-01-06T09:20:00Z"]


def test_dropped_calendar_fails_every_day_until_made_again(
    conn: psycopg.Connection, start_runner: StartRunner, fired: Fired
) -> None:
    conn.execute("SELECT timers.create_test_clock('c', '2027-01-08 00:00+00')")  # Friday
    conn.execute("SELECT timers.save_calendar('desk', 'mon-fri')")
    save(conn, "eod", "trading desk 18:00", LOG_SQL, timezone="UTC", test_clock="c")
    start_runner()
    conn.execute("SELECT timers.drop_calendar('desk')")
    advance(conn, "2027-01-10 20:00+00")  # Fri, Sat, Sun: due every day, each fails
    runs = history(conn, "eod")
    assert [(r["ok"], r["error"]) for r in runs] == [(False, "calendar 'desk' does not exist")] * 3
    assert fired("eod") == []
    s = status(conn, "eod")
    assert (s["failures"], s["last_ok"], s["last_error"]) == (
        3,
        False,
        "calendar 'desk' does not exist",
    )
    # Made again: back on its trading days (the weekend is not one).
    conn.execute("SELECT timers.save_calendar('desk', 'mon-fri')")
    advance(conn, "2027-01-12 20:00+00")
    assert [due for _, due in fired("eod")] == ["2027-01-11T18:00:00Z", "2027-01-12T18:00:00Z"]


def test_a_run_past_the_calendars_known_range_fails_instead_of_guessing(
    conn: psycopg.Connection, start_runner: StartRunner, fired: Fired
) -> None:
    conn.execute("SELECT timers.create_test_clock('c', '2027-01-05 00:00+00')")
    conn.execute("SELECT timers.save_calendar('imp', 'mon-fri', '2027-01-01', '2027-01-05')")
    save(conn, "eod", "trading imp 18:00", LOG_SQL, timezone="UTC", test_clock="c")
    start_runner()
    advance(conn, "2027-01-06 20:00+00")
    runs = history(conn, "eod")
    assert [r["ok"] for r in runs] == [True, False]
    assert "known from 2027-01-01 until 2027-01-05, not on 2027-01-06" in runs[1]["error"]
    assert len(fired("eod")) == 1

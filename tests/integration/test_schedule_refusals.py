"""Refused schedules: SQLSTATE 22023 naming the bad part, nothing saved, no internal frames.

A refusal from timers.save, timers.save_many or timers.next_runs carries the CONTEXT of
that call only, not the stack of internal routines (timers._parse_schedule, ...) below it.
"""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors

EXAMPLES = "; use a schedule like "

BAD = [
    (
        "monthly 5th tue",
        "'5th' is not a week of the month: use 1st, 2nd, 3rd, 4th or last "
        "(not every month has a 5th)",
    ),
    ("monthly last xyz", "'xyz' is not a day (days: sun mon tue wed thu fri sat)"),
    (
        "monthly 2nd tuesday 09:00",
        "'tuesday' is not a day (days: sun mon tue wed thu fri sat); did you mean \"tue\"?",
    ),
    ("monthly second tue 09:00", 'did you mean "2nd"?'),
    ("monthly 0 02:00", "day 0 is out of range 1-31 (or write last)"),
    ("monthly 32 02:00", "day 32 is out of range 1-31 (or write last)"),
    ("monthly 1,32 02:00", "day 32 is out of range 1-31 (or write last)"),
    (
        "monthly -28 02:00",
        "-28 is out of range -1 to -27 (days before the last; -1 is the day before the last)",
    ),
    ("monthly first 02:00", 'did you mean "1st"?'),
    (
        "monthly 1,x 02:00",
        "'x' is not a day of the month: use 1-31, last, or -1 to -27 (days before the last)",
    ),
    ("monthly last", "a time like 09:30 is missing after 'last'"),
    ("monthly 2nd tue", "a time like 09:30 is missing after '2nd tue'"),
    ("monthly last fri 16:00 x", "'x' after the time is not part of a monthly schedule"),
    ("monthly 1 02:00 x", "'x' after the time is not part of a monthly schedule"),
    ("monthly 2nd tue 25:00", "hour 25 is out of range 0-23"),
    ("trading xnys first", "a time like 09:30 is missing after 'first'"),
    (
        "trading xnys middle 10:00",
        "'middle' is not a day of the month: use first, last or "
        "last-N (N trading days before the last, 1-20)",
    ),
    (
        "trading xnys first-1 10:00",
        "'first-1' is not a day of the month: use first, last or "
        "last-N (N trading days before the last, 1-20)",
    ),
    ("trading xnys last-21 10:00", "last-21 is out of range last-1 to last-20"),
    ("trading xnys last 10:00 x", "'x' after the time is not part of a trading schedule"),
    ("every 7 mins", 'did you mean "every 7m"?'),
    ("every 30sec", 'did you mean "every 30s"?'),
    ("every 2 hours", 'did you mean "every 2h"?'),
]


@pytest.fixture
def xnys(conn: psycopg.Connection) -> psycopg.Connection:
    conn.execute("SELECT timers.save_calendar('xnys')")
    return conn


@pytest.mark.parametrize(("schedule", "why"), BAD, ids=[b[0] for b in BAD])
def test_refused_naming_the_bad_part_and_nothing_saved(
    xnys: psycopg.Connection, schedule: str, why: str
) -> None:
    word = schedule.split(" ", 1)[0]
    with pytest.raises(errors.InvalidParameterValue) as caught:
        xnys.execute("SELECT timers.save('t', %s, 'SELECT 1')", [schedule])
    message = caught.value.diag.message_primary or ""
    assert message.startswith(f"bad \"{word}\" schedule '{schedule}': {why}{EXAMPLES}")
    assert xnys.execute("SELECT count(*) FROM timers.timers").fetchone() == (0,)
    with pytest.raises(errors.InvalidParameterValue) as previewed:
        xnys.execute("SELECT timers.next_runs(%s, 1)", [schedule])
    assert previewed.value.diag.message_primary == message


def test_a_missing_calendar_is_refused_by_name(conn: psycopg.Connection) -> None:
    with pytest.raises(errors.InvalidParameterValue) as caught:
        conn.execute("SELECT timers.save('t', 'trading nosuch last 10:00', 'SELECT 1')")
    assert caught.value.diag.message_primary == (
        f"there is no calendar 'nosuch' in database {conn.info.dbname}"
    )
    assert (
        caught.value.diag.message_hint
        == "Make it first: SELECT timers.save_calendar('nosuch', 'mon-fri');"
    )
    assert conn.execute("SELECT count(*) FROM timers.timers").fetchone() == (0,)


CALLS = [
    ("SELECT timers.save('t', 'monthly 5th tue', 'SELECT 1')", "timers.save("),
    ("SELECT timers.save('t', 'trading nosuch last 10:00', 'SELECT 1')", "timers.save("),
    ("SELECT timers.save('t', 'daily 02:00', 'SELEC 1')", "timers.save("),
    (
        'SELECT timers.save_many(\'[{"name": "t", "schedule": "monthly 32 02:00",'
        ' "sql": "SELECT 1"}]\')',
        "timers.save_many(",
    ),
    ("SELECT * FROM timers.next_runs('monthly last xyz', 1)", "timers.next_runs("),
    ("SELECT * FROM timers.next_runs('daily 02:00', 0)", "timers.next_runs("),
    (
        "SELECT * FROM timers.next_runs('daily 02:00', 1, timezone => 'Mars/Base')",
        "timers.next_runs(",
    ),
]


@pytest.mark.parametrize(("call", "frame"), CALLS, ids=[c[0][:60] for c in CALLS])
def test_a_refusal_has_no_internal_frames(conn: psycopg.Connection, call: str, frame: str) -> None:
    with pytest.raises(psycopg.Error) as caught:
        conn.execute(call)
    context = caught.value.diag.context or ""
    lines = context.splitlines()
    assert len(lines) == 1, context
    assert lines[0].startswith(f"PL/pgSQL function {frame}"), context
    assert "timers._" not in context
    # no empty detail or hint is sent where there was none
    assert caught.value.diag.message_detail != ""
    assert caught.value.diag.message_hint != ""


def test_the_sqlstate_detail_and_hint_survive(conn: psycopg.Connection) -> None:
    with pytest.raises(errors.InvalidParameterValue) as caught:
        conn.execute("SELECT timers.save('t', 'trading nosuch 10:00', 'SELECT 1')")
    assert caught.value.diag.message_hint is not None
    assert caught.value.diag.message_hint.startswith("Make it first: ")
    with pytest.raises(psycopg.errors.SyntaxError) as bad_sql:
        conn.execute("SELECT timers.save('t', 'daily 02:00', 'SELEC 1')")
    assert bad_sql.value.sqlstate == "42601"

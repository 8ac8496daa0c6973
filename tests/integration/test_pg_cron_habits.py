"""Schedules written as pg_cron takes them: a bare 5-field cron and 'N seconds' are
accepted and stored in the pgtimers form; what is near but not either is refused
(22023) with a message that names what is wrong and what to write."""

from __future__ import annotations

import datetime as dt

import psycopg
import pytest
from psycopg import errors

from tests.conftest import scalar

AFTER = "2026-06-01T12:00:07+00:00"


def next_runs(conn: psycopg.Connection, schedule: str, n: int = 4) -> list[dt.datetime]:
    rows = conn.execute(
        "SELECT t FROM timers.next_runs(%s, %s, %s::timestamptz, 'UTC') t", [schedule, n, AFTER]
    ).fetchall()
    return [r[0] for r in rows]


def stored(conn: psycopg.Connection, schedule: str) -> str:
    return str(
        scalar(conn, "SELECT timers._parse_schedule(%s, 'UTC', now())->>'schedule'", [schedule])
    )


@pytest.mark.parametrize(
    ("pg_cron", "ours"),
    [
        ("*/5 * * * *", "cron */5 * * * *"),
        ("0 9 * * 1-5", "cron 0 9 * * 1-5"),
        ("  30   3 * *  sat ", "cron 30 3 * * sat"),
        ("0 0 13 * 5", "cron 0 0 13 * 5"),
        ("30 seconds", "every 30s"),
        ("1 second", "every 1s"),
        ("2 second", "every 2s"),
        ("59 Seconds", "every 59s"),
        ("1 seconds", "every 1s"),
    ],
)
def test_pg_cron_forms_are_accepted_and_stored_in_the_pgtimers_form(
    conn: psycopg.Connection, pg_cron: str, ours: str
) -> None:
    assert stored(conn, pg_cron) == ours
    assert next_runs(conn, pg_cron) == next_runs(conn, ours)


def test_the_preview_of_the_issue(conn: psycopg.Connection) -> None:
    times = next_runs(conn, "*/5 * * * *", 2)
    assert [t.isoformat() for t in times] == [
        "2026-06-01T12:05:00+00:00",
        "2026-06-01T12:10:00+00:00",
    ]
    seconds = next_runs(conn, "30 seconds", 2)
    assert [t.isoformat() for t in seconds] == [
        "2026-06-01T12:00:30+00:00",
        "2026-06-01T12:01:00+00:00",
    ]


def test_a_saved_timer_keeps_the_pgtimers_form(conn: psycopg.Connection) -> None:
    conn.execute("SELECT timers.save('five', '*/5 * * * *', 'SELECT 1')")
    conn.execute("SELECT timers.save('half', '30 seconds', 'SELECT 1')")
    conn.execute("SELECT timers.save('last', '0 12 $ * *', 'SELECT 1')")
    rows = conn.execute("SELECT name, schedule FROM timers.status ORDER BY name").fetchall()
    assert rows == [
        ("five", "cron */5 * * * *"),
        ("half", "every 30s"),
        ("last", "cron 0 12 $ * *"),
    ]


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        (
            "60 seconds",
            'bad "seconds" schedule \'60 seconds\': "N seconds" takes 1 to 59 seconds, as in'
            ' pg_cron; did you mean "every 60s"?',
        ),
        (
            "0 seconds",
            'bad "seconds" schedule \'0 seconds\': "N seconds" takes 1 to 59 seconds, as in'
            " pg_cron",
        ),
        ("5 minutes", 'bad "minutes" schedule \'5 minutes\': did you mean "every 5m"?'),
        ("2 hours", 'bad "hours" schedule \'2 hours\': did you mean "every 2h"?'),
        ("5m", 'bad "5m" schedule \'5m\': did you mean "every 5m" (or "in 5m" for one run)?'),
        (
            "10 fortnights",
            "bad \"fortnights\" schedule '10 fortnights': 'fortnights' is not a unit; an interval"
            ' is written "every 10s", "every 10m" or "every 10h"',
        ),
        (
            "0 12 $-1 * *",
            "bad \"cron\" schedule '0 12 $-1 * *': '$-1' in the day-of-month field: write L or $"
            " (the last day), L-3 (the third day before the last), 15W (the weekday nearest the"
            " 15th) or LW (the last weekday), each on its own between commas",
        ),
        (
            "0 0 * * * *",
            "bad \"cron\" schedule '0 0 * * * *': a cron schedule has 5 fields (minute hour"
            " day-of-month month day-of-week), not 6: there is no seconds or year field; for a"
            ' run every N seconds write "every Ns"',
        ),
        (
            "0 9 * *",
            "bad \"cron\" schedule '0 9 * *': a cron schedule has 5 fields (minute hour"
            " day-of-month month day-of-week), got 4",
        ),
        ("61 * * * *", "bad \"cron\" schedule '61 * * * *': minute 61 is out of range 0-59"),
        (
            "*/5 * * * fry",
            "bad \"cron\" schedule '*/5 * * * fry': 'fry' is not a day of week",
        ),
        (
            "0 0 31 2 *",
            "bad \"cron\" schedule '0 0 31 2 *': day of month 31 never occurs in month 2",
        ),
    ],
)
def test_near_misses_are_refused_naming_what_is_wrong(
    conn: psycopg.Connection, schedule: str, message: str
) -> None:
    with pytest.raises(errors.InvalidParameterValue) as caught:
        next_runs(conn, schedule)
    assert caught.value.sqlstate == "22023"
    primary = caught.value.diag.message_primary or ""
    assert primary.startswith(message + "; use a schedule like "), primary


def test_a_refused_save_changes_nothing(conn: psycopg.Connection) -> None:
    with pytest.raises(errors.InvalidParameterValue, match="not 6"):
        conn.execute("SELECT timers.save('six', '0 0 9 * * *', 'SELECT 1')")
    assert scalar(conn, "SELECT count(*) FROM timers.status") == 0
    assert scalar(conn, "SELECT count(*) FROM timers.audit") == 0


def test_the_words_of_pgtimers_keep_their_meaning(conn: psycopg.Connection) -> None:
    # nothing that starts with a letter is read as pg_cron's
    assert stored(conn, "every 30s") == "every 30s"
    assert stored(conn, "@daily") == "@daily"
    assert stored(conn, "cron 0 9 * * 1-5") == "cron 0 9 * * 1-5"
    with pytest.raises(
        errors.InvalidParameterValue, match=r"^bad \"seconds 30\" schedule 'seconds 30'; use"
    ):
        stored(conn, "seconds 30")

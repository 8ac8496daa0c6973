"""The schedule engine in PL/pgSQL: every grammar form, zones, start_at, calendars, bad input.

Expectations are computed by hand and written as ISO 8601 instants with offsets.
Calendar in 2026-2028 used below: 2026-01-01 is a Thursday, 2026-06-01 a Monday,
2027-01-04 a Monday, 2028-02-29 a Tuesday.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import errors, sql
from psycopg.types.json import Jsonb

from tests.conftest import Database, Server

EXAMPLES = (
    'use a schedule like "every 10s", "every 5m", "every 2h", "hourly", "hourly :15", '
    '"daily 16:00", "daily 02:00,13:30", "weekdays 11:00", "sun-thu 11:00", '
    '"mon,wed,fri 09:30", "monthly 1 02:00", "trading nepse 15:05" (the trading days of '
    'calendar nepse), "cron 0 9 * * 1-5", "once 2027-01-04 09:00" or "in 30m"'
)

KTM = "Asia/Kathmandu"  # +05:45, no DST


@pytest.fixture(scope="module", name="ro")
def read_only_database(
    request: pytest.FixtureRequest, server: Server, template: str
) -> Iterator[psycopg.Connection]:
    """One database shared by the tests of a module that only read (parse and compute).

    Other schedule test modules import this fixture; each module gets its own database.
    """
    name = f"pgt_{os.getpid()}_ro_{request.module.__name__.rsplit('.', 1)[-1]}"[:63]
    with server.admin() as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template)
            )
        )
    try:
        with Database(server, name).connect() as c:
            yield c
    finally:
        with server.admin() as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def ts(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def runs(
    conn: psycopg.Connection, schedule: str, n: int, after: str, zone: str | None = "UTC"
) -> list[dt.datetime]:
    rows = conn.execute(
        "SELECT t FROM timers.next_runs(%s, %s, %s::timestamptz, %s) t",
        [schedule, n, after, zone],
    ).fetchall()
    return [r[0] for r in rows]


def expect(*texts: str) -> list[dt.datetime]:
    return [ts(t) for t in texts]


def parse(
    conn: psycopg.Connection,
    schedule: str | None,
    zone: str = "UTC",
    now: str = "2026-06-01T12:00:00+00:00",
) -> dict[str, Any]:
    row = conn.execute(
        "SELECT timers._parse_schedule(%s, %s, %s::timestamptz)", [schedule, zone, now]
    ).fetchone()
    assert row is not None
    spec: dict[str, Any] = row[0]
    return spec


def next_due(
    conn: psycopg.Connection,
    spec: dict[str, Any],
    after: str,
    zone: str = "UTC",
    start_at: str | None = None,
) -> dt.datetime | None:
    row = conn.execute(
        "SELECT timers._next_due(%s, %s::timestamptz, %s, %s::timestamptz)",
        [Jsonb(spec), after, zone, start_at],
    ).fetchone()
    assert row is not None
    value: dt.datetime | None = row[0]
    return value


# --------------------------------------------------------------------------- every


def test_every_minutes_counts_from_midnight(ro: psycopg.Connection) -> None:
    assert runs(ro, "every 5m", 3, "2026-01-01T10:02:00+00:00") == expect(
        "2026-01-01T10:05:00+00:00", "2026-01-01T10:10:00+00:00", "2026-01-01T10:15:00+00:00"
    )


def test_every_strictly_after_a_grid_point(ro: psycopg.Connection) -> None:
    assert runs(ro, "every 5m", 2, "2026-01-01T10:05:00+00:00") == expect(
        "2026-01-01T10:10:00+00:00", "2026-01-01T10:15:00+00:00"
    )
    assert runs(ro, "every 5m", 1, "2026-01-01T10:04:59.999999+00:00") == expect(
        "2026-01-01T10:05:00+00:00"
    )


def test_every_seconds_in_kathmandu(ro: psycopg.Connection) -> None:
    assert runs(ro, "every 10s", 3, "2026-06-01T09:00:05+05:45", KTM) == expect(
        "2026-06-01T09:00:10+05:45", "2026-06-01T09:00:20+05:45", "2026-06-01T09:00:30+05:45"
    )


def test_every_hours_from_local_midnight_in_kathmandu(ro: psycopg.Connection) -> None:
    # local midnight in Kathmandu is 18:15 UTC the day before
    assert runs(ro, "every 2h", 3, "2026-06-01T00:30:00+05:45", KTM) == expect(
        "2026-06-01T02:00:00+05:45", "2026-06-01T04:00:00+05:45", "2026-06-01T06:00:00+05:45"
    )


def test_every_grid_restarts_at_midnight(ro: psycopg.Connection) -> None:
    # 7 minutes does not divide a day: 23:55 is the last point, then midnight again
    assert runs(ro, "every 7m", 3, "2026-01-01T23:50:00+00:00") == expect(
        "2026-01-01T23:55:00+00:00", "2026-01-02T00:00:00+00:00", "2026-01-02T00:07:00+00:00"
    )
    assert runs(ro, "every 90m", 2, "2026-01-01T22:00:00+00:00") == expect(
        "2026-01-01T22:30:00+00:00", "2026-01-02T00:00:00+00:00"
    )


def test_every_24h_is_local_midnight(ro: psycopg.Connection) -> None:
    assert runs(ro, "every 24h", 2, "2026-06-01T10:00:00+05:45", KTM) == expect(
        "2026-06-02T00:00:00+05:45", "2026-06-03T00:00:00+05:45"
    )


def test_every_with_start_at_counts_from_start_at(ro: psycopg.Connection) -> None:
    spec = parse(ro, "every 7m")
    start = "2026-01-01T10:03:30+00:00"
    assert next_due(ro, spec, "2026-01-01T09:00:00+00:00", start_at=start) == ts(start)
    assert next_due(ro, spec, start, start_at=start) == ts("2026-01-01T10:10:30+00:00")
    assert next_due(ro, spec, "2026-01-01T10:10:30+00:00", start_at=start) == ts(
        "2026-01-01T10:17:30+00:00"
    )
    # no midnight restart: the grid keeps counting from start_at
    assert next_due(ro, spec, "2026-01-01T23:59:00+00:00", start_at=start) == ts(
        "2026-01-02T00:03:30+00:00"
    )
    # years later, still exact
    assert next_due(ro, spec, "2030-01-01T00:00:00+00:00", start_at=start) == ts(
        "2030-01-01T00:04:30+00:00"
    )


def test_start_at_for_patterns(ro: psycopg.Connection) -> None:
    spec = parse(ro, "daily 09:00")
    after = "2026-06-01T00:00:00+00:00"
    assert next_due(ro, spec, after, start_at="2026-06-03T09:00:00+00:00") == ts(
        "2026-06-03T09:00:00+00:00"
    )
    assert next_due(ro, spec, after, start_at="2026-06-03T09:00:01+00:00") == ts(
        "2026-06-04T09:00:00+00:00"
    )
    # a start_at in the past changes nothing
    assert next_due(ro, spec, after, start_at="2020-01-01T00:00:00+00:00") == ts(
        "2026-06-01T09:00:00+00:00"
    )
    cron = parse(ro, "cron */10 * * * *")
    assert next_due(ro, cron, after, start_at="2026-06-01T10:05:00+00:00") == ts(
        "2026-06-01T10:10:00+00:00"
    )


def test_next_due_of_nothing_is_null(ro: psycopg.Connection) -> None:
    row = ro.execute(
        "SELECT timers._next_due(NULL, now(), 'UTC'),"
        " timers._next_due(timers._parse_schedule('hourly', 'UTC', now()), NULL, 'UTC'),"
        " timers._next_due(timers._parse_schedule('hourly', 'UTC', now()), 'infinity', 'UTC')"
    ).fetchone()
    assert row == (None, None, None)


def test_next_due_without_zone_is_utc(ro: psycopg.Connection) -> None:
    row = ro.execute(
        "SELECT timers._next_due(timers._parse_schedule('daily 09:00', 'UTC', now()),"
        " '2026-06-01+00', NULL)"
    ).fetchone()
    assert row == (ts("2026-06-01T09:00:00+00:00"),)


# --------------------------------------------------------------------------- hourly


def test_hourly(ro: psycopg.Connection) -> None:
    assert runs(ro, "hourly", 2, "2026-01-01T10:00:00+00:00") == expect(
        "2026-01-01T11:00:00+00:00", "2026-01-01T12:00:00+00:00"
    )


def test_hourly_at_minute_in_kathmandu(ro: psycopg.Connection) -> None:
    assert runs(ro, "hourly :15", 3, "2026-06-01T10:15:00+05:45", KTM) == expect(
        "2026-06-01T11:15:00+05:45", "2026-06-01T12:15:00+05:45", "2026-06-01T13:15:00+05:45"
    )
    assert runs(ro, "hourly :5", 1, "2026-06-01T10:00:00+00:00") == expect(
        "2026-06-01T10:05:00+00:00"
    )


# --------------------------------------------------------------------------- daily, weekly, monthly


def test_daily(ro: psycopg.Connection) -> None:
    assert runs(ro, "daily 16:00", 2, "2026-06-01T16:00:00+05:45", KTM) == expect(
        "2026-06-02T16:00:00+05:45", "2026-06-03T16:00:00+05:45"
    )


def test_daily_several_times_in_any_order(ro: psycopg.Connection) -> None:
    expected = expect(
        "2026-06-01T13:30:00+00:00", "2026-06-02T02:00:00+00:00", "2026-06-02T13:30:00+00:00"
    )
    assert runs(ro, "daily 02:00,13:30", 3, "2026-06-01T02:00:00+00:00") == expected
    assert runs(ro, "daily 13:30,02:00", 3, "2026-06-01T02:00:00+00:00") == expected
    assert runs(ro, "daily 2:00, 13:30,13:30", 3, "2026-06-01T02:00:00+00:00") == expected


def test_daily_with_seconds(ro: psycopg.Connection) -> None:
    assert runs(ro, "daily 09:30:15", 1, "2026-06-01T09:30:00+00:00") == expect(
        "2026-06-01T09:30:15+00:00"
    )


def test_weekdays(ro: psycopg.Connection) -> None:
    # Friday 2026-06-05 after 11:00 -> Monday 06-08
    expected = expect(
        "2026-06-08T11:00:00+05:45", "2026-06-09T11:00:00+05:45", "2026-06-10T11:00:00+05:45"
    )
    assert runs(ro, "weekdays 11:00", 3, "2026-06-05T12:00:00+05:45", KTM) == expected
    assert runs(ro, "mon-fri 11:00", 3, "2026-06-05T12:00:00+05:45", KTM) == expected
    assert runs(ro, "MON-FRI 11:00", 3, "2026-06-05T12:00:00+05:45", KTM) == expected


def test_sun_thu_nepal_week(ro: psycopg.Connection) -> None:
    # Thursday 2026-06-04 after 11:00 -> Sunday 06-07
    assert runs(ro, "sun-thu 11:00", 2, "2026-06-04T11:00:00+05:45", KTM) == expect(
        "2026-06-07T11:00:00+05:45", "2026-06-08T11:00:00+05:45"
    )


def test_day_lists_and_weekly(ro: psycopg.Connection) -> None:
    expected = expect(
        "2026-06-03T09:30:00+00:00", "2026-06-05T09:30:00+00:00", "2026-06-08T09:30:00+00:00"
    )
    assert runs(ro, "mon,wed,fri 09:30", 3, "2026-06-01T10:00:00+00:00") == expected
    assert runs(ro, "weekly mon,wed,fri 09:30", 3, "2026-06-01T10:00:00+00:00") == expected


def test_wrapping_day_range(ro: psycopg.Connection) -> None:
    # fri-sun = fri, sat, sun; from Monday 2026-06-01
    assert runs(ro, "fri-sun 10:00,18:00", 4, "2026-06-01T00:00:00+00:00") == expect(
        "2026-06-05T10:00:00+00:00",
        "2026-06-05T18:00:00+00:00",
        "2026-06-06T10:00:00+00:00",
        "2026-06-06T18:00:00+00:00",
    )
    assert runs(ro, "sat-mon 10:00", 3, "2026-06-01T11:00:00+00:00") == expect(
        "2026-06-06T10:00:00+00:00", "2026-06-07T10:00:00+00:00", "2026-06-08T10:00:00+00:00"
    )


def test_monthly(ro: psycopg.Connection) -> None:
    assert runs(ro, "monthly 1 02:00", 3, "2026-11-15T00:00:00+00:00") == expect(
        "2026-12-01T02:00:00+00:00", "2027-01-01T02:00:00+00:00", "2027-02-01T02:00:00+00:00"
    )
    assert runs(ro, "monthly 28 23:00,23:30", 3, "2027-02-28T23:10:00+05:45", KTM) == expect(
        "2027-02-28T23:30:00+05:45", "2027-03-28T23:00:00+05:45", "2027-03-28T23:30:00+05:45"
    )


# --------------------------------------------------------------------------- cron


@pytest.mark.parametrize(
    ("schedule", "after", "expected"),
    [
        (
            "cron 0 9 * * 1-5",
            "2026-06-05T09:00:00+00:00",
            ["2026-06-08T09:00:00+00:00", "2026-06-09T09:00:00+00:00"],
        ),
        (
            "cron */15 * * * *",
            "2026-06-01T10:07:00+00:00",
            ["2026-06-01T10:15:00+00:00", "2026-06-01T10:30:00+00:00"],
        ),
        (
            "cron 5/20 * * * *",
            "2026-06-01T10:26:00+00:00",
            ["2026-06-01T10:45:00+00:00", "2026-06-01T11:05:00+00:00"],
        ),
        (
            "cron 1-30/10 8 * * *",
            "2026-06-01T08:15:00+00:00",
            ["2026-06-01T08:21:00+00:00", "2026-06-02T08:01:00+00:00"],
        ),
        (
            "cron 0 12 * jan,JUL Mon",
            "2026-06-01T00:00:00+00:00",
            ["2026-07-06T12:00:00+00:00", "2026-07-13T12:00:00+00:00"],
        ),
        # both day fields restricted: either matches (the 13th, or any Friday)
        (
            "cron 0 0 13 * 5",
            "2026-02-10T00:00:00+00:00",
            ["2026-02-13T00:00:00+00:00", "2026-02-20T00:00:00+00:00"],
        ),
        # a day field starting with '*': both must match (odd days that are Mondays)
        (
            "cron 0 0 */2 * 1",
            "2026-06-01T00:00:00+00:00",
            ["2026-06-15T00:00:00+00:00", "2026-06-29T00:00:00+00:00"],
        ),
        # 7 and sun are Sunday
        (
            "cron 30 6 * * 7",
            "2026-06-01T00:00:00+00:00",
            ["2026-06-07T06:30:00+00:00", "2026-06-14T06:30:00+00:00"],
        ),
        (
            "cron 30 6 * * sat-7",
            "2026-06-01T00:00:00+00:00",
            ["2026-06-06T06:30:00+00:00", "2026-06-07T06:30:00+00:00"],
        ),
        (
            "cron 0 0 31 * *",
            "2026-04-01T00:00:00+00:00",
            ["2026-05-31T00:00:00+00:00", "2026-07-31T00:00:00+00:00"],
        ),
        # once a leap year
        (
            "cron 0 0 29 2 *",
            "2026-01-01T00:00:00+00:00",
            ["2028-02-29T00:00:00+00:00", "2032-02-29T00:00:00+00:00"],
        ),
        (
            "cron 0 0 29 2 *",
            "2096-03-01T00:00:00+00:00",
            ["2104-02-29T00:00:00+00:00", "2108-02-29T00:00:00+00:00"],
        ),
        (
            "cron @daily",
            "2026-06-01T10:00:00+00:00",
            ["2026-06-02T00:00:00+00:00", "2026-06-03T00:00:00+00:00"],
        ),
        (
            "@hourly",
            "2026-06-01T10:00:00+00:00",
            ["2026-06-01T11:00:00+00:00", "2026-06-01T12:00:00+00:00"],
        ),
        (
            "cron @weekly",
            "2026-06-01T10:00:00+00:00",
            ["2026-06-07T00:00:00+00:00", "2026-06-14T00:00:00+00:00"],
        ),
        (
            "cron @monthly",
            "2026-06-01T10:00:00+00:00",
            ["2026-07-01T00:00:00+00:00", "2026-08-01T00:00:00+00:00"],
        ),
        (
            "cron @yearly",
            "2026-06-01T10:00:00+00:00",
            ["2027-01-01T00:00:00+00:00", "2028-01-01T00:00:00+00:00"],
        ),
        (
            "cron 59 23 31 12 *",
            "2026-12-31T23:59:00+00:00",
            ["2027-12-31T23:59:00+00:00", "2028-12-31T23:59:00+00:00"],
        ),
    ],
)
def test_cron(ro: psycopg.Connection, schedule: str, after: str, expected: list[str]) -> None:
    assert runs(ro, schedule, len(expected), after) == [ts(e) for e in expected]


def test_cron_in_kathmandu(ro: psycopg.Connection) -> None:
    assert runs(ro, "cron 0 9 * * 1-5", 2, "2026-06-05T09:00:00+05:45", KTM) == expect(
        "2026-06-08T09:00:00+05:45", "2026-06-09T09:00:00+05:45"
    )


def test_cron_spec_shape(ro: psycopg.Connection) -> None:
    spec = parse(ro, "cron  0,30 9-17/4 * jan-mar mon-fri")
    assert spec["kind"] == "cron"
    assert spec["schedule"] == "cron 0,30 9-17/4 * jan-mar mon-fri"
    assert spec["minute"] == [0, 30]
    assert spec["hour"] == [9, 13, 17]
    assert spec["dom"] == list(range(1, 32))
    assert spec["month"] == [1, 2, 3]
    assert spec["dow"] == [1, 2, 3, 4, 5]
    assert spec["minute_mask"] == (1 << 0) | (1 << 30)
    assert spec["day_or"] is False
    assert spec["clock"] == "wall"
    assert parse(ro, "cron */5 * * * *")["clock"] == "elapsed"
    assert parse(ro, "cron 0 * * * *")["clock"] == "elapsed"
    assert parse(ro, "cron 0 0 1 * 1")["day_or"] is True
    assert parse(ro, "cron 0 0 1 * */2")["day_or"] is False


def test_cron_leap_day_from_many_starts(ro: psycopg.Connection) -> None:
    row = ro.execute(
        """
        SELECT count(*) FROM generate_series(1, 400) i,
               LATERAL timers._next_due(
                   timers._parse_schedule('cron 0 0 29 2 *', 'UTC', now()),
                   '2001-01-01+00'::timestamptz + i * interval '1 day', 'UTC') t
         WHERE to_char(t AT TIME ZONE 'UTC', 'MM-DD HH24:MI') = '02-29 00:00'
           AND t > '2001-01-01+00'::timestamptz + i * interval '1 day'
           AND t <= '2001-01-01+00'::timestamptz + i * interval '1 day' + interval '4 years'
        """
    ).fetchone()
    assert row == (400,)


# --------------------------------------------------------------------------- once / in


def test_once_is_a_wall_time_in_the_zone(ro: psycopg.Connection) -> None:
    spec = parse(ro, "once 2027-01-04 09:00", KTM)
    assert spec == {
        "kind": "once",
        "schedule": "once 2027-01-04 09:00",
        "at": "2027-01-04T03:15:00Z",
    }
    assert runs(ro, "once 2027-01-04 09:00", 5, "2026-06-01T00:00:00+00:00", KTM) == expect(
        "2027-01-04T09:00:00+05:45"
    )


def test_once_with_seconds_and_offset(ro: psycopg.Connection) -> None:
    assert parse(ro, "once 2027-01-04 09:00:30")["at"] == "2027-01-04T09:00:30Z"
    assert parse(ro, "once 2027-01-04T09:00")["at"] == "2027-01-04T09:00:00Z"
    assert parse(ro, "once 2027-01-04 09:00+05:45", "UTC")["at"] == "2027-01-04T03:15:00Z"
    assert parse(ro, "once 2027-01-04 09:00Z", KTM)["at"] == "2027-01-04T09:00:00Z"


def test_once_in_the_past_is_not_due(ro: psycopg.Connection) -> None:
    spec = parse(ro, "once 2020-01-01 00:00")
    assert next_due(ro, spec, "2026-01-01T00:00:00+00:00") is None
    assert next_due(ro, spec, "2020-01-01T00:00:00+00:00") is None  # strictly after
    assert next_due(ro, spec, "2019-12-31T23:59:59+00:00") == ts("2020-01-01T00:00:00+00:00")
    assert runs(ro, "once 2020-01-01 00:00", 3, "2026-01-01T00:00:00+00:00") == []


def test_once_before_start_at_is_never_due(ro: psycopg.Connection) -> None:
    spec = parse(ro, "once 2027-01-04 09:00")
    assert (
        next_due(ro, spec, "2026-01-01T00:00:00+00:00", start_at="2027-01-05T00:00:00+00:00")
        is None
    )
    assert next_due(
        ro, spec, "2026-01-01T00:00:00+00:00", start_at="2027-01-04T09:00:00+00:00"
    ) == ts("2027-01-04T09:00:00+00:00")


@pytest.mark.parametrize(
    ("schedule", "zone", "stored", "at"),
    [
        ("in 30m", "UTC", "once 2026-12-01 10:30:00", "2026-12-01T10:30:00Z"),
        ("in 2h", KTM, "once 2026-12-01 17:45:00", "2026-12-01T12:00:00Z"),
        ("in 45s", "UTC", "once 2026-12-01 10:00:45", "2026-12-01T10:00:45Z"),
        ("in 1d", "UTC", "once 2026-12-02 10:00:00", "2026-12-02T10:00:00Z"),
        ("IN 90M", "UTC", "once 2026-12-01 11:30:00", "2026-12-01T11:30:00Z"),
    ],
)
def test_in_becomes_once(
    ro: psycopg.Connection, schedule: str, zone: str, stored: str, at: str
) -> None:
    spec = parse(ro, schedule, zone, now="2026-12-01T10:00:00.250+00:00")
    assert spec == {"kind": "once", "schedule": stored, "at": at}
    # what is stored parses back to the same instant
    assert parse(ro, stored, zone)["at"] == at


def test_in_counts_from_after_in_next_runs(ro: psycopg.Connection) -> None:
    assert runs(ro, "in 30m", 3, "2026-12-01T10:00:00+00:00") == expect("2026-12-01T10:30:00+00:00")


# --------------------------------------------------------------------------- trading


@pytest.fixture
def nepse(conn: psycopg.Connection) -> psycopg.Connection:
    """Calendar NEPSE: Sun-Thu until 2026-07-12, Mon-Fri from Mon 2026-07-13, holidays, extras."""
    conn.execute("INSERT INTO timers.calendars (name) VALUES ('NEPSE')")
    conn.execute(
        "INSERT INTO timers.calendar_weeks (calendar, from_day, days) VALUES"
        " ('NEPSE', '2020-01-01', 31),"  # sun..thu = bits 0-4
        " ('NEPSE', '2026-07-13', 62)"  # mon..fri = bits 1-5
    )
    conn.execute(
        "INSERT INTO timers.calendar_days (calendar, day, trading, note) VALUES"
        " ('NEPSE', '2026-07-07', false, 'holiday (Tue)'),"
        " ('NEPSE', '2026-07-08', false, 'holiday (Wed)'),"
        " ('NEPSE', '2026-07-11', true, 'extra Saturday'),"
        " ('NEPSE', '2026-07-17', false, 'holiday (Fri)')"
    )
    return conn


def test_trading_day(nepse: psycopg.Connection) -> None:
    def day(d: str, cal: str = "nepse") -> bool | None:
        row = nepse.execute("SELECT timers._trading_day(%s, %s::date)", [cal, d]).fetchone()
        assert row is not None
        value: bool | None = row[0]
        return value

    assert day("2026-07-05") is True  # Sun, Sun-Thu era
    assert day("2026-07-10") is False  # Fri, Sun-Thu era
    assert day("2026-07-07") is False  # holiday
    assert day("2026-07-11") is True  # extra Saturday
    assert day("2026-07-12") is True  # Sun, last day of the old era
    assert day("2026-07-13") is True  # Mon, new era
    assert day("2026-07-19") is False  # Sun, new era
    assert day("2026-07-17") is False  # holiday
    assert day("2019-12-31") is False  # before any era
    assert day("2026-07-05", "NePsE") is True  # names are case-insensitive
    assert day("2026-07-05", "nope") is None


def test_trading_schedule_follows_eras_holidays_and_extra_days(nepse: psycopg.Connection) -> None:
    got = runs(nepse, "trading nepse 15:05", 9, "2026-07-05T16:00:00+05:45", KTM)
    assert got == expect(
        "2026-07-06T15:05:00+05:45",  # Mon
        "2026-07-09T15:05:00+05:45",  # Thu (Tue, Wed holidays)
        "2026-07-11T15:05:00+05:45",  # Sat extra
        "2026-07-12T15:05:00+05:45",  # Sun (old era)
        "2026-07-13T15:05:00+05:45",  # Mon (new era)
        "2026-07-14T15:05:00+05:45",
        "2026-07-15T15:05:00+05:45",
        "2026-07-16T15:05:00+05:45",  # Thu; Fri 17 holiday
        "2026-07-20T15:05:00+05:45",  # Mon
    )


def test_trading_several_times(nepse: psycopg.Connection) -> None:
    assert runs(nepse, "trading NEPSE 11:00,15:05", 3, "2026-07-09T12:00:00+05:45", KTM) == expect(
        "2026-07-09T15:05:00+05:45", "2026-07-11T11:00:00+05:45", "2026-07-11T15:05:00+05:45"
    )


def test_trading_spec_shape(ro: psycopg.Connection) -> None:
    assert parse(ro, "trading Nepse 15:05,11:00") == {
        "kind": "trading",
        "schedule": "trading Nepse 15:05,11:00",
        "calendar": "Nepse",
        "times": ["11:00", "15:05"],
        "secs": [39600, 54300],
        "clock": "wall",
    }


def test_trading_missing_calendar_is_due_every_day(ro: psycopg.Connection) -> None:
    assert runs(ro, "trading nope 15:05", 3, "2026-07-10T00:00:00+05:45", KTM) == expect(
        "2026-07-10T15:05:00+05:45", "2026-07-11T15:05:00+05:45", "2026-07-12T15:05:00+05:45"
    )


def test_trading_calendar_without_trading_weekdays(conn: psycopg.Connection) -> None:
    conn.execute("INSERT INTO timers.calendars (name) VALUES ('rare')")
    conn.execute("INSERT INTO timers.calendar_weeks VALUES ('rare', '2000-01-01', 0)")
    conn.execute(
        "INSERT INTO timers.calendar_days (calendar, day, trading) VALUES"
        " ('rare', '2030-05-04', true), ('rare', '2099-01-01', true)"
    )
    assert runs(conn, "trading rare 10:00", 3, "2026-01-01T00:00:00+00:00") == expect(
        "2030-05-04T10:00:00+00:00", "2099-01-01T10:00:00+00:00"
    )
    # an era that starts trading later is found too
    conn.execute("INSERT INTO timers.calendar_weeks VALUES ('rare', '2040-01-01', 2)")  # mondays
    assert runs(conn, "trading rare 10:00", 3, "2031-01-01T00:00:00+00:00") == expect(
        "2040-01-02T10:00:00+00:00", "2040-01-09T10:00:00+00:00", "2040-01-16T10:00:00+00:00"
    )


def test_trading_with_no_trading_day_for_a_year_is_not_due(conn: psycopg.Connection) -> None:
    conn.execute("INSERT INTO timers.calendars (name) VALUES ('shut')")
    conn.execute("INSERT INTO timers.calendar_weeks VALUES ('shut', '2000-01-01', 127)")
    conn.execute(
        "INSERT INTO timers.calendar_days (calendar, day, trading)"
        " SELECT 'shut', d::date, false"
        " FROM generate_series('2026-01-01'::date, '2028-12-31', '1 day') d"
    )
    assert runs(conn, "trading shut 10:00", 1, "2026-01-01T00:00:00+00:00") == []
    # 395 holidays in a row (fetched 16 at a time) are still searched through
    assert runs(conn, "trading shut 10:00", 1, "2027-12-02T00:00:00+00:00") == expect(
        "2029-01-01T10:00:00+00:00"
    )
    assert runs(conn, "trading shut 10:00", 1, "2028-06-01T00:00:00+00:00") == expect(
        "2029-01-01T10:00:00+00:00"
    )


def test_trading_many_holidays_fetched_in_batches(conn: psycopg.Connection) -> None:
    conn.execute("INSERT INTO timers.calendars (name) VALUES ('busy')")
    conn.execute("INSERT INTO timers.calendar_weeks VALUES ('busy', '2000-01-01', 62)")
    # 50 weekdays of holidays in a row, then an extra Sunday
    conn.execute(
        "INSERT INTO timers.calendar_days (calendar, day, trading)"
        " SELECT 'busy', d::date, false"
        " FROM generate_series('2026-06-01'::date, '2026-08-09', '1 day') d"
        " WHERE extract(isodow FROM d) < 6"
    )
    conn.execute("INSERT INTO timers.calendar_days VALUES ('busy', '2026-08-09', true, 'Sunday')")
    assert runs(conn, "trading busy 10:00", 2, "2026-06-01T00:00:00+00:00") == expect(
        "2026-08-09T10:00:00+00:00", "2026-08-10T10:00:00+00:00"
    )


# --------------------------------------------------------------------------- spec shapes


@pytest.mark.parametrize(
    ("schedule", "spec"),
    [
        ("every 5m", {"kind": "every", "schedule": "every 5m", "seconds": 300, "clock": "elapsed"}),
        (
            "  every   2H ",
            {"kind": "every", "schedule": "every 2H", "seconds": 7200, "clock": "elapsed"},
        ),
        ("hourly", {"kind": "hourly", "schedule": "hourly", "minute": 0, "clock": "elapsed"}),
        (
            "hourly :15",
            {"kind": "hourly", "schedule": "hourly :15", "minute": 15, "clock": "elapsed"},
        ),
        (
            "daily 02:00 , 13:30",
            {
                "kind": "daily",
                "schedule": "daily 02:00,13:30",
                "times": ["02:00", "13:30"],
                "secs": [7200, 48600],
                "clock": "wall",
            },
        ),
        (
            "weekdays 11:00",
            {
                "kind": "weekly",
                "schedule": "weekdays 11:00",
                "dow": [1, 2, 3, 4, 5],
                "dow_mask": 62,
                "times": ["11:00"],
                "secs": [39600],
                "clock": "wall",
            },
        ),
        (
            "fri-sun 09:30:15",
            {
                "kind": "weekly",
                "schedule": "fri-sun 09:30:15",
                "dow": [0, 5, 6],
                "dow_mask": 97,
                "times": ["09:30:15"],
                "secs": [34215],
                "clock": "wall",
            },
        ),
        (
            "monthly 1 02:00",
            {
                "kind": "monthly",
                "schedule": "monthly 1 02:00",
                "day": 1,
                "times": ["02:00"],
                "secs": [7200],
                "clock": "wall",
            },
        ),
    ],
)
def test_spec_shapes(ro: psycopg.Connection, schedule: str, spec: dict[str, Any]) -> None:
    assert parse(ro, schedule) == spec


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ("every day", "bad \"every\" schedule 'every day'; "),
        ("every 0s", "bad \"every\" schedule 'every 0s': the interval 0s is not from 1s to 24h; "),
        (
            "every 25h",
            "bad \"every\" schedule 'every 25h': the interval 25h is not from 1s to 24h; ",
        ),
        (
            "every 86401s",
            "bad \"every\" schedule 'every 86401s': the interval 86401s is not from 1s to 24h; ",
        ),
        ("every 10", "bad \"every\" schedule 'every 10'; "),
        ("every", "bad \"every\" schedule 'every'; "),
        ("hourly :60", "bad \"hourly\" schedule 'hourly :60': minute 60 is out of range 0-59; "),
        ("hourly 15", "bad \"hourly\" schedule 'hourly 15'; "),
        ("daily", "bad \"daily\" schedule 'daily'; "),
        ("daily 25:00", "bad \"daily\" schedule 'daily 25:00': hour 25 is out of range 0-23; "),
        ("daily 12:60", "bad \"daily\" schedule 'daily 12:60': minute 60 is out of range 0-59; "),
        ("daily 9am", "bad \"daily\" schedule 'daily 9am': '9am' is not a time like 09:30; "),
        ("daily 09:00,", "bad \"daily\" schedule 'daily 09:00,': '' is not a time like 09:30; "),
        ("weekdays", "bad \"weekdays\" schedule 'weekdays'; "),
        (
            "mon-fry 11:00",
            "bad \"mon-fry\" schedule 'mon-fry 11:00': 'fry' is not a day "
            "(days: sun mon tue wed thu fri sat); ",
        ),
        ("weekly 11:00", "bad \"weekly\" schedule 'weekly 11:00'; "),
        (
            "monthly 0 02:00",
            "bad \"monthly\" schedule 'monthly 0 02:00': day 0 is out of range 1-31 "
            "(or write last); ",
        ),
        (
            "monthly 02:00",
            "bad \"monthly\" schedule 'monthly 02:00': a day of the month is missing before "
            'the time, as in "monthly 1 02:00"; ',
        ),
        (
            "trading nepse",
            "bad \"trading\" schedule 'trading nepse': a time like 09:30 is missing after "
            "the calendar 'nepse'; ",
        ),
        ("trading 15:05", "bad \"trading\" schedule 'trading 15:05'; "),
        (
            "trading nepse 15:5",
            "bad \"trading\" schedule 'trading nepse 15:5': '15:5' is not a time like 09:30; ",
        ),
        (
            "cron 61 * * * *",
            "bad \"cron\" schedule 'cron 61 * * * *': minute 61 is out of range 0-59; ",
        ),
        (
            "cron * * * *",
            "bad \"cron\" schedule 'cron * * * *': cron needs 5 fields (minute hour "
            "day-of-month month day-of-week), got 4; ",
        ),
        (
            "cron 0 24 * * *",
            "bad \"cron\" schedule 'cron 0 24 * * *': hour 24 is out of range 0-23; ",
        ),
        (
            "cron 0 0 0 * *",
            "bad \"cron\" schedule 'cron 0 0 0 * *': day of month 0 is out of range 1-31; ",
        ),
        (
            "cron 0 0 * 13 *",
            "bad \"cron\" schedule 'cron 0 0 * 13 *': month 13 is out of range 1-12; ",
        ),
        (
            "cron 0 0 * * 8",
            "bad \"cron\" schedule 'cron 0 0 * * 8': day of week 8 is out of range 0-7; ",
        ),
        ("cron 0 0 * foo *", "bad \"cron\" schedule 'cron 0 0 * foo *': 'foo' is not a month; "),
        (
            "cron */0 * * * *",
            "bad \"cron\" schedule 'cron */0 * * * *': step 0 in the minute field "
            "is out of range 1-60; ",
        ),
        (
            "cron 30-10 * * * *",
            "bad \"cron\" schedule 'cron 30-10 * * * *': the minute range 30-10 goes backwards; ",
        ),
        (
            "cron 0 0 31 2 *",
            "bad \"cron\" schedule 'cron 0 0 31 2 *': day of month 31 never occurs in month 2; ",
        ),
        (
            "cron 0 0 30,31 feb *",
            "bad \"cron\" schedule 'cron 0 0 30,31 feb *': day of month "
            "30,31 never occurs in month feb; ",
        ),
        (
            "cron 0 0 31 4,6 */2",
            "bad \"cron\" schedule 'cron 0 0 31 4,6 */2': day of month 31 "
            "never occurs in month 4,6; ",
        ),
        (
            "cron 1,,2 * * * *",
            "bad \"cron\" schedule 'cron 1,,2 * * * *': '1,,2' is not a valid minute field; ",
        ),
        (
            "cron @reboot",
            "bad \"cron\" schedule 'cron @reboot': '@reboot' is not one of @hourly, "
            "@daily, @weekly, @monthly, @yearly; ",
        ),
        (
            "once 2027-02-30 09:00",
            "bad \"once\" schedule 'once 2027-02-30 09:00': 2027-02-30 is not a date; ",
        ),
        (
            "once 2027-01-04 25:00",
            "bad \"once\" schedule 'once 2027-01-04 25:00': hour 25 is out of range 0-23; ",
        ),
        ("once tomorrow", "bad \"once\" schedule 'once tomorrow'; "),
        ("in 0s", "bad \"in\" schedule 'in 0s': the delay 0s is not from 1s to 36500d; "),
        ("in 30", "bad \"in\" schedule 'in 30'; "),
        ("in 30 m", "bad \"in\" schedule 'in 30 m'; "),
        ("", "bad \"\" schedule '': the schedule is empty; "),
        ("   ", "bad \"\" schedule '': the schedule is empty; "),
        (None, "bad \"\" schedule '': the schedule is empty; "),
        ("foo bar", "bad \"foo bar\" schedule 'foo bar'; "),
        ("fortnightly", "bad \"fortnightly\" schedule 'fortnightly'; "),
    ],
)
def test_bad_schedule(ro: psycopg.Connection, schedule: str | None, message: str) -> None:
    with pytest.raises(errors.InvalidParameterValue) as caught:
        parse(ro, schedule)
    assert caught.value.sqlstate == "22023"
    assert caught.value.diag.message_primary == message + EXAMPLES


def test_bad_schedule_in_next_runs(ro: psycopg.Connection) -> None:
    with pytest.raises(errors.InvalidParameterValue, match=r"^bad \"every\" schedule 'every day'"):
        runs(ro, "every day", 1, "2026-01-01T00:00:00+00:00")


# --------------------------------------------------------------------------- next_runs, zones


def test_next_runs_n_bounds(ro: psycopg.Connection) -> None:
    assert len(runs(ro, "every 1s", 1000, "2026-01-01T00:00:00+00:00")) == 1000
    for n in (0, 1001, -1):
        with pytest.raises(errors.InvalidParameterValue, match="n must be from 1 to 1000"):
            runs(ro, "every 1s", n, "2026-01-01T00:00:00+00:00")


def test_next_runs_zone_defaults_to_the_database_zone_then_utc(conn: psycopg.Connection) -> None:
    assert runs(conn, "daily 09:00", 1, "2026-06-01T00:00:00+00:00", None) == expect(
        "2026-06-01T09:00:00+00:00"
    )
    conn.execute("UPDATE timers.settings SET value = 'Asia/Kathmandu' WHERE key = 'timezone'")
    assert runs(conn, "daily 09:00", 1, "2026-06-01T00:00:00+00:00", None) == expect(
        "2026-06-01T09:00:00+05:45"
    )
    conn.execute("DELETE FROM timers.settings WHERE key = 'timezone'")
    assert runs(conn, "daily 09:00", 1, "2026-06-01T00:00:00+00:00", None) == expect(
        "2026-06-01T09:00:00+00:00"
    )


def test_next_runs_default_after_is_now(ro: psycopg.Connection) -> None:
    row = ro.execute(
        "SELECT t > now() AND t <= now() + interval '1 minute'"
        " FROM timers.next_runs('cron * * * * *', 1) t"
    ).fetchone()
    assert row == (True,)


def test_next_runs_is_not_affected_by_the_session_zone(conn: psycopg.Connection) -> None:
    conn.execute("SET TimeZone = 'Pacific/Chatham'")
    assert runs(conn, "daily 09:00", 1, "2026-06-01T00:00:00+00:00", KTM) == expect(
        "2026-06-01T09:00:00+05:45"
    )
    assert runs(conn, "every 24h", 1, "2026-06-01T00:00:00+00:00", KTM) == expect(
        "2026-06-02T00:00:00+05:45"
    )


@pytest.mark.parametrize(
    ("zone", "canonical"),
    [
        ("UTC", "UTC"),
        ("asia/kathmandu", "Asia/Kathmandu"),
        (" Europe/Berlin ", "Europe/Berlin"),
        ("Etc/GMT+5", "Etc/GMT+5"),
        ("US/Eastern", "US/Eastern"),
    ],
)
def test_check_zone(ro: psycopg.Connection, zone: str, canonical: str) -> None:
    with ro.transaction():
        ro.execute("SET LOCAL TimeZone = 'Pacific/Chatham'")
        assert ro.execute("SELECT timers._check_zone(%s)", [zone]).fetchone() == (canonical,)
        # the session's zone is left alone
        assert ro.execute("SHOW TimeZone").fetchone() == ("Pacific/Chatham",)


@pytest.mark.parametrize("zone", ["Mars/Olympus", "", None, "UTC+3", "+05:45", "CET", "PST"])
def test_check_zone_refuses(ro: psycopg.Connection, zone: str | None) -> None:
    with pytest.raises(errors.InvalidParameterValue) as caught:
        ro.execute("SELECT timers._check_zone(%s)", [zone])
    message = caught.value.diag.message_primary or ""
    assert message.startswith(f"unknown time zone '{zone or ''}'")
    assert message.endswith("use a name like 'UTC', 'Asia/Kathmandu' or 'America/New_York'")


def test_next_runs_refuses_an_unknown_zone(ro: psycopg.Connection) -> None:
    with pytest.raises(errors.InvalidParameterValue, match="unknown time zone 'Mars/Olympus'"):
        runs(ro, "daily 09:00", 1, "2026-06-01T00:00:00+00:00", "Mars/Olympus")


# --------------------------------------------------------------------------- rights


def test_reader_and_runner_may_preview_nobody_else(db: Database) -> None:
    with db.connect("pgt_reader") as reader:
        assert runs(reader, "hourly", 1, "2026-01-01T00:00:00+00:00") == expect(
            "2026-01-01T01:00:00+00:00"
        )
        row = reader.execute(
            "SELECT timers._next_due(timers._parse_schedule('hourly', 'UTC', now()),"
            " '2026-01-01+00', 'UTC')"
        ).fetchone()
        assert row == (ts("2026-01-01T01:00:00+00:00"),)
    with db.connect() as su:
        granted = su.execute(
            "SELECT has_function_privilege('pgtimers_runner',"
            " 'timers._next_due(jsonb, timestamptz, text, timestamptz)', 'EXECUTE'),"
            " has_function_privilege('pgt_nobody',"
            " 'timers.next_runs(text, integer, timestamptz, text)', 'EXECUTE'),"
            " has_function_privilege('pgt_nobody',"
            " 'timers._parse_schedule(text, text, timestamptz)', 'EXECUTE')"
        ).fetchone()
        assert granted == (True, False, False)

"""Monthly forms: last day, days before the last, lists, days 29-31, the Nth weekday.

Python's calendar module is the oracle over 20 years (2025-2044, five leap Februaries).
Also here: refusals naming the bad part, and refusals without internal CONTEXT frames.
"""

from __future__ import annotations

import calendar
import datetime as dt
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
import pytest

from tests.integration.test_schedule import read_only_database  # noqa: F401  (fixture "ro")

KTM = "Asia/Kathmandu"
YEARS = range(2025, 2045)
AFTER = "2024-12-31T23:59:00+00:00"

DaysOf = Callable[[int, int], list[int]]


def runs(ro: psycopg.Connection, schedule: str, n: int, after: str, zone: str) -> list[dt.datetime]:
    rows = ro.execute(
        "SELECT t FROM timers.next_runs(%s, %s, %s::timestamptz, %s) t", [schedule, n, after, zone]
    ).fetchall()
    return [r[0] for r in rows]


def oracle(days_of: DaysOf, hour: int, minute: int, zone: str) -> list[dt.datetime]:
    """The due times of 20 years of months, from Python's calendar module."""
    tz = ZoneInfo(zone)
    return [
        dt.datetime(y, m, d, hour, minute, tzinfo=tz)
        for y in YEARS
        for m in range(1, 13)
        for d in sorted(set(days_of(y, m)))
    ]


def ndays(y: int, m: int) -> int:
    return calendar.monthrange(y, m)[1]


def nth_weekday(n: int, weekday: int) -> DaysOf:
    """Days of the Nth (n = -1: last) `weekday` (Python's: 0 = Monday) of a month."""

    def days_of(y: int, m: int) -> list[int]:
        hits = [w[weekday] for w in calendar.monthcalendar(y, m) if w[weekday] != 0]
        return [hits[n - 1 if n > 0 else n]]

    return days_of


ORACLE_CASES: list[tuple[str, DaysOf]] = [
    ("monthly last 18:00", lambda y, m: [ndays(y, m)]),
    ("monthly -1 18:00", lambda y, m: [ndays(y, m) - 1]),
    ("monthly -3 18:00", lambda y, m: [ndays(y, m) - 3]),
    ("monthly last-27 18:00", lambda y, m: [ndays(y, m) - 27]),
    ("monthly 1,15,last 18:00", lambda y, m: [1, 15, ndays(y, m)]),
    ("monthly 31 18:00", lambda y, m: [31] if ndays(y, m) == 31 else []),
    ("monthly 29 18:00", lambda y, m: [29] if ndays(y, m) >= 29 else []),
    (
        "monthly 30,-2,last 18:00",
        lambda y, m: [d for d in (30,) if d <= ndays(y, m)] + [ndays(y, m) - 2, ndays(y, m)],
    ),
    ("monthly 2nd tue 18:00", nth_weekday(2, calendar.TUESDAY)),
    ("monthly last fri 18:00", nth_weekday(-1, calendar.FRIDAY)),
    ("monthly 1st sun 18:00", nth_weekday(1, calendar.SUNDAY)),
    ("monthly 4th sat 18:00", nth_weekday(4, calendar.SATURDAY)),
    ("monthly last mon 18:00", nth_weekday(-1, calendar.MONDAY)),
]


@pytest.mark.parametrize(("schedule", "days_of"), ORACLE_CASES, ids=[c[0] for c in ORACLE_CASES])
def test_twenty_years_against_python_calendar(
    ro: psycopg.Connection, schedule: str, days_of: DaysOf
) -> None:
    expected = oracle(days_of, 18, 0, KTM)
    assert runs(ro, schedule, len(expected), AFTER, KTM) == expected


def test_leap_februaries_end_on_the_29th(ro: psycopg.Connection) -> None:
    ends = runs(ro, "monthly last 18:00", 240, AFTER, KTM)
    februaries = [
        t.astimezone(ZoneInfo(KTM)).day for t in ends if t.astimezone(ZoneInfo(KTM)).month == 2
    ]
    assert [2025 + i for i, d in enumerate(februaries) if d == 29] == [2028, 2032, 2036, 2040, 2044]
    assert set(februaries) == {28, 29}


def test_monthly_1_is_unchanged(ro: psycopg.Connection) -> None:
    spec = ro.execute("SELECT timers._parse_schedule('monthly 1 02:00', 'UTC', now())").fetchone()
    assert spec is not None
    assert spec[0] == {
        "kind": "monthly",
        "schedule": "monthly 1 02:00",
        "day": 1,
        "times": ["02:00"],
        "secs": [7200],
        "clock": "wall",
    }


@pytest.mark.parametrize(
    ("schedule", "shape"),
    [
        ("monthly LAST 18:00", {"days": [], "from_end": [0]}),
        ("monthly 15,1,last-3,-3,last 18:00", {"days": [1, 15], "from_end": [0, 3]}),
        ("monthly 31 18:00", {"day": 31}),
        ("monthly 2nd Tue 18:00", {"nth": 2, "weekday": 2}),
        ("monthly last fri 18:00", {"nth": -1, "weekday": 5}),
    ],
)
def test_spec_shapes(ro: psycopg.Connection, schedule: str, shape: dict[str, Any]) -> None:
    row = ro.execute("SELECT timers._parse_schedule(%s, 'UTC', now())", [schedule]).fetchone()
    assert row is not None
    assert (
        row[0]
        == {
            "kind": "monthly",
            "schedule": schedule,
            "times": ["18:00"],
            "secs": [64800],
            "clock": "wall",
        }
        | shape
    )


# --------------------------------------------------------------------------- DST


@pytest.mark.parametrize(
    ("schedule", "zone", "day", "expected"),
    [
        # the EU springs forward on the last Sunday of March: 02:30 is in the gap
        ("monthly last sun 02:30", "Europe/Berlin", "2026-03-29", "2026-03-29T03:00:00+02:00"),
        # and falls back on the last Sunday of October: 02:30 comes twice, the first counts
        ("monthly last sun 02:30", "Europe/Berlin", "2026-10-25", "2026-10-25T02:30:00+02:00"),
        # the US springs forward on the 2nd Sunday of March, falls back on the 1st of November
        ("monthly 2nd sun 02:30", "America/New_York", "2026-03-08", "2026-03-08T03:00:00-04:00"),
        ("monthly 1st sun 01:30", "America/New_York", "2026-11-01", "2026-11-01T01:30:00-04:00"),
        ("monthly 8 02:30", "America/New_York", "2026-03-08", "2026-03-08T03:00:00-04:00"),
        ("monthly -23 02:30", "America/New_York", "2026-03-08", "2026-03-08T03:00:00-04:00"),
    ],
)
def test_dst_days_as_daily_does(
    ro: psycopg.Connection, schedule: str, zone: str, day: str, expected: str
) -> None:
    after = f"{day}T00:00:00+00:00"
    got = runs(ro, schedule, 1, after, zone)
    assert got == [dt.datetime.fromisoformat(expected)]
    daily = runs(ro, "daily " + schedule.rsplit(" ", 1)[1], 1, after, zone)
    assert got == daily


# --------------------------------------------------------------------------- the preview's note


def notices(ro: psycopg.Connection, schedule: str) -> list[str]:
    got: list[str] = []

    def keep(diag: psycopg.errors.Diagnostic) -> None:
        got.append(diag.message_primary or "")

    ro.add_notice_handler(keep)
    try:
        runs(ro, schedule, 1, AFTER, "UTC")
    finally:
        ro.remove_notice_handler(keep)
    return got


def test_next_runs_names_the_skipped_months(ro: psycopg.Connection) -> None:
    assert notices(ro, "monthly 31 02:00") == [
        '"monthly 31 02:00" skips day 31 in the months without it (as cron does): February, '
        'April, June, September and November have no 31st; write "last" for the last day of '
        "every month"
    ]
    assert notices(ro, "monthly 1,29,30 02:00") == [
        '"monthly 1,29,30 02:00" skips days 29 and 30 in the months without them (as cron '
        "does): February of a common year has no 29th, and February has no 30th; write "
        '"last" for the last day of every month'
    ]
    assert notices(ro, "monthly last 02:00") == []
    assert notices(ro, "monthly 28 02:00") == []


def test_next_runs_says_a_trading_calendar_is_missing(ro: psycopg.Connection) -> None:
    (note,) = notices(ro, "trading nosuch last 10:00")
    assert note.startswith("there is no calendar 'nosuch' in database ")
    assert note.endswith(
        ": this preview trades every day, and timers.save refuses the "
        "schedule until the calendar is made"
    )

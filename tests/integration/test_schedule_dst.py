"""Daylight saving time: spring-forward gaps and fall-back repeats, in several zones.

The rules (docs/schedules.md, "DST"):
- wall schedules (daily, weekly, monthly, trading, once, cron with a fixed minute and
  hour): a wall time in a gap runs once at the end of the gap; a repeated wall time
  runs once, at its first occurrence;
- elapsed schedules (hourly, cron whose minute or hour field starts with '*'): every
  real instant whose local time matches, so a skipped hour has no runs and a
  repeated hour runs again;
- every N: a grid from the first instant of the local day, stepping in real time.

Transitions used (checked against Python's zoneinfo):
  America/New_York   2026-03-08 02:00 EST -> 03:00 EDT (07:00Z)
                     2026-11-01 02:00 EDT -> 01:00 EST (06:00Z)
  Europe/Berlin      2026-03-29 02:00 CET -> 03:00 CEST (01:00Z)
                     2026-10-25 03:00 CEST -> 02:00 CET (01:00Z)
  Australia/Sydney   2026-04-05 03:00 AEDT -> 02:00 AEST (04-04 16:00Z)
                     2026-10-04 02:00 AEST -> 03:00 AEDT (10-03 16:00Z)
  Australia/Lord_Howe (30-minute DST)
                     2026-04-05 02:00 -> 01:30 (04-04 15:00Z)
                     2026-10-04 02:00 -> 02:30 (10-03 15:30Z)
  America/Havana     2026-03-08 00:00 -> 01:00 (05:00Z, midnight is skipped)
                     2026-11-01 01:00 -> 00:00 (05:00Z, midnight happens twice)
"""

from __future__ import annotations

import datetime as dt
import itertools
from zoneinfo import ZoneInfo

import psycopg
import pytest

from tests.integration.test_schedule import read_only_database  # noqa: F401  (fixture "ro")

NY = "America/New_York"
BERLIN = "Europe/Berlin"
SYDNEY = "Australia/Sydney"
LORD_HOWE = "Australia/Lord_Howe"
HAVANA = "America/Havana"


def runs(ro: psycopg.Connection, schedule: str, n: int, after: str, zone: str) -> list[str]:
    """Due times as ISO strings in the zone, e.g. '2026-03-08T03:00:00-04:00'."""
    rows = ro.execute(
        "SELECT t FROM timers.next_runs(%s, %s, %s::timestamptz, %s) t", [schedule, n, after, zone]
    ).fetchall()
    return [r[0].astimezone(ZoneInfo(zone)).isoformat() for r in rows]


def test_zoneinfo_agrees_on_the_transitions() -> None:
    ny = ZoneInfo(NY)
    assert dt.datetime(2026, 3, 8, 7, tzinfo=dt.timezone.utc).astimezone(ny).hour == 3
    assert dt.datetime(2026, 11, 1, 6, tzinfo=dt.timezone.utc).astimezone(ny).hour == 1


# --------------------------------------------------------------------------- New York, spring


@pytest.mark.parametrize(
    ("schedule", "after", "expected"),
    [
        # a wall time in the gap runs at the end of the gap, once
        (
            "daily 02:30",
            "2026-03-07T00:00:00-05:00",
            ["2026-03-07T02:30:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"],
        ),
        (
            "daily 02:00,02:30,03:00",
            "2026-03-08T00:00:00-05:00",
            ["2026-03-08T03:00:00-04:00", "2026-03-09T02:00:00-04:00", "2026-03-09T02:30:00-04:00"],
        ),
        (
            "daily 03:30",
            "2026-03-08T00:00:00-05:00",
            ["2026-03-08T03:30:00-04:00", "2026-03-09T03:30:00-04:00"],
        ),
        (
            "sun 02:30",
            "2026-03-01T12:00:00-05:00",
            ["2026-03-08T03:00:00-04:00", "2026-03-15T02:30:00-04:00"],
        ),
        (
            "cron 30 2 * * *",
            "2026-03-08T00:00:00-05:00",
            ["2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"],
        ),
        (
            "cron 0,30 2 * * *",
            "2026-03-08T00:00:00-05:00",
            ["2026-03-08T03:00:00-04:00", "2026-03-09T02:00:00-04:00"],
        ),
        # elapsed: the skipped hour has no runs, real spacing stays regular
        (
            "cron */30 * * * *",
            "2026-03-08T01:00:00-05:00",
            ["2026-03-08T01:30:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00"],
        ),
        (
            "cron * 2 * * *",
            "2026-03-08T01:58:00-05:00",
            ["2026-03-09T02:00:00-04:00", "2026-03-09T02:01:00-04:00"],
        ),
        (
            "hourly :30",
            "2026-03-08T00:00:00-05:00",
            ["2026-03-08T00:30:00-05:00", "2026-03-08T01:30:00-05:00", "2026-03-08T03:30:00-04:00"],
        ),
        (
            "hourly",
            "2026-03-08T00:30:00-05:00",
            ["2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T04:00:00-04:00"],
        ),
        # every: the grid from local midnight steps in real time
        (
            "every 1h",
            "2026-03-08T00:00:00-05:00",
            ["2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T04:00:00-04:00"],
        ),
        (
            "every 15m",
            "2026-03-08T01:40:00-05:00",
            ["2026-03-08T01:45:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T03:15:00-04:00"],
        ),
        (
            "every 2h",
            "2026-03-08T00:00:00-05:00",
            ["2026-03-08T03:00:00-04:00", "2026-03-08T05:00:00-04:00", "2026-03-08T07:00:00-04:00"],
        ),
        (
            "every 2h",
            "2026-03-08T22:00:00-04:00",
            ["2026-03-08T23:00:00-04:00", "2026-03-09T00:00:00-04:00", "2026-03-09T02:00:00-04:00"],
        ),
        # 7 minutes: the 23-hour day ends at 23:59, then midnight
        (
            "every 7m",
            "2026-03-08T23:55:00-04:00",
            ["2026-03-08T23:59:00-04:00", "2026-03-09T00:00:00-04:00", "2026-03-09T00:07:00-04:00"],
        ),
        (
            "every 24h",
            "2026-03-07T12:00:00-05:00",
            ["2026-03-08T00:00:00-05:00", "2026-03-09T00:00:00-04:00", "2026-03-10T00:00:00-04:00"],
        ),
        ("once 2026-03-08 02:30", "2026-03-01T00:00:00-05:00", ["2026-03-08T03:00:00-04:00"]),
        (
            "monthly 8 02:30",
            "2026-03-01T00:00:00-05:00",
            ["2026-03-08T03:00:00-04:00", "2026-04-08T02:30:00-04:00"],
        ),
        # a trading timer whose calendar is missing is due daily, by the same wall rules
        (
            "trading nope 02:30",
            "2026-03-07T12:00:00-05:00",
            ["2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"],
        ),
    ],
)
def test_new_york_spring_forward(
    ro: psycopg.Connection, schedule: str, after: str, expected: list[str]
) -> None:
    assert runs(ro, schedule, len(expected), after, NY) == expected


# --------------------------------------------------------------------------- New York, fall


@pytest.mark.parametrize(
    ("schedule", "after", "expected"),
    [
        # a repeated wall time runs once, at its first occurrence (EDT)
        (
            "daily 01:30",
            "2026-10-31T12:00:00-04:00",
            ["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"],
        ),
        (
            "daily 01:00,01:30,02:00",
            "2026-11-01T00:00:00-04:00",
            [
                "2026-11-01T01:00:00-04:00",
                "2026-11-01T01:30:00-04:00",
                "2026-11-01T02:00:00-05:00",
                "2026-11-02T01:00:00-05:00",
            ],
        ),
        # from inside the second pass the repeated time is over for the day
        ("daily 01:30", "2026-11-01T01:10:00-05:00", ["2026-11-02T01:30:00-05:00"]),
        (
            "daily 01:05,02:00",
            "2026-11-01T01:10:00-05:00",
            ["2026-11-01T02:00:00-05:00", "2026-11-02T01:05:00-05:00"],
        ),
        (
            "cron 30 1 * * *",
            "2026-10-31T12:00:00-04:00",
            ["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"],
        ),
        (
            "cron 0-59/20 1 * * *",
            "2026-11-01T00:45:00-04:00",
            [
                "2026-11-01T01:00:00-04:00",
                "2026-11-01T01:20:00-04:00",
                "2026-11-01T01:40:00-04:00",
                "2026-11-02T01:00:00-05:00",
            ],
        ),
        # elapsed: the repeated hour runs again
        (
            "hourly :30",
            "2026-11-01T00:00:00-04:00",
            [
                "2026-11-01T00:30:00-04:00",
                "2026-11-01T01:30:00-04:00",
                "2026-11-01T01:30:00-05:00",
                "2026-11-01T02:30:00-05:00",
            ],
        ),
        (
            "cron 15 * * * *",
            "2026-11-01T01:30:00-04:00",
            ["2026-11-01T01:15:00-05:00", "2026-11-01T02:15:00-05:00"],
        ),
        (
            "cron 15 * * * *",
            "2026-11-01T01:05:00-05:00",
            ["2026-11-01T01:15:00-05:00", "2026-11-01T02:15:00-05:00"],
        ),
        (
            "cron */20 * * * *",
            "2026-11-01T01:50:00-04:00",
            [
                "2026-11-01T01:00:00-05:00",
                "2026-11-01T01:20:00-05:00",
                "2026-11-01T01:40:00-05:00",
                "2026-11-01T02:00:00-05:00",
            ],
        ),
        (
            "cron * 1 * * *",
            "2026-11-01T01:58:00-04:00",
            ["2026-11-01T01:59:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T01:01:00-05:00"],
        ),
        (
            "cron * 1 * * *",
            "2026-11-01T01:58:00-05:00",
            ["2026-11-01T01:59:00-05:00", "2026-11-02T01:00:00-05:00"],
        ),
        # every: 25 real hours in the day
        (
            "every 1h",
            "2026-11-01T00:30:00-04:00",
            ["2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00"],
        ),
        (
            "every 1h",
            "2026-11-01T22:30:00-05:00",
            ["2026-11-01T23:00:00-05:00", "2026-11-02T00:00:00-05:00"],
        ),
        (
            "every 2h",
            "2026-11-01T00:00:00-04:00",
            ["2026-11-01T01:00:00-05:00", "2026-11-01T03:00:00-05:00"],
        ),
        # every 24h: the 25-hour day has a second point at 23:00
        (
            "every 24h",
            "2026-10-31T12:00:00-04:00",
            ["2026-11-01T00:00:00-04:00", "2026-11-01T23:00:00-05:00", "2026-11-02T00:00:00-05:00"],
        ),
        ("once 2026-11-01 01:30", "2026-10-01T00:00:00-04:00", ["2026-11-01T01:30:00-04:00"]),
        ("once 2026-11-01 01:30-05:00", "2026-10-01T00:00:00-04:00", ["2026-11-01T01:30:00-05:00"]),
        # an elapsed cron that only matches the repeated hour, found from months before:
        # both passes run
        (
            "cron * 1 1 11 *",
            "2026-01-01T00:00:00-05:00",
            ["2026-11-01T01:00:00-04:00", "2026-11-01T01:01:00-04:00"],
        ),
        (
            "cron * 1 1 11 *",
            "2026-11-01T01:58:00-04:00",
            ["2026-11-01T01:59:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T01:01:00-05:00"],
        ),
        ("cron * 1 1 11 *", "2026-11-01T01:59:00-05:00", ["2027-11-01T01:00:00-04:00"]),
        (
            "cron 0 1 1 11 *",
            "2026-01-01T00:00:00-05:00",
            ["2026-11-01T01:00:00-04:00", "2027-11-01T01:00:00-04:00"],
        ),
    ],
)
def test_new_york_fall_back(
    ro: psycopg.Connection, schedule: str, after: str, expected: list[str]
) -> None:
    assert runs(ro, schedule, len(expected), after, NY) == expected


def test_in_landing_in_the_second_pass_keeps_its_offset(ro: psycopg.Connection) -> None:
    row = ro.execute(
        "SELECT timers._parse_schedule('in 30m', %s, '2026-11-01T01:45:00-04:00')", [NY]
    ).fetchone()
    assert row == (
        {
            "kind": "once",
            "schedule": "once 2026-11-01 01:15:00-05:00",
            "at": "2026-11-01T06:15:00Z",
        },
    )
    row = ro.execute(
        "SELECT timers._parse_schedule('once 2026-11-01 01:15:00-05:00', %s, now())->>'at'", [NY]
    ).fetchone()
    assert row == ("2026-11-01T06:15:00Z",)


# --------------------------------------------------------------------------- Berlin


@pytest.mark.parametrize(
    ("schedule", "after", "expected"),
    [
        (
            "daily 02:15",
            "2026-03-28T12:00:00+01:00",
            ["2026-03-29T03:00:00+02:00", "2026-03-30T02:15:00+02:00"],
        ),
        (
            "cron 15 2 * * *",
            "2026-03-28T12:00:00+01:00",
            ["2026-03-29T03:00:00+02:00", "2026-03-30T02:15:00+02:00"],
        ),
        (
            "cron 0 9 * * 1-5",
            "2026-03-27T12:00:00+01:00",
            ["2026-03-30T09:00:00+02:00", "2026-03-31T09:00:00+02:00"],
        ),
        (
            "hourly :15",
            "2026-03-29T00:00:00+01:00",
            ["2026-03-29T00:15:00+01:00", "2026-03-29T01:15:00+01:00", "2026-03-29T03:15:00+02:00"],
        ),
        (
            "every 30m",
            "2026-03-29T01:40:00+01:00",
            ["2026-03-29T03:00:00+02:00", "2026-03-29T03:30:00+02:00"],
        ),
        (
            "every 1h",
            "2026-03-29T00:00:00+01:00",
            ["2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00"],
        ),
    ],
)
def test_berlin_spring_forward(
    ro: psycopg.Connection, schedule: str, after: str, expected: list[str]
) -> None:
    assert runs(ro, schedule, len(expected), after, BERLIN) == expected


@pytest.mark.parametrize(
    ("schedule", "after", "expected"),
    [
        (
            "daily 02:30",
            "2026-10-24T12:00:00+02:00",
            ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"],
        ),
        (
            "cron 30 2 * * *",
            "2026-10-24T12:00:00+02:00",
            ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"],
        ),
        (
            "hourly :30",
            "2026-10-25T02:00:00+02:00",
            ["2026-10-25T02:30:00+02:00", "2026-10-25T02:30:00+01:00", "2026-10-25T03:30:00+01:00"],
        ),
        (
            "cron */30 2 * * *",
            "2026-10-24T12:00:00+02:00",
            [
                "2026-10-25T02:00:00+02:00",
                "2026-10-25T02:30:00+02:00",
                "2026-10-25T02:00:00+01:00",
                "2026-10-25T02:30:00+01:00",
                "2026-10-26T02:00:00+01:00",
            ],
        ),
        (
            "every 1h",
            "2026-10-25T01:30:00+02:00",
            ["2026-10-25T02:00:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T03:00:00+01:00"],
        ),
    ],
)
def test_berlin_fall_back(
    ro: psycopg.Connection, schedule: str, after: str, expected: list[str]
) -> None:
    assert runs(ro, schedule, len(expected), after, BERLIN) == expected


# --------------------------------------------------------------------------- southern hemisphere


@pytest.mark.parametrize(
    ("schedule", "after", "expected"),
    [
        # April: fall back, 02:00-02:59 twice
        (
            "daily 02:30",
            "2026-04-04T12:00:00+11:00",
            ["2026-04-05T02:30:00+11:00", "2026-04-06T02:30:00+10:00"],
        ),
        (
            "hourly :30",
            "2026-04-05T01:00:00+11:00",
            [
                "2026-04-05T01:30:00+11:00",
                "2026-04-05T02:30:00+11:00",
                "2026-04-05T02:30:00+10:00",
                "2026-04-05T03:30:00+10:00",
            ],
        ),
        # October: spring forward, 02:00-02:59 skipped
        (
            "daily 02:30",
            "2026-10-03T12:00:00+10:00",
            ["2026-10-04T03:00:00+11:00", "2026-10-05T02:30:00+11:00"],
        ),
        (
            "cron 0 2 * * *",
            "2026-10-03T12:00:00+10:00",
            ["2026-10-04T03:00:00+11:00", "2026-10-05T02:00:00+11:00"],
        ),
        (
            "cron 0 * * * *",
            "2026-10-04T00:30:00+10:00",
            ["2026-10-04T01:00:00+10:00", "2026-10-04T03:00:00+11:00"],
        ),
    ],
)
def test_sydney(ro: psycopg.Connection, schedule: str, after: str, expected: list[str]) -> None:
    assert runs(ro, schedule, len(expected), after, SYDNEY) == expected


@pytest.mark.parametrize(
    ("schedule", "after", "expected"),
    [
        # 30-minute DST: 02:00-02:29 skipped in October, 01:30-01:59 repeated in April
        (
            "daily 02:15",
            "2026-10-03T12:00:00+10:30",
            ["2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"],
        ),
        (
            "daily 01:45",
            "2026-04-04T12:00:00+11:00",
            ["2026-04-05T01:45:00+11:00", "2026-04-06T01:45:00+10:30"],
        ),
        (
            "hourly :45",
            "2026-04-05T00:00:00+11:00",
            [
                "2026-04-05T00:45:00+11:00",
                "2026-04-05T01:45:00+11:00",
                "2026-04-05T01:45:00+10:30",
                "2026-04-05T02:45:00+10:30",
            ],
        ),
        (
            "hourly :15",
            "2026-10-04T01:00:00+10:30",
            ["2026-10-04T01:15:00+10:30", "2026-10-04T03:15:00+11:00"],
        ),
    ],
)
def test_lord_howe_half_hour_dst(
    ro: psycopg.Connection, schedule: str, after: str, expected: list[str]
) -> None:
    assert runs(ro, schedule, len(expected), after, LORD_HOWE) == expected


@pytest.mark.parametrize(
    ("schedule", "after", "expected"),
    [
        # midnight does not exist on 2026-03-08: the day starts at 01:00
        (
            "daily 00:00",
            "2026-03-07T12:00:00-05:00",
            ["2026-03-08T01:00:00-04:00", "2026-03-09T00:00:00-04:00"],
        ),
        (
            "every 6h",
            "2026-03-07T20:00:00-05:00",
            ["2026-03-08T01:00:00-04:00", "2026-03-08T07:00:00-04:00"],
        ),
        # midnight happens twice on 2026-11-01: the day starts at the first one
        (
            "every 6h",
            "2026-10-31T20:00:00-04:00",
            ["2026-11-01T00:00:00-04:00", "2026-11-01T05:00:00-05:00"],
        ),
        (
            "every 1h",
            "2026-11-01T00:30:00-05:00",
            ["2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00"],
        ),
        (
            "daily 00:00",
            "2026-10-31T12:00:00-04:00",
            ["2026-11-01T00:00:00-04:00", "2026-11-02T00:00:00-05:00"],
        ),
    ],
)
def test_havana_midnight_transitions(
    ro: psycopg.Connection, schedule: str, after: str, expected: list[str]
) -> None:
    assert runs(ro, schedule, len(expected), after, HAVANA) == expected


def test_a_thousand_runs_across_transitions_are_increasing(ro: psycopg.Connection) -> None:
    """Due times across several DST changes are strictly increasing; daily ones fall on each day."""
    ny = ZoneInfo(NY)
    for schedule in ("daily 02:30", "daily 01:30", "hourly :30", "cron 30 1 * * *", "every 25m"):
        rows = ro.execute(
            "SELECT t FROM timers.next_runs(%s, 1000, '2026-01-01T00:00:00-05:00', %s) t",
            [schedule, NY],
        ).fetchall()
        times = [r[0] for r in rows]
        assert len(times) == 1000
        assert all(a < b for a, b in itertools.pairwise(times)), schedule
        if not schedule.startswith(("hourly", "every")):
            days = [t.astimezone(ny).date() for t in times]
            assert all((b - a).days == 1 for a, b in itertools.pairwise(days)), schedule

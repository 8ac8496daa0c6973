"""Trading calendars from SQL: eras, holidays, extra days, known range, and their timers."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import psycopg
import pytest
from psycopg import errors

from tests.conftest import Database


def days(conn: psycopg.Connection, cal: str, start: str, end: str) -> list[str]:
    rows = conn.execute(
        "SELECT to_char(d, 'Dy DD') FROM timers.trading_days(%s, %s, %s) d", [cal, start, end]
    ).fetchall()
    return [r[0] for r in rows]


def next_due(conn: psycopg.Connection, name: str) -> dt.datetime | None:
    row = conn.execute("SELECT next_due_at FROM timers.timers WHERE name = %s", [name]).fetchone()
    assert row is not None
    value: dt.datetime | None = row[0]
    return value


def test_era_change_sun_thu_then_mon_fri(conn: psycopg.Connection) -> None:
    conn.execute("SELECT timers.save_calendar('nepse', 'sun-thu')")
    # Nepal moved its trading week from Sun-Thu to Mon-Fri (here: from Mon 2026-07-13).
    conn.execute("SELECT timers.set_calendar_week('nepse', '2026-07-13', 'mon-fri')")
    assert days(conn, "nepse", "2026-07-05", "2026-07-18") == [
        "Sun 05",
        "Mon 06",
        "Tue 07",
        "Wed 08",
        "Thu 09",  # Sun-Thu era
        "Sun 12",
        "Mon 13",
        "Tue 14",
        "Wed 15",
        "Thu 16",
        "Fri 17",  # Mon-Fri era
    ]


def test_holidays_extra_days_and_remove(conn: psycopg.Connection) -> None:
    conn.execute("SELECT timers.save_calendar('XNYS')")
    conn.execute("SELECT timers.add_holiday('xnys', '2027-07-05', 'Independence Day observed')")
    conn.execute("SELECT timers.add_trading_day('xnys', '2027-07-10', 'make-up Saturday')")
    assert days(conn, "XNYS", "2027-07-03", "2027-07-11") == [
        "Tue 06",
        "Wed 07",
        "Thu 08",
        "Fri 09",
        "Sat 10",
    ]
    assert conn.execute("SELECT timers.is_trading_day('xnys', '2027-07-05')").fetchone() == (False,)
    conn.execute("SELECT timers.remove_day('xnys', '2027-07-05')")
    assert conn.execute("SELECT timers.is_trading_day('xnys', '2027-07-05')").fetchone() == (True,)
    with pytest.raises(errors.NoDataFound, match="no holiday or extra trading day"):
        conn.execute("SELECT timers.remove_day('xnys', '2027-07-05')")
    actions = conn.execute("SELECT action FROM timers.audit ORDER BY id").fetchall()
    assert [a[0] for a in actions] == [
        "save_calendar",
        "add_holiday",
        "add_trading_day",
        "remove_day",
    ]


def test_holiday_added_after_save_moves_next_due_at_once(conn: psycopg.Connection) -> None:
    conn.execute("SELECT timers.save_calendar('desk', 'mon-sun')")
    conn.execute("SELECT timers.save('close', 'trading desk 23:59', 'SELECT 1', timezone => 'UTC')")
    first = next_due(conn, "close")
    assert first is not None
    conn.execute("SELECT timers.add_holiday('desk', %s)", [first.date()])
    moved = next_due(conn, "close")
    assert moved == first + dt.timedelta(days=1)
    conn.execute("SELECT timers.remove_day('desk', %s)", [first.date()])
    assert next_due(conn, "close") == first


def test_weekend_extra_trading_day_is_planned(conn: psycopg.Connection) -> None:
    conn.execute("SELECT timers.save_calendar('wk', 'none')")
    conn.execute("SELECT timers.add_trading_day('wk', '2031-03-08', 'make-up Saturday')")
    rows = conn.execute(
        "SELECT t FROM timers.next_runs('trading wk 10:00', 1, after => '2031-01-01+00',"
        " timezone => 'UTC') t"
    ).fetchall()
    assert rows == [(dt.datetime(2031, 3, 8, 10, 0, tzinfo=dt.timezone.utc),)]


def test_dropped_calendar_makes_its_timers_due_daily(conn: psycopg.Connection) -> None:
    conn.execute("SELECT timers.save_calendar('gone', 'none')")
    conn.execute("SELECT timers.add_trading_day('gone', '2099-01-01')")
    conn.execute("SELECT timers.save('t', 'trading gone 10:00', 'SELECT 1', timezone => 'UTC')")
    far = next_due(conn, "t")
    assert far is not None and far.year == 2099
    assert conn.execute("SELECT timers.drop_calendar('gone')").fetchone() == (
        {"dropped": True, "timers": 1},
    )
    soon = next_due(conn, "t")
    assert soon is not None
    now = conn.execute("SELECT now()").fetchone()
    assert now is not None and soon - now[0] <= dt.timedelta(days=1)
    with pytest.raises(errors.NoDataFound, match="there is no calendar 'gone'"):
        conn.execute("SELECT timers.is_trading_day('gone', '2099-01-01')")


def test_known_range_is_never_guessed(conn: psycopg.Connection) -> None:
    conn.execute("SELECT timers.save_calendar('x', 'mon-fri', '2026-01-01', '2027-12-31')")
    assert conn.execute("SELECT timers.is_trading_day('x', '2027-12-31')").fetchone() == (True,)
    with pytest.raises(
        errors.InvalidParameterValue, match="known from 2026-01-01 until 2027-12-31"
    ):
        conn.execute("SELECT timers.is_trading_day('x', '2028-01-03')")
    with pytest.raises(errors.InvalidParameterValue):
        conn.execute("SELECT timers.save_calendar('x', 'mon-fri', '2027-01-01', '2026-01-01')")


@pytest.mark.parametrize(
    ("call", "sqlstate", "match"),
    [
        ("SELECT timers.save_calendar('bad name')", "22023", "bad calendar name"),
        ("SELECT timers.save_calendar('c', 'mon-fry')", "22023", "bad week 'mon-fry'"),
        (
            "SELECT timers.set_calendar_week('nope', '2026-01-01', 'mon-fri')",
            "P0002",
            "no calendar",
        ),
        ("SELECT timers.set_calendar_week('c', NULL, 'mon-fri')", "22004", "from_day is NULL"),
        ("SELECT timers.add_holiday('c', NULL)", "22004", "day is NULL"),
        ("SELECT timers.trading_days('c', '2027-01-02', '2027-01-01')", "22023", "bad range"),
    ],
)
def test_bad_calendar_input(conn: psycopg.Connection, call: str, sqlstate: str, match: str) -> None:
    conn.execute("SELECT timers.save_calendar('c')")
    before = conn.execute("SELECT count(*) FROM timers.audit").fetchone()
    with pytest.raises(psycopg.Error, match=match) as info:
        conn.execute(call)
    assert info.value.sqlstate == sqlstate
    assert conn.execute("SELECT count(*) FROM timers.audit").fetchone() == before


def test_calendar_changes_are_admin_only(db: Database) -> None:
    with db.connect() as su:
        su.execute("SELECT timers.save_calendar('c')")
    for call in (
        "SELECT timers.save_calendar('d')",
        "SELECT timers.add_holiday('c', '2027-01-01')",
        "SELECT timers.drop_calendar('c')",
    ):
        with db.connect("pgt_reader") as reader, pytest.raises(errors.InsufficientPrivilege):
            reader.execute(call)
    with db.connect("pgt_reader") as reader:
        assert reader.execute("SELECT timers.is_trading_day('c', '2027-01-04')").fetchone() == (
            True,
        )


# ------------------------------------------------------------------ first/last of the month


def edge_calendar(conn: psycopg.Connection) -> set[dt.date]:
    """Calendar 'edge', mon-fri, with holidays on many month edges in 2025-2044: its holidays."""
    holidays = {
        dt.date(y, m, d)
        for y in range(2025, 2045)
        for (m, d) in [
            (1, 1),
            (3, 1),
            (3, 2),
            (3, 31),
            (6, 30),
            (6, 29),
            (7, 4),
            (12, 25),
            (12, 31),
        ]
    }
    conn.execute("SELECT timers.save_calendar('edge', 'mon-fri')")
    conn.execute(
        "INSERT INTO timers.calendar_days (calendar, day, trading)"
        " SELECT 'edge', d, false FROM unnest(%s::date[]) d",
        [sorted(holidays)],
    )
    return holidays


def month_trading_days(y: int, m: int, holidays: set[dt.date]) -> list[dt.date]:
    first = dt.date(y, m, 1)
    days = (first + dt.timedelta(days=i) for i in range(31))
    return [d for d in days if d.month == m and d.weekday() < 5 and d not in holidays]


@pytest.mark.parametrize(("which", "pick"), [("first", 0), ("last", -1), ("last-2", -3)])
def test_first_and_last_trading_days_for_twenty_years(
    conn: psycopg.Connection, which: str, pick: int
) -> None:
    holidays = edge_calendar(conn)
    ny = ZoneInfo("America/New_York")
    expected = [
        dt.datetime.combine(month_trading_days(y, m, holidays)[pick], dt.time(15, 5), ny)
        for y in range(2025, 2045)
        for m in range(1, 13)
    ]
    rows = conn.execute(
        "SELECT t FROM timers.next_runs(%s, 240, after => '2025-01-01 00:00-05',"
        " timezone => 'America/New_York') t",
        [f"trading edge {which} 15:05"],
    ).fetchall()
    assert [r[0] for r in rows] == expected


def test_first_and_last_follow_calendar_edits_at_once(conn: psycopg.Connection) -> None:
    conn.execute("SELECT timers.save_calendar('desk', 'mon-fri')")
    conn.execute("SELECT timers.create_test_clock('c', '2027-01-04 12:00Z')")
    for name, schedule in [
        ("first", "trading desk first 10:00"),
        ("last", "trading desk last 15:05"),
        ("last2", "trading desk last-2 15:05"),
    ]:
        conn.execute(
            "SELECT timers.save(%s, %s, 'SELECT 1', timezone => 'America/New_York',"
            " test_clock => 'c')",
            [name, schedule],
        )

    def due() -> list[str]:
        return [
            (next_due(conn, n) or dt.datetime.min)
            .astimezone(ZoneInfo("America/New_York"))
            .strftime("%a %m-%d %H:%M")
            for n in ("first", "last", "last2")
        ]

    # Fri 1 Jan 2027 has passed: the first of February; January ends on Fri 29
    assert due() == ["Mon 02-01 10:00", "Fri 01-29 15:05", "Wed 01-27 15:05"]
    conn.execute("SELECT timers.add_holiday('desk', '2027-02-01')")
    conn.execute("SELECT timers.add_holiday('desk', '2027-01-28')")
    assert due() == ["Tue 02-02 10:00", "Fri 01-29 15:05", "Tue 01-26 15:05"]
    conn.execute("SELECT timers.add_trading_day('desk', '2027-01-30', 'make-up Saturday')")
    assert due() == ["Tue 02-02 10:00", "Sat 01-30 15:05", "Wed 01-27 15:05"]
    conn.execute("SELECT timers.remove_day('desk', '2027-01-30')")
    conn.execute("SELECT timers.remove_day('desk', '2027-02-01')")
    assert due() == ["Mon 02-01 10:00", "Fri 01-29 15:05", "Tue 01-26 15:05"]
    # a Sun-Thu week from Fri 29 January: Sun 31 trades, Thu 28 is still a holiday
    conn.execute("SELECT timers.set_calendar_week('desk', '2027-01-29', 'sun-thu')")
    assert due() == ["Mon 02-01 10:00", "Sun 01-31 15:05", "Tue 01-26 15:05"]


def test_first_trading_day_with_a_holiday_on_the_first(conn: psycopg.Connection) -> None:
    conn.execute("SELECT timers.save_calendar('nyse', 'mon-fri')")
    conn.execute("SELECT timers.add_holiday('nyse', '2027-01-01', 'New Year')")
    conn.execute("SELECT timers.add_holiday('nyse', '2026-12-31', 'closed')")
    conn.execute("SELECT timers.add_holiday('nyse', '2026-12-25', 'Christmas')")
    rows = conn.execute(
        "SELECT to_char(t AT TIME ZONE 'Asia/Kathmandu', 'Dy YYYY-MM-DD HH24:MI')"
        " FROM timers.next_runs(%s, 2, after => '2026-12-01 00:00+05:45',"
        " timezone => 'Asia/Kathmandu') t",
        ["trading nyse last-4 15:05"],
    ).fetchall()
    # Dec 2026 trades 1-4, 7-11, 14-18, 21-24, 28-30: the 5th from the end is Wed 23
    assert [r[0] for r in rows] == ["Wed 2026-12-23 15:05", "Mon 2027-01-25 15:05"]
    rows = conn.execute(
        "SELECT to_char(t AT TIME ZONE 'Asia/Kathmandu', 'Dy YYYY-MM-DD HH24:MI')"
        " FROM timers.next_runs('trading nyse first 10:00', 1, after => '2026-12-02 00:00+05:45',"
        " timezone => 'Asia/Kathmandu') t"
    ).fetchall()
    assert rows == [("Mon 2027-01-04 10:00",)]

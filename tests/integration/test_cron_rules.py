"""Cron day rules (L, L-n, dW, LW, $ in day of month; wL, w#k in day of week) against croniter.

croniter 7 reads `L`, `dW` and `w#k` as pgtimers does. The forms it lacks are checked
through an equal form it has: `$` is `L`; `LW` is croniter's `31W` (a W day past the
month's end is the last day, so 31W is the weekday nearest the last day); `5L` is
croniter's `L5`; `L-n` is croniter's `L` moved n days back (dropped when that leaves
the month). Each rule is checked over more than 20 years of due times, across the
leap Februaries of 2000 (a 400-year leap year) and 2096, and the non-leap 2100.
"""

from __future__ import annotations

import datetime as dt
import re
from zoneinfo import ZoneInfo

import psycopg
import pytest
from croniter import croniter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.test_cron_property import MONTHS, field, start_lists
from tests.integration.test_schedule import read_only_database  # noqa: F401  (fixture "ro")

DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
# croniter's default gives up after 50 years; 5th Mondays of February come every 28
CRONITER_YEARS = 400


def oracle(expr: str, start: dt.datetime, n: int) -> list[dt.datetime]:
    """The first n due times after start as croniter has them, through its equal forms."""
    f = expr.split(" ")
    day_or = not (f[2].startswith("*") or f[4].startswith("*"))
    back = 0
    if f[2].upper().startswith("L-"):
        back, f[2] = int(f[2][2:]), "L"
    f[2] = {"$": "L", "LW": "31W"}.get(f[2].upper(), f[2])
    if f[4].upper().endswith("L"):  # croniter's L takes a number 0-6
        w = f[4][:-1].lower()
        f[4] = "L" + str(DAYS.index(w) if w in DAYS else int(w) % 7)
    it = croniter(
        " ".join(f),
        start + dt.timedelta(days=back),
        day_or=day_or,
        max_years_between_matches=CRONITER_YEARS,
    )
    out: list[dt.datetime] = []
    while len(out) < n:
        t = it.get_next(dt.datetime)
        moved = t - dt.timedelta(days=back)
        if moved.month == t.month:
            out.append(moved)
    return out


def engine_chain(
    conn: psycopg.Connection, expr: str, start: dt.datetime, n: int, zone: str = "UTC"
) -> list[dt.datetime]:
    rows = conn.execute(
        "SELECT t FROM timers.next_runs(%s, %s, %s, %s) t", ["cron " + expr, n, start, zone]
    ).fetchall()
    return [r[0] for r in rows]


UTC = dt.timezone.utc
WINDOWS = [dt.datetime(1999, 12, 31, 12, tzinfo=UTC), dt.datetime(2085, 6, 1, tzinfo=UTC)]


@pytest.mark.parametrize(
    "expr",
    [
        "30 9 L * *",
        "0 11 $ * *",
        "0 18 L-3 * *",
        "0 18 L-30 * *",  # day 1 of 31-day months only
        "0 9 15W * *",
        "0 0 1W * *",  # a Saturday 1st moves to Monday the 3rd
        "0 0 31W * *",
        "0 9 LW * *",
        "0 16 * * 5L",
        "0 16 * * 0L",
        "0 9 * * 2#3",
        "0 9 * * 1#5",  # not every month has one
        "0 9 * * sun#1,FRI#4",  # twice a month
        "0 12 L 2 *",  # 29 in leap years, 28 in 2100
        "0 0 L,15 * *",
        "0 0 L * 5",  # both restricted: the last day or a Friday
        "0 0 L * */2",  # '*' first: the last day when it falls on Sun, Tue, Thu, Sat
        "0 0 15W * */2",
        "0 0 */2 * 2#3",
        "15,45 */6 L * *",
    ],
)
def test_each_rule_matches_croniter_for_decades(ro: psycopg.Connection, expr: str) -> None:
    for start in WINDOWS:
        # 20 years of due times, or 1000 (the most next_runs gives) of those that
        # run more than twice a month
        often = expr.startswith("15,45") or expr == "0 0 L * 5"
        n = 1000 if often else 520 if "," in expr else 260
        got = engine_chain(ro, expr, start, n)
        assert got == oracle(expr, start, n), expr
        assert often or got[-1] - start > dt.timedelta(days=365 * 20), (expr, got[-1])


def test_the_last_day_follows_leap_years(ro: psycopg.Connection) -> None:
    start = dt.datetime(2095, 12, 31, tzinfo=UTC)
    days = [t.date() for t in engine_chain(ro, "0 12 L 2 *", start, 6)]
    assert [d.isoformat() for d in days] == [
        "2096-02-29",
        "2097-02-28",
        "2098-02-28",
        "2099-02-28",
        "2100-02-28",
        "2101-02-28",
    ]
    lw = engine_chain(ro, "0 9 LW 2 *", dt.datetime(2020, 1, 1, tzinfo=UTC), 3)
    # Feb 29 2020 is a Saturday, Feb 28 2021 a Sunday, Feb 28 2022 a Monday
    assert [t.date().isoformat() for t in lw] == ["2020-02-28", "2021-02-26", "2022-02-28"]


@st.composite
def rule_expr(draw: st.DrawFn) -> str:
    """Minute, hour and month fields as the cron property test draws them, and a day rule."""
    minute = draw(field(0, 59))
    hour = draw(field(0, 23))
    month = draw(st.one_of(st.just("*"), field(1, 12, MONTHS)))
    step = draw(st.sampled_from(["*", "*/2", "*/3", "*/5"]))
    w = draw(st.integers(0, 7))
    day = draw(st.sampled_from([str(w), DAYS[w % 7], DAYS[w % 7].upper()]))
    kind = draw(st.sampled_from(["L", "$", "L-n", "W", "LW", "wL", "#", "L,d", "L|dow"]))
    if kind == "L-n":
        return f"{minute} {hour} L-{draw(st.integers(1, 30))} {month} *"
    if kind in ("L", "$", "LW"):
        return f"{minute} {hour} {kind} {month} {step}"
    if kind == "W":
        return f"{minute} {hour} {draw(st.integers(1, 31))}W {month} {step}"
    if kind == "L,d":
        return f"{minute} {hour} L,{draw(st.integers(1, 31))} {month} {step}"
    if kind == "L|dow":  # both restricted: either matches
        dows = draw(st.lists(st.integers(0, 7), min_size=1, max_size=3, unique=True))
        return f"{minute} {hour} L {month} {','.join(map(str, dows))}"
    if kind == "wL":
        return f"{minute} {hour} {step} {month} {day}L"
    return f"{minute} {hour} {step} {month} {day}#{draw(st.integers(1, 5))}"


def feasible(conn: psycopg.Connection, expr: str) -> bool:
    """False when the engine refuses the expression as never due."""
    try:
        conn.execute("SELECT timers._parse_schedule(%s, 'UTC', now())", ["cron " + expr])
    except psycopg.errors.InvalidParameterValue as e:
        assert "never" in str(e), e
        return False
    return True


def check(conn: psycopg.Connection, expr: str, zone: str, naive: list[dt.datetime]) -> None:
    tz = ZoneInfo(zone)
    after = [s.replace(tzinfo=tz) for s in naive]
    rows = conn.execute(
        """
        SELECT timers._next_due(s.spec, u.t, %(zone)s)
          FROM (SELECT timers._parse_schedule(%(schedule)s, %(zone)s, now()) AS spec) s,
               unnest(%(after)s::timestamptz[]) WITH ORDINALITY AS u(t, i)
         ORDER BY u.i
        """,
        {"schedule": "cron " + expr, "zone": zone, "after": after},
    ).fetchall()
    assert [r[0] for r in rows] == [oracle(expr, a, 1)[0] for a in after], (expr, zone)
    assert engine_chain(conn, expr, after[0], 8, zone) == oracle(expr, after[0], 8), expr


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=rule_expr(), naive_starts=start_lists)
def test_rules_match_croniter_utc(
    ro: psycopg.Connection, expr: str, naive_starts: list[dt.datetime]
) -> None:
    if feasible(ro, expr):
        check(ro, expr, "UTC", naive_starts)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=rule_expr(), naive_starts=start_lists)
def test_rules_match_croniter_kathmandu(
    ro: psycopg.Connection, expr: str, naive_starts: list[dt.datetime]
) -> None:
    if feasible(ro, expr):
        check(ro, expr, "Asia/Kathmandu", naive_starts)


BAD = [
    ("cron 0 0 L-40 * *", "'L-40' in the day-of-month field: L-n counts 1 to 30 days back"),
    ("cron 0 0 L-0 * *", "'L-0' in the day-of-month field: L-n counts 1 to 30 days back"),
    ("cron 0 0 * * 8#1", "'8#1' in the day-of-week field: '8' is not a day of week"),
    ("cron 0 0 * * fry#1", "'fry#1' in the day-of-week field: 'fry' is not a day of week"),
    ("cron 0 0 * * 1#6", "'1#6' in the day-of-week field: the week of the month after # is 1-5"),
    ("cron 0 0 * * 1#0", "'1#0' in the day-of-week field: the week of the month after # is 1-5"),
    ("cron 0 0 0W * *", "'0W' in the day-of-month field: W takes a day of month 1-31"),
    ("cron 0 0 32W * *", "'32W' in the day-of-month field: W takes a day of month 1-31"),
    ("cron L 0 * * *", "'L' in the minute field: L, W, # and $ belong in the day-of-month"),
    ("cron 0 5L * * *", "'5L' in the hour field: L, W, # and $ belong"),
    ("cron 0 0 * L *", "'L' in the month field: L, W, # and $ belong"),
    ("cron 0 0 * $ *", "'$' in the month field: L, W, # and $ belong"),
    ("cron 0 0 * * L", "'L' in the day-of-week field: write 5L (the last Friday"),
    ("cron 0 0 * * 15W", "'15W' in the day-of-week field: write 5L"),
    ("cron 0 0 2#3 * *", "'2#3' in the day-of-month field: write L or $ (the last day)"),
    ("cron 0 0 5L * *", "'5L' in the day-of-month field: write L or $"),
    ("cron 0 0 L/2 * *", "'L/2' in the day-of-month field: write L or $"),
    ("cron 0 0 1-5W * *", "'1-5W' in the day-of-month field: write L or $"),
    ("cron 0 0 * * 1-3#2", "'1-3#2' in the day-of-week field: write 5L"),
    ("cron 0 0 15W * 1", "'15W' in the day-of-month field takes no day of week beside it"),
    ("cron 0 0 L * 5L", "'5L' in the day-of-week field takes no day of month beside it"),
    ("cron 0 0 13 * fri#2", "'fri#2' in the day-of-week field takes no day of month beside"),
    ("cron 0 0 L-30 2 *", "day of month L-30 never occurs in month 2"),
    ("cron 0 0 8-14/2 * 1#1", "'1#1' in the day-of-week field takes no day of month"),
    ("cron 0 0 */14 * 1#2", "day of month */14 and day of week 1#2 never fall on one day"),
    # the 1st and 31st are never a 5th Monday of February (a 31st would be, if there were one)
    ("cron 0 0 */30 2 1#5", "day of month */30 and day of week 1#5 never fall on one day"),
    ("0 0 L-31 * *", "'L-31' in the day-of-month field"),
]


@pytest.mark.parametrize(("schedule", "reason"), BAD)
def test_bad_rules_are_refused_naming_field_and_token(
    ro: psycopg.Connection, schedule: str, reason: str
) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue) as caught:
        ro.execute("SELECT timers.next_runs(%s, 1)", [schedule])
    assert caught.value.sqlstate == "22023"
    assert reason in (caught.value.diag.message_primary or ""), caught.value


def test_a_bad_rule_saves_nothing(conn: psycopg.Connection) -> None:
    for schedule, reason in BAD:
        with pytest.raises(psycopg.errors.InvalidParameterValue, match=re.escape(reason)):
            conn.execute("SELECT timers.save('bad', %s, 'SELECT 1')", [schedule])
    assert conn.execute("SELECT count(*) FROM timers.timers").fetchone() == (0,)


def test_dollar_is_the_last_day_as_pg_cron_writes_it(conn: psycopg.Connection) -> None:
    conn.execute("SELECT timers.save('payroll', '0 12 $ * *', 'SELECT 1', timezone => 'UTC')")
    conn.execute("SELECT timers.save('close', 'cron 0 18 1,$ * *', 'SELECT 1', timezone => 'UTC')")
    rows = conn.execute("SELECT name, schedule FROM timers.status ORDER BY name").fetchall()
    assert rows == [("close", "cron 0 18 1,$ * *"), ("payroll", "cron 0 12 $ * *")]
    start = dt.datetime(2028, 1, 15, tzinfo=UTC)
    runs = engine_chain(conn, "0 18 1,$ * *", start, 4)
    assert [t.date().isoformat() for t in runs] == [
        "2028-01-31",
        "2028-02-01",
        "2028-02-29",
        "2028-03-01",
    ]

"""Property test: the PL/pgSQL cron engine agrees with croniter.

Random 5-field expressions (lists, ranges, steps, names, 7 = Sunday) and random start
times; for each expression several starts are checked in one SQL round trip, plus a
chain of consecutive due times through timers.next_runs.

Where the two differ by design, the oracle is told, not the engine:
- the day-of-month / day-of-week rule follows Vixie cron: the fields are OR-ed only
  when neither starts with '*' (croniter ORs '*/2' too), so croniter gets
  day_or=False when either day field starts with '*';
- croniter also treats a day field with '*' anywhere ('0,*/2') as unrestricted; the
  generator puts '*/s' items first, where both agree;
- croniter reads an equal range ('5-5', 'jan-jan') as the whole field; cron and this
  engine read it as one value, so ranges are generated with low < high.
Zones: UTC, and Asia/Kathmandu (+05:45 since 1986, no DST) for a non-whole-hour offset.
"""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import psycopg
import pytest
from croniter import croniter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.test_schedule import read_only_database  # noqa: F401  (fixture "ro")

MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
# Feb 29 falls on each weekday once in 28 years; give croniter room for the rare AND cases.
CRONITER_YEARS = 400


@st.composite
def value(draw: st.DrawFn, lo: int, hi: int, names: list[str] | None, base: int) -> tuple[int, str]:
    """A value of the field and how it is written (a number, or sometimes its name)."""
    v = draw(st.integers(lo, hi))
    if names is not None and v - base < len(names) and draw(st.integers(0, 3)) == 0:
        name = names[v - base]
        return v, draw(st.sampled_from([name, name.upper(), name.capitalize()]))
    return v, str(v)


@st.composite
def item(
    draw: st.DrawFn, lo: int, hi: int, names: list[str] | None = None, base: int | None = None
) -> str:
    base = lo if base is None else base
    span = hi - lo + 1
    kind = draw(st.sampled_from(["*", "*/s", "a", "a", "a-b", "a-b/s", "a/s"]))
    if kind == "*":
        return "*"
    step = draw(st.integers(1, span))
    if kind == "*/s":
        return f"*/{step}"
    a, a_text = draw(value(lo, hi, names, base))
    if kind == "a":
        return a_text
    if kind == "a/s":
        return f"{a_text}/{step}"
    if a == hi:
        return a_text
    _, b_text = draw(value(a + 1, hi, names, base))
    return f"{a_text}-{b_text}" + (f"/{step}" if kind == "a-b/s" else "")


@st.composite
def field(draw: st.DrawFn, lo: int, hi: int, names: list[str] | None = None) -> str:
    n = draw(st.integers(1, 3))
    items = [draw(item(lo, hi, names)) for _ in range(n)]
    if "*" in items and len(items) > 1:
        items = [i for i in items if i != "*"] or ["*"]
    # '*/s' items first: cron looks at a day field's first character, croniter at any '*'
    items.sort(key=lambda i: not i.startswith("*"))
    return ",".join(items)


@st.composite
def cron_expr(draw: st.DrawFn) -> str:
    minute = draw(field(0, 59))
    hour = draw(field(0, 23))
    dom = draw(st.one_of(st.just("*"), field(1, 31)))
    month = draw(st.one_of(st.just("*"), field(1, 12, MONTHS)))
    # hi 7: Sunday written as 7 (names stop at sat, 7 has no name)
    dow = draw(st.one_of(st.just("*"), field(0, 7, DAYS)))
    return f"{minute} {hour} {dom} {month} {dow}"


starts = st.datetimes(
    min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2099, 12, 31, 23, 59, 59)
).map(lambda d: d.replace(microsecond=0))
# exact minute boundaries matter (strictly after): make a third of the starts whole minutes
start_lists = st.lists(
    st.one_of(starts, starts, starts.map(lambda d: d.replace(second=0))), min_size=12, max_size=12
)


def feasible(conn: psycopg.Connection, expr: str) -> bool:
    """False when the engine refuses the expression (a day the months never have)."""
    try:
        conn.execute("SELECT timers._parse_schedule(%s, 'UTC', now())", ["cron " + expr])
    except psycopg.errors.InvalidParameterValue as e:
        assert "never occurs" in str(e), e
        return False
    return True


def oracle(expr: str, start: dt.datetime, n: int = 1) -> list[dt.datetime]:
    dom, dow = expr.split(" ")[2], expr.split(" ")[4]
    day_or = not (dom.startswith("*") or dow.startswith("*"))
    it = croniter(expr, start, day_or=day_or, max_years_between_matches=CRONITER_YEARS)
    return [it.get_next(dt.datetime) for _ in range(n)]


def engine(
    conn: psycopg.Connection, expr: str, zone: str, after: list[dt.datetime]
) -> list[dt.datetime]:
    rows = conn.execute(
        """
        SELECT timers._next_due(s.spec, u.t, %(zone)s)
          FROM (SELECT timers._parse_schedule(%(schedule)s, %(zone)s, now()) AS spec) s,
               unnest(%(after)s::timestamptz[]) WITH ORDINALITY AS u(t, i)
         ORDER BY u.i
        """,
        {"schedule": "cron " + expr, "zone": zone, "after": after},
    ).fetchall()
    return [r[0] for r in rows]


def check(conn: psycopg.Connection, expr: str, zone: str, naive_starts: list[dt.datetime]) -> None:
    tz = ZoneInfo(zone)
    after = [s.replace(tzinfo=tz) for s in naive_starts]
    expected = [oracle(expr, a)[0] for a in after]
    assert engine(conn, expr, zone, after) == expected, (expr, zone)
    # a chain: each due time is the start of the next one
    chain = oracle(expr, after[0], 6)
    rows = conn.execute(
        "SELECT t FROM timers.next_runs(%s, 6, %s, %s) t", ["cron " + expr, after[0], zone]
    ).fetchall()
    assert [r[0] for r in rows] == chain, (expr, zone, "chain")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=cron_expr(), naive_starts=start_lists)
def test_cron_matches_croniter_utc(
    ro: psycopg.Connection, expr: str, naive_starts: list[dt.datetime]
) -> None:
    if feasible(ro, expr):
        check(ro, expr, "UTC", naive_starts)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=cron_expr(), naive_starts=start_lists)
def test_cron_matches_croniter_kathmandu(
    ro: psycopg.Connection, expr: str, naive_starts: list[dt.datetime]
) -> None:
    if feasible(ro, expr):
        check(ro, expr, "Asia/Kathmandu", naive_starts)


@pytest.mark.parametrize(
    "expr",
    [
        "* * * * *",
        "0 0 29 2 *",  # leap days only
        "0 0 29 2 1",  # OR: Feb 29 or any Monday in February
        "0 0 */28 2 */7",  # AND: Feb 1 or Feb 29 that is a Sunday
        "59 23 31 12 *",
        "0 0 31 * *",
        "*/7 */5 */9 */4 */3",
        "5/10 5/7 5/9 5/4 5/2",
        "0 12 1,15 * mon-fri",
        "15 10 * jan,apr,jul,oct SUN",
    ],
)
def test_cron_known_expressions_match_croniter(ro: psycopg.Connection, expr: str) -> None:
    naive = [
        dt.datetime(2000 + 7 * k, 1 + k % 12, 1 + (3 * k) % 28, k % 24, (13 * k) % 60)
        for k in range(12)
    ]
    check(ro, expr, "UTC", naive)

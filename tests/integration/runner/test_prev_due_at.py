"""pgtimers.prev_due_at inside a run: the schedule's due time before pgtimers.due_at, run or
skipped; '' for a timer's first due time, one-shots, keyed timers and run-now; a backfill's
is the schedule's, not the backfill's previous one."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import psycopg
import pytest

from tests.conftest import scalar
from tests.integration.runner.conftest import save, timer_row
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

StartRunner = Callable[..., RunnerProcess]
Seen = Callable[..., list[tuple[str, str, str]]]
T0 = "2027-01-04 00:00:00+00"
PREV_SQL = (
    "INSERT INTO public.seen (timer, prev, due) VALUES (current_setting('pgtimers.timer'),"
    " current_setting('pgtimers.prev_due_at'), current_setting('pgtimers.due_at'))"
)


@pytest.fixture
def seen(conn: psycopg.Connection) -> Seen:
    """Make the table the runs write to; read it back as (timer, prev, due) in run order."""
    conn.execute(
        "CREATE TABLE seen (id bigserial, timer text, prev text, due text);"
        " GRANT ALL ON seen, seen_id_seq TO PUBLIC"
    )

    def read(timer: str | None = None) -> list[tuple[str, str, str]]:
        rows = conn.execute(
            "SELECT timer, prev, due FROM public.seen WHERE %(t)s::text IS NULL OR timer = %(t)s"
            " ORDER BY id",
            {"t": timer},
        ).fetchall()
        return [(r[0], r[1], r[2]) for r in rows]

    return read


def advance(conn: psycopg.Connection, to: str) -> None:
    conn.execute("CALL timers.advance_test_clock('c', %s)", [to])


def test_scheduled_runs_see_the_due_time_before_and_the_first_sees_none(
    conn: psycopg.Connection, start_runner: StartRunner, seen: Seen
) -> None:
    conn.execute("SELECT timers.create_test_clock('c', %s)", [T0])
    save(conn, "daily", "daily 02:00", PREV_SQL, test_clock="c", timezone="UTC")
    save(conn, "cron", "cron 30 9 * * 1-5", PREV_SQL, test_clock="c", timezone="Europe/Berlin")
    save(conn, "every", "every 6h", PREV_SQL, test_clock="c", timezone="UTC")
    save(conn, "once", "once 2027-01-05 12:00", PREV_SQL, test_clock="c", timezone="UTC")
    start_runner()
    advance(conn, "2027-01-11 09:00:00+00")  # Monday to the next Monday
    assert seen("daily")[:3] == [
        ("daily", "", "2027-01-04T02:00:00Z"),  # its first due time
        ("daily", "2027-01-04T02:00:00Z", "2027-01-05T02:00:00Z"),
        ("daily", "2027-01-05T02:00:00Z", "2027-01-06T02:00:00Z"),
    ]
    # weekdays: Monday's previous is Friday (a walk back over the weekend)
    assert seen("cron") == [
        ("cron", "", "2027-01-04T08:30:00Z"),
        ("cron", "2027-01-04T08:30:00Z", "2027-01-05T08:30:00Z"),
        ("cron", "2027-01-05T08:30:00Z", "2027-01-06T08:30:00Z"),
        ("cron", "2027-01-06T08:30:00Z", "2027-01-07T08:30:00Z"),
        ("cron", "2027-01-07T08:30:00Z", "2027-01-08T08:30:00Z"),
        ("cron", "2027-01-08T08:30:00Z", "2027-01-11T08:30:00Z"),
    ]
    every = seen("every")
    assert every[0] == ("every", "", "2027-01-04T06:00:00Z")
    assert [r[1] for r in every[1:]] == [r[2] for r in every[:-1]]
    assert len(every) == 4 * 7 + 1
    assert seen("once") == [("once", "", "2027-01-05T12:00:00Z")]


def test_a_skipped_due_time_is_the_previous_one_all_the_same(
    conn: psycopg.Connection, start_runner: StartRunner, seen: Seen
) -> None:
    conn.execute("SELECT timers.create_test_clock('c', '2027-01-04 09:00:00+00')")
    save(conn, "m", "every 1m", PREV_SQL, test_clock="c")
    advance(conn, "2027-01-04 09:05:30+00")  # no runner: 09:01 … 09:05 are skipped
    start_runner()
    advance(conn, "2027-01-04 09:06:00+00")
    assert seen() == [("m", "2027-01-04T09:05:00Z", "2027-01-04T09:06:00Z")]


def test_a_late_run_that_skips_its_predecessors_sees_the_last_skipped(
    conn: psycopg.Connection, seen: Seen
) -> None:
    # the late rule of a run (its successors have come: the latest runs) without a runner:
    # the clock is moved under the timer, and its run is called as the runner would
    conn.execute("SELECT timers.create_test_clock('c', '2027-01-04 09:00:00+00')")
    save(conn, "m", "every 1m", PREV_SQL, test_clock="c")
    conn.execute("UPDATE timers.test_clocks SET now = '2027-01-04 09:03:30+00'")
    result = scalar(
        conn,
        "SELECT timers._run_due(id, next_due_at, 'test') FROM timers.timers WHERE name = 'm'",
    )
    assert result["due_at"] == "2027-01-04T09:03:00Z" and result["skipped"][0]["count"] == 2
    assert seen() == [("m", "2027-01-04T09:02:00Z", "2027-01-04T09:03:00Z")]


def test_saved_again_it_keeps_its_origin(
    conn: psycopg.Connection, start_runner: StartRunner, seen: Seen
) -> None:
    conn.execute("SELECT timers.create_test_clock('c', %s)", [T0])
    save(conn, "d", "daily 02:00", PREV_SQL, test_clock="c", timezone="UTC")
    start_runner()
    advance(conn, "2027-01-04 12:00:00+00")
    # a changed SQL is the same timer: its next run sees the due time before
    save(conn, "d", "daily 02:00", PREV_SQL + " -- v2", test_clock="c", timezone="UTC")
    advance(conn, "2027-01-05 03:00:00+00")
    assert [r[1] for r in seen()] == ["", "2027-01-04T02:00:00Z"]


def test_keyed_and_run_now_see_none(
    conn: psycopg.Connection, start_runner: StartRunner, seen: Seen
) -> None:
    conn.execute("SELECT timers.create_test_clock('c', %s)", [T0])
    conn.execute(
        "SELECT timers.arm('job:task:prev:1', '2027-01-04 01:00+00', %s, test_clock => 'c')",
        [PREV_SQL],
    )
    save(conn, "h", "hourly", PREV_SQL, enabled=False)
    start_runner()
    advance(conn, "2027-01-04 02:00:00+00")
    conn.execute("CALL timers.run('h')")
    rows = seen()
    assert [(r[0], r[1]) for r in rows] == [("job:task:prev:1", ""), ("h", "")]
    assert rows[0][2] == "2027-01-04T01:00:00Z"


def test_a_backfill_sees_the_schedules_due_time_before(
    conn: psycopg.Connection, start_runner: StartRunner, seen: Seen
) -> None:
    save(conn, "h", "hourly", PREV_SQL, enabled=False, timezone="UTC")
    hour = scalar(conn, "SELECT date_trunc('hour', now())")

    def iso(hours_ago: int) -> str:
        at: dt.datetime = hour - dt.timedelta(hours=hours_ago)
        return at.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    # from before the timer was created: the first one's previous is the schedule's too
    conn.execute(
        "SELECT timers.backfill('h', %s, %s)",
        [hour - dt.timedelta(hours=3), hour - dt.timedelta(hours=1)],
    )
    start_runner()
    wait_until(lambda: len(seen()) == 2, what="the backfill's two due times")
    assert seen() == [("h", iso(4), iso(3)), ("h", iso(3), iso(2))]
    assert timer_row(conn, "h")["origin_at"] > hour - dt.timedelta(hours=3)

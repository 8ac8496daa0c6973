"""Deadlines: a due time with no successful commit within `deadline` raises one
deadline_missed event (failed, skipped, running, unserved), shown in timers.status."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg import errors
from psycopg.rows import dict_row

from tests.conftest import scalar
from tests.integration.runner.conftest import save, status
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

StartRunner = Callable[..., RunnerProcess]
T0 = "2027-01-04 09:00:00+00"
ALWAYS_FAILS = "SELECT 1 / 0"


def at(hh_mm: str) -> dt.datetime:
    return dt.datetime.fromisoformat(f"2027-01-04 {hh_mm}:00+00:00")


@pytest.fixture
def clock(conn: psycopg.Connection) -> str:
    conn.execute("SELECT timers.create_test_clock('c', %s)", [T0])
    return "c"


def advance(conn: psycopg.Connection, to: str) -> None:
    conn.execute("CALL timers.advance_test_clock('c', %s)", [f"2027-01-04 {to}:00+00"])


def events(
    conn: psycopg.Connection, timer: str, event: str = "deadline_missed"
) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(
            "SELECT event, due_at, detail, run_id, error FROM timers.events"
            " WHERE timer = %s AND event = %s ORDER BY id",
            [timer, event],
        ).fetchall()


def told(conn: psycopg.Connection, timer: str) -> list[tuple[dt.datetime, str, int]]:
    return [(e["due_at"], e["detail"]["why"], e["detail"]["count"]) for e in events(conn, timer)]


def test_a_due_time_that_fails_for_good_misses_its_deadline_once(
    conn: psycopg.Connection, clock: str, start_runner: StartRunner
) -> None:
    save(conn, "t", "every 1h", ALWAYS_FAILS, test_clock=clock, deadline="30 minutes")
    start_runner()
    advance(conn, "10:00")
    assert told(conn, "t") == [(at("10:00"), "failed", 1)]
    # the clock moving on, and every heartbeat's look, tell it no second time
    advance(conn, "10:45")
    conn.execute("SELECT timers._deadline_check()")
    assert told(conn, "t") == [(at("10:00"), "failed", 1)]
    st = status(conn, "t")
    assert st["deadline"] == dt.timedelta(minutes=30) or st["deadline"] == "00:30:00"
    assert st["deadline_missed"] == 1
    assert st["deadline_missed_ms"] == int(at("10:00").timestamp() * 1000)
    event = events(conn, "t")[0]
    assert event["detail"]["deadline"] == "00:30:00"
    assert "deadline_missed" in {e["event"] for e in events(conn, "t", "deadline_missed")}


def test_a_due_time_whose_retry_succeeds_within_the_deadline_meets_it(
    conn: psycopg.Connection, clock: str, start_runner: StartRunner
) -> None:
    # fails on its first attempt, succeeds on its retry a minute later
    sql = "SELECT 1 / (current_setting('pgtimers.attempt')::int - 1)"
    save(conn, "t", "every 1h", sql, test_clock=clock, deadline="30 minutes", retries=2,
         retry_delay="1 minute")  # fmt: skip
    start_runner()
    advance(conn, "10:30")
    assert told(conn, "t") == []
    assert [e["event"] for e in events(conn, "t", "recovered")] == ["recovered"]
    assert status(conn, "t")["deadline_missed"] == 0


def test_a_retry_waited_for_past_the_deadline_is_told_as_failed(
    conn: psycopg.Connection, clock: str, start_runner: StartRunner
) -> None:
    sql = "SELECT 1 / (current_setting('pgtimers.attempt')::int - 1)"
    save(conn, "t", "every 1h", sql, test_clock=clock, deadline="5 minutes", retries=2,
         retry_delay="10 minutes")  # fmt: skip
    start_runner()
    advance(conn, "10:06")
    # 10:00 failed, its retry waits for 10:10: the deadline 10:05 has passed
    wait_until(lambda: told(conn, "t"), what="the heartbeat's look")
    assert told(conn, "t") == [(at("10:00"), "failed", 1)]
    advance(conn, "10:30")
    # the retry succeeded at 10:10, late: told already, not again
    assert told(conn, "t") == [(at("10:00"), "failed", 1)]
    assert [e["event"] for e in events(conn, "t", "recovered")] == ["recovered"]


def test_due_times_skipped_while_a_run_went_on_miss_their_deadline_at_once(
    conn: psycopg.Connection, start_runner: StartRunner
) -> None:
    # each run takes 2.5 s of a 1-s timer: the due times during it are skipped
    save(conn, "t", "every 1s", "SELECT pg_sleep(2.5)", deadline="1 minute")
    start_runner()
    wait_until(lambda: told(conn, "t"), timeout=15, what="a skip")
    due, why, count = told(conn, "t")[0]
    assert why == "skipped"
    assert count >= 1
    skipped = scalar(
        conn, "SELECT min(due_at) FROM timers.runs WHERE timer = 't' AND kind = 'skipped'"
    )
    assert due == skipped
    # each due time told once: the counts add up to the skipped due times told
    skips = "SELECT count(*) FROM timers.runs WHERE timer = 't' AND kind = 'skipped'"
    wait_until(lambda: scalar(conn, skips) >= 3, timeout=15)
    conn.execute("SELECT timers.enable('t', false)")
    time.sleep(3)
    rows = told(conn, "t")
    assert all(w == "skipped" for _, w, _ in rows)
    skipped_n = scalar(conn, "SELECT skipped FROM timers.timers WHERE name = 't'")
    assert sum(c for _, _, c in rows) == skipped_n


def test_due_times_no_runner_took_are_told_by_whoever_looks(conn: psycopg.Connection) -> None:
    save(conn, "t", "every 1s", "SELECT 1", deadline="1 second")
    time.sleep(3.2)
    # no runner: the console's or GET /metrics' look tells it
    assert scalar(conn, "SELECT timers._deadline_check()") == 1
    (first,) = events(conn, "t")
    assert first["detail"]["why"] == "unserved"
    assert first["detail"]["count"] >= 1
    # told once: a second look tells none of those again (only a due time whose deadline
    # passed since, which a loaded machine may take the second to reach)
    again = scalar(conn, "SELECT timers._deadline_check()")
    told_now = events(conn, "t")
    assert len(told_now) == 1 + again
    assert told_now[0] == first
    assert all(e["due_at"] > first["due_at"] for e in told_now[1:])
    missed = status(conn, "t")["deadline_missed"]
    assert missed == sum(e["detail"]["count"] for e in told_now)


def test_a_run_that_commits_after_its_deadline_misses_it_as_running(
    conn: psycopg.Connection, start_runner: StartRunner
) -> None:
    # taken at once, but commits 4 s after it was due: past its 2-s deadline. (Taken more
    # than 2 s late, as on a starved machine, it would be told as unserved, rightly.)
    save(conn, "slow", "every 1h", "SELECT pg_sleep(4)", deadline="2 seconds")
    start_runner()
    conn.execute("CALL timers.run('slow')")  # a run now is not a due time: no deadline
    assert told(conn, "slow") == []
    conn.execute("UPDATE timers.timers SET next_due_at = now() WHERE name = 'slow'")
    conn.execute("NOTIFY pgtimers")
    wait_until(lambda: told(conn, "slow"), timeout=20, what="the slow run's end")
    ((_, why, count),) = told(conn, "slow")
    assert (why, count) == ("running", 1)


def test_a_timer_without_a_deadline_is_never_told(
    conn: psycopg.Connection, clock: str, start_runner: StartRunner
) -> None:
    save(conn, "t", "every 1h", ALWAYS_FAILS, test_clock=clock)
    start_runner()
    advance(conn, "12:00")
    assert told(conn, "t") == []
    assert len(events(conn, "t", "failed")) == 3


@pytest.mark.parametrize("bad", ["0 seconds", "-1 minute", "400 days"])
def test_a_bad_deadline_is_refused_naming_it(conn: psycopg.Connection, bad: str) -> None:
    with pytest.raises(errors.InvalidParameterValue, match="bad deadline"):
        save(conn, "t", "every 1h", "SELECT 1", deadline=bad)
    assert scalar(conn, "SELECT count(*) FROM timers.timers") == 0


def test_a_bad_deadline_in_json_is_refused(conn: psycopg.Connection) -> None:
    with pytest.raises(errors.InvalidParameterValue, match="bad deadline"):
        conn.execute(
            "SELECT timers.save_many(%s::jsonb)",
            ['[{"name": "t", "schedule": "every 1h", "sql": "SELECT 1", "deadline": "soon"}]'],
        )
    assert scalar(conn, "SELECT count(*) FROM timers.timers") == 0

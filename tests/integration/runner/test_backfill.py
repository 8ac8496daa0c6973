"""Backfills: a timer's past due times run oldest first, one at a time, each exactly once,
with kind backfill; the view, cancel, the limits, rights and the audit."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg import errors
from psycopg.rows import dict_row

from tests.conftest import Database, scalar
from tests.integration.runner.conftest import save
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

StartRunner = Callable[..., RunnerProcess]

DONE_TABLE = "CREATE TABLE done (timer text, due text, at timestamptz DEFAULT clock_timestamp())"
DONE_SQL = (
    "INSERT INTO done (timer, due) VALUES (current_setting('pgtimers.timer'),"
    " current_setting('pgtimers.due_at'))"
)


@pytest.fixture
def done(conn: psycopg.Connection) -> Callable[[], list[str]]:
    conn.execute(DONE_TABLE)

    def read() -> list[str]:
        return [r[0] for r in conn.execute("SELECT due FROM done ORDER BY at").fetchall()]

    return read


def backfill(conn: psycopg.Connection, name: str, from_at: Any, to_at: Any) -> int:
    return int(scalar(conn, "SELECT timers.backfill(%s, %s, %s)", [name, from_at, to_at]))


def view(conn: psycopg.Connection, ident: int) -> dict[str, Any]:
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute("SELECT * FROM timers.backfills WHERE id = %s", [ident]).fetchone()
    assert row is not None
    return row


def finished(conn: psycopg.Connection, ident: int) -> bool:
    return bool(view(conn, ident)["state"] != "running")


def test_a_week_of_an_hourly_timer_runs_168_times_each_once_oldest_first(
    conn: psycopg.Connection, start_runner: StartRunner, done: Callable[[], list[str]]
) -> None:
    save(conn, "h", "hourly", DONE_SQL, enabled=False)  # off: a backfill runs it anyway
    to_at = scalar(conn, "SELECT date_trunc('hour', now()) - interval '1 hour'")
    from_at = to_at - dt.timedelta(days=7)
    ident = backfill(conn, "h", from_at, to_at)
    before = view(conn, ident)
    assert (before["total"], before["done"], before["state"]) == (168, 0, "running")
    assert before["next_at"] == from_at
    start_runner()
    wait_until(lambda: finished(conn, ident), timeout=60, what="the backfill to end")
    expected = [
        (from_at + dt.timedelta(hours=h)).strftime("%Y-%m-%dT%H:%M:%SZ") for h in range(168)
    ]
    assert done() == expected  # each once, oldest first, pgtimers.due_at = the due time
    after = view(conn, ident)
    assert (after["total"], after["done"], after["failed"], after["state"]) == (168, 168, 0, "done")
    assert after["next_at"] is None and after["ended_at"] is not None
    kinds = conn.execute(
        "SELECT kind, count(*), count(DISTINCT due_at), bool_and(backfill_id = %s)"
        " FROM timers.runs WHERE timer = 'h' GROUP BY kind",
        [ident],
    ).fetchall()
    assert kinds == [("backfill", 168, 168, True)]
    # the timer itself stays as it was: off, its counters untouched
    assert conn.execute("SELECT enabled, runs FROM timers.status WHERE name = 'h'").fetchone() == (
        False,
        0,
    )
    audit = scalar(conn, "SELECT detail FROM timers.audit WHERE action = 'backfill'")
    assert (audit["backfill"], audit["total"]) == (ident, 168)


def test_failed_due_times_are_counted_and_the_backfill_goes_on(
    conn: psycopg.Connection, start_runner: StartRunner
) -> None:
    # fails on even hours
    sql = "SELECT 1 / (extract(hour FROM current_setting('pgtimers.due_at')::timestamptz)::int % 2)"
    save(conn, "f", "hourly", sql)
    to_at = scalar(conn, "SELECT date_trunc('day', now())")
    ident = backfill(conn, "f", to_at - dt.timedelta(hours=10), to_at)
    start_runner()
    wait_until(lambda: finished(conn, ident), timeout=30, what="the backfill to end")
    row = view(conn, ident)
    assert (row["total"], row["done"], row["failed"], row["state"]) == (10, 10, 5, "done")


def test_cancel_stops_a_backfill_between_due_times(
    conn: psycopg.Connection, start_runner: StartRunner, done: Callable[[], list[str]]
) -> None:
    save(conn, "slow", "every 1m", DONE_SQL + "; SELECT pg_sleep(0.05)")
    to_at = scalar(conn, "SELECT date_trunc('minute', now()) - interval '1 hour'")
    ident = backfill(conn, "slow", to_at - dt.timedelta(hours=5), to_at)
    start_runner()
    wait_until(lambda: len(done()) >= 3, what="a few to run")
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute("SELECT * FROM timers.cancel_backfill(%s)", [ident]).fetchone()
    assert (
        row is not None and row["state"] == "cancelled" and row["note"].startswith("cancelled by")
    )
    ran = row["done"]
    conn.execute("SELECT pg_sleep(0.3)")
    assert len(done()) == ran < 300
    assert view(conn, ident)["done"] == ran
    # cancelling an ended one leaves it as it is
    again = scalar(conn, "SELECT (timers.cancel_backfill(%s)).state", [ident])
    assert again == "cancelled"
    assert scalar(conn, "SELECT count(*) FROM timers.audit WHERE action = 'cancel_backfill'") == 1


def test_deleting_the_timer_ends_its_backfills(conn: psycopg.Connection) -> None:
    save(conn, "gone", "hourly", "SELECT 1")
    ident = backfill(conn, "gone", "2026-01-01", "2026-01-02")
    conn.execute("SELECT timers.delete('gone')")
    row = view(conn, ident)
    assert (row["state"], row["note"]) == ("cancelled", "the timer was deleted")


def test_a_test_clock_timer_backfills_up_to_its_clock(
    conn: psycopg.Connection, start_runner: StartRunner, done: Callable[[], list[str]]
) -> None:
    conn.execute("SELECT timers.create_test_clock('c', '2030-01-01 00:00+00')")
    save(conn, "tc", "daily 06:00", DONE_SQL, test_clock="c")
    with pytest.raises(errors.InvalidParameterValue, match="after now"):
        backfill(conn, "tc", "2029-12-30", "2030-01-02")
    ident = backfill(conn, "tc", "2029-12-25", "2030-01-01")
    start_runner()
    wait_until(lambda: finished(conn, ident), what="the backfill to end")
    assert done() == [f"2029-12-{d}T06:00:00Z" for d in range(25, 32)]


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        (("h", None, "2026-01-02"), errors.NullValueNotAllowed, "not NULL"),
        (("h", "2026-01-02", "2026-01-01"), errors.InvalidParameterValue, "not after from_at"),
        (
            ("h", "2026-01-01", "2999-01-01"),
            errors.InvalidParameterValue,
            "runs past due times only",
        ),
        (
            ("h", "2026-01-01 00:10", "2026-01-01 00:50"),
            errors.InvalidParameterValue,
            "no due time",
        ),
        (("s", "2026-01-01", "2026-01-01 03:00"), errors.ProgramLimitExceeded, "at most 10000"),
        (("nope", "2026-01-01", "2026-01-02"), errors.NoDataFound, "no timer 'nope'"),
        (("h", "infinity", "2026-01-02"), errors.DatetimeFieldOverflow, "bad from_at"),
    ],
)
def test_bad_backfills_say_why_and_change_nothing(
    conn: psycopg.Connection, args: tuple[Any, ...], error: type[Exception], message: str
) -> None:
    save(conn, "h", "hourly", "SELECT 1")
    save(conn, "s", "every 1s", "SELECT 1")
    with pytest.raises(error, match=message):
        backfill(conn, *args)
    assert scalar(conn, "SELECT count(*) FROM timers.backfill_jobs") == 0
    assert scalar(conn, "SELECT count(*) FROM timers.audit WHERE action = 'backfill'") == 0


def test_backfill_is_for_admins_and_readers_see_the_view(
    db: Database, conn: psycopg.Connection
) -> None:
    save(conn, "h", "hourly", "SELECT 1")
    ident = backfill(conn, "h", "2026-01-01", "2026-01-02")
    with db.connect("pgt_reader") as reader:
        with pytest.raises(errors.InsufficientPrivilege, match="pgtimers_admin"):
            reader.execute("SELECT timers.backfill('h', '2026-01-01', '2026-01-02')")
        reader.rollback() if not reader.autocommit else None
        assert scalar(reader, "SELECT total FROM timers.backfills WHERE id = %s", [ident]) == 24
        with pytest.raises(errors.InsufficientPrivilege):
            reader.execute("SELECT timers.cancel_backfill(%s)", [ident])
    with db.connect("pgt_alice") as alice:
        assert scalar(alice, "SELECT (timers.cancel_backfill(%s)).state", [ident]) == "cancelled"
    with pytest.raises(errors.NoDataFound, match="no backfill 999"):
        conn.execute("SELECT timers.cancel_backfill(999)")


def test_runners_killed_during_a_backfill_run_each_due_time_once(
    conn: psycopg.Connection, start_runner: StartRunner, done: Callable[[], list[str]]
) -> None:
    save(conn, "k", "hourly", DONE_SQL + "; SELECT pg_sleep(0.05)")
    to_at = scalar(conn, "SELECT date_trunc('hour', now()) - interval '1 hour'")
    ident = backfill(conn, "k", to_at - dt.timedelta(hours=48), to_at)
    kills = 0
    while kills < 3:
        runner = start_runner()
        ran = len(done())
        wait_until(lambda: len(done()) >= ran + 5, timeout=15, what="a few more to run")  # noqa: B023
        runner.kill()  # SIGKILL, maybe in the middle of one: it rolls back with the connection
        kills += 1
    last = start_runner()
    wait_until(lambda: finished(conn, ident), timeout=30, what="the backfill to end")
    dues = done()
    assert len(dues) == len(set(dues)) == 48  # none twice, none lost
    assert dues == sorted(dues)
    row = view(conn, ident)
    assert (row["done"], row["failed"], row["state"]) == (48, 0, "done")
    assert last.stop() == 0

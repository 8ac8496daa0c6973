"""The event outbox (timers.events), recovered events, history => 'failures' and the
run histograms each timer's row keeps, on a test clock and a real runner."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg import errors
from psycopg.rows import dict_row

from tests.conftest import Database, scalar
from tests.integration.runner.conftest import save, status
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

StartRunner = Callable[..., RunnerProcess]
T0 = "2027-01-04 09:00:00+00"
# fails at 10:00 and 11:00 of the clock, else goes well
FAILS_AT_10_AND_11 = (
    "SELECT 1 / (CASE WHEN extract(hour FROM current_setting('pgtimers.due_at')::timestamptz"
    " AT TIME ZONE 'UTC') IN (10, 11) THEN 0 ELSE 1 END)"
)


@pytest.fixture
def clock(conn: psycopg.Connection) -> str:
    conn.execute("SELECT timers.create_test_clock('c', %s)", [T0])
    return "c"


def advance(conn: psycopg.Connection, to: str) -> None:
    conn.execute("CALL timers.advance_test_clock('c', %s)", [f"2027-01-04 {to}:00+00"])


def outbox(conn: psycopg.Connection, timer: str) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(
            "SELECT id, event, due_at, attempt, error, sqlstate, detail, run_id FROM timers.events"
            " WHERE timer = %s ORDER BY id",
            [timer],
        ).fetchall()


def test_each_event_is_a_row_written_with_what_it_reports(
    conn: psycopg.Connection, clock: str, start_runner: StartRunner
) -> None:
    save(conn, "t", "every 1h", FAILS_AT_10_AND_11, test_clock=clock, pause_after=3)
    start_runner()
    conn.execute("LISTEN pgtimers_events")
    advance(conn, "13:00")
    rows = outbox(conn, "t")
    assert [(r["event"], r["due_at"].hour) for r in rows] == [
        ("failed", 10),
        ("failed", 11),
        ("recovered", 12),
    ]
    failed = rows[0]
    assert (failed["error"], failed["sqlstate"], failed["attempt"]) == (
        "division by zero",
        "22012",
        1,
    )
    # the run it reports, by id
    run = scalar(conn, "SELECT error FROM timers.runs WHERE id = %s", [failed["run_id"]])
    assert run == "division by zero"
    # NOTIFY stays the wake-up, and names the row
    notes = [json.loads(n.payload) for n in conn.notifies(timeout=1, stop_after=3)]
    assert [n["event_id"] for n in notes] == [r["id"] for r in rows]


def test_no_failure_no_recovered(
    conn: psycopg.Connection, clock: str, start_runner: StartRunner
) -> None:
    save(conn, "t", "every 1h", "SELECT 1", test_clock=clock)
    start_runner()
    advance(conn, "12:00")
    assert outbox(conn, "t") == []  # no failure, nothing to recover from


def test_a_pause_and_a_backfill_are_events_too(
    conn: psycopg.Connection, clock: str, start_runner: StartRunner
) -> None:
    save(conn, "t", "every 1h", "SELECT 1 / 0", test_clock=clock, pause_after=1)
    start_runner()
    advance(conn, "10:00")
    assert [r["event"] for r in outbox(conn, "t")] == ["failed", "paused"]
    save(conn, "b", "every 1h", "SELECT 1", test_clock=clock)
    conn.execute(
        "SELECT timers.backfill('b', %s, %s)", ["2027-01-04 05:00+00", "2027-01-04 07:00+00"]
    )
    conn.execute("NOTIFY pgtimers")
    wait_until(
        lambda: [r["event"] for r in outbox(conn, "b")] == ["backfill_done"], what="backfill_done"
    )
    assert outbox(conn, "b")[0]["detail"]["state"] == "done"


def test_a_reader_reads_the_outbox_and_may_not_write_it(
    db: Database, conn: psycopg.Connection
) -> None:
    conn.execute("SELECT timers._event('failed', 'x', NULL, 1, 'boom', '22012')")
    with db.connect("pgt_reader") as reader:
        assert scalar(reader, "SELECT count(*) FROM timers.events") == 1
        with pytest.raises(errors.InsufficientPrivilege):
            reader.execute("DELETE FROM timers.events")


def test_events_are_pruned_with_the_runs(conn: psycopg.Connection) -> None:
    conn.execute("SELECT timers._event('failed', 'x', NULL, 1, 'boom', '22012')")
    conn.execute("UPDATE timers.events SET at = now() - interval '31 days'")
    conn.execute("SELECT timers._event('failed', 'x', NULL, 1, 'new', '22012')")
    pruned = scalar(conn, "SELECT timers._prune()")
    assert pruned["events"] == 1
    assert scalar(conn, "SELECT array_agg(error) FROM timers.events") == ["new"]


def test_history_failures_keeps_failures_and_the_counters_but_no_successful_rows(
    conn: psycopg.Connection, clock: str, start_runner: StartRunner
) -> None:
    save(conn, "t", "every 1h", FAILS_AT_10_AND_11, test_clock=clock, history="failures")
    save(conn, "all", "every 1h", FAILS_AT_10_AND_11, test_clock=clock)
    start_runner()
    advance(conn, "14:00")
    kept = conn.execute(
        "SELECT extract(hour FROM due_at AT TIME ZONE 'UTC')::int, ok FROM timers.runs"
        " WHERE timer = 't' ORDER BY id"
    ).fetchall()
    assert kept == [(10, False), (11, False)]
    assert scalar(conn, "SELECT count(*) FROM timers.runs WHERE timer = 'all'") == 5
    mine, other = status(conn, "t"), status(conn, "all")
    for key in ("runs", "failures", "last_ok", "last_due_ms", "last_success_ms"):
        assert mine[key] == other[key], key
    assert mine["history"] == "failures" and other["history"] == "all"
    assert mine["runs"] == 5 and mine["last_success_ms"] > 0
    # the histograms count every run, kept or not
    row = conn.execute(
        "SELECT took_counts, late_counts FROM timers.timers WHERE name = 't'"
    ).fetchone()
    assert row is not None
    assert sum(row[0]) == 5 and sum(row[1]) == 5
    # the sums are the runs' own
    sums = conn.execute(
        "SELECT t.took_sum_ms, t.late_sum_ms, sum(r.took_ms), sum(greatest(r.late_ms, 0))"
        " FROM timers.timers t JOIN timers.runs r ON r.timer_id = t.id WHERE t.name = 'all'"
        " GROUP BY t.took_sum_ms, t.late_sum_ms"
    ).fetchone()
    assert sums is not None and (sums[0], sums[1]) == (sums[2], sums[3])


def test_a_bad_history_is_refused_naming_it(conn: psycopg.Connection) -> None:
    with pytest.raises(errors.InvalidParameterValue, match="bad history 'some'"):
        save(conn, "t", "every 1h", "SELECT 1", history="some")
    assert scalar(conn, "SELECT count(*) FROM timers.timers") == 0


def test_the_bucket_of_a_duration(conn: psycopg.Connection) -> None:
    # bounds 5, 10, 25 ms ...: a value is in the first bucket whose bound it does not exceed
    got = [
        scalar(conn, "SELECT timers._bucket(%s, timers._duration_buckets())", [ms])
        for ms in (0, 5, 6, 10, 11, 300000, 300001)
    ]
    assert got == [1, 1, 2, 2, 3, 13, 14]

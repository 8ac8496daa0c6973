"""Run groups on real runners (issue 34): three timers of a group with max_running 1, each
sleeping 1 s every second, served by two runners with workers to spare, never run two at
once (measured from timers.runs' start and end); those that waited are late by as long,
and show waiting_for_group meanwhile; a due time whose next came first is skipped as late;
a timer outside the group is not held up. A runner killed mid-run frees its slot."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.rows import dict_row

from tests.integration.runner.conftest import save, status
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

StartRunner = Callable[..., RunnerProcess]
MS = dt.timedelta(milliseconds=1)


def runs(conn: psycopg.Connection, *timers: str) -> list[dict[str, Any]]:
    """Their runs that went well, by start: timer, due_at, start, end (start + took_ms), late_ms."""
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(
            "SELECT timer, due_at, started_at AS start,"
            "       started_at + took_ms * interval '1 millisecond' AS end, late_ms"
            "  FROM timers.runs WHERE timer = ANY (%s) AND kind <> 'skipped' AND ok"
            " ORDER BY started_at",
            [list(timers)],
        ).fetchall()


def waiting(conn: psycopg.Connection) -> list[str]:
    rows = conn.execute(
        "SELECT name FROM timers.status WHERE waiting_for_group ORDER BY name"
    ).fetchall()
    return [r[0] for r in rows]


def test_a_group_with_max_running_1_never_runs_two_at_once(
    conn: psycopg.Connection, start_runner: StartRunner
) -> None:
    group = ("heavy-a", "heavy-b", "heavy-c")
    for name in group:
        save(conn, name, "every 1s", "SELECT pg_sleep(1)", run_group="heavy")
    save(conn, "free", "every 1s", "SELECT 1")
    assert conn.execute("SELECT max_running FROM timers.run_groups").fetchall() == [(1,)]
    first = start_runner("--workers", "4")
    start_runner("--workers", "4")

    # while one of them runs, the others are due and wait for the group
    seen = wait_until(lambda: waiting(conn), timeout=20, what=first.log)
    assert set(seen) <= set(group)
    wait_until(lambda: len(runs(conn, *group)) >= 6, timeout=40, what=first.log)

    done = runs(conn, *group)
    # never two at once: each run starts after the one before it ended
    for before, after in itertools.pairwise(done):
        assert after["start"] >= before["end"] - MS, (before, after)
    # each of the three ran
    assert {r["timer"] for r in done} == set(group)
    # a run due while another ran waited for it to end: its lateness says so
    waited = [
        (before, after)
        for before, after in itertools.pairwise(done)
        if after["due_at"] < before["end"]
    ]
    assert waited, done
    for before, after in waited:
        assert after["late_ms"] >= (before["end"] - after["due_at"]) / MS - 2, (before, after)

    # three due every second, one run a second at most: the due times whose next came
    # first were skipped by the late rule
    skipped = conn.execute(
        "SELECT count(*) FROM timers.runs WHERE timer = ANY (%s) AND kind = 'skipped'"
        " AND reason LIKE 'late: the next due time had come before a run could start%%'",
        [list(group)],
    ).fetchone()
    assert skipped is not None and skipped[0] > 0

    # the timer outside the group ran meanwhile, also while a run of the group went on
    free = runs(conn, "free")
    span = (done[0]["start"], done[-1]["end"])
    during = [f for f in free if span[0] <= f["start"] <= span[1]]
    assert len(during) >= 3, free
    assert any(r["start"] <= f["start"] <= r["end"] for f in during for r in done), (free, done)


def test_a_runner_killed_mid_run_frees_its_groups_slot(
    conn: psycopg.Connection, start_runner: StartRunner
) -> None:
    # hog's first run would hold the group's slot for 10 minutes; its redo takes none
    conn.execute("CREATE SEQUENCE hog_runs")
    hog = "SELECT pg_sleep(CASE WHEN nextval('hog_runs') = 1 THEN 600 ELSE 0 END)"
    save(conn, "hog", "every 1h", hog, run_group="g")
    save(conn, "next", "every 1h", "SELECT 1", run_group="g")
    first = start_runner()
    conn.execute(
        "UPDATE timers.timers SET next_due_at = date_trunc('milliseconds', now())"
        " WHERE name = 'hog'"
    )
    conn.execute("NOTIFY pgtimers")
    wait_until(lambda: status(conn, "hog")["running"], what=first.log)
    conn.execute(
        "UPDATE timers.timers SET next_due_at = date_trunc('milliseconds', now())"
        " WHERE name = 'next'"
    )
    wait_until(lambda: status(conn, "next")["waiting_for_group"], what=first.log)
    first.kill()  # SIGKILL: its session ends (client_connection_check_interval), its slot frees
    second = start_runner()

    # long before hog's first run would have ended: both ran, one after the other
    def said() -> str:
        """Both runners' logs and the database's sessions, for a wait that timed out."""
        sessions = conn.execute(
            "SELECT pid, application_name, state, wait_event, left(query, 60),"
            " now() - xact_start FROM pg_stat_activity WHERE datname = current_database()"
        ).fetchall()
        return f"{second.log()}\nthe killed runner:\n{first.log()}\nsessions: {sessions}"

    wait_until(lambda: status(conn, "next")["runs"] == 1, timeout=60, what=said)
    wait_until(lambda: status(conn, "hog")["runs"] == 1, timeout=60, what=second.log)
    assert status(conn, "next")["waiting_for_group"] is False
    assert second.stop() == 0

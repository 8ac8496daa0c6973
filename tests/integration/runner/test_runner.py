"""`pgtimers run` against a real database: exactly once, crashes, run-now, workers, stop."""

from __future__ import annotations

import collections
import datetime as dt
import itertools
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import psycopg
import pytest
from psycopg import errors

from tests.conftest import Database, scalar
from tests.integration.runner.conftest import LOG_SQL, history, save, status, timer_row
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

StartRunner = Callable[..., RunnerProcess]
Fired = Callable[..., list[tuple[str, str]]]


def due_now(conn: psycopg.Connection, name: str) -> dt.datetime:
    """Make a timer due right now (as if its time had come); returns that due time."""
    row = conn.execute(
        "UPDATE timers.timers SET next_due_at = date_trunc('milliseconds', now())"
        " WHERE name = %s RETURNING next_due_at",
        [name],
    ).fetchone()
    assert row is not None
    due: dt.datetime = row[0]
    conn.execute("NOTIFY pgtimers")
    return due


def running_timers(conn: psycopg.Connection) -> list[str]:
    rows = conn.execute(
        "SELECT application_name FROM pg_stat_activity"
        " WHERE datname = current_database() AND application_name LIKE 'pgtimers: %'"
    ).fetchall()
    return [r[0].removeprefix("pgtimers: ") for r in rows]


def test_each_due_time_commits_exactly_once_with_three_runners(
    conn: psycopg.Connection, start_runner: StartRunner, fired: Fired
) -> None:
    for name in ("a", "b", "c"):
        save(conn, name, "every 1s", LOG_SQL, catch_up="all")
    runners = [start_runner() for _ in range(3)]
    time.sleep(4.2)
    for runner in runners:
        assert runner.stop() == 0
    rows = fired()
    assert len(rows) == len(set(rows)), "a due time committed twice"
    for name in ("a", "b", "c"):
        dues = sorted(
            dt.datetime.fromisoformat(d.replace("Z", "+00:00")) for t, d in rows if t == name
        )
        assert len(dues) >= 3
        steps = {(b - a).total_seconds() for a, b in itertools.pairwise(dues)}
        assert steps == {1.0}, f"{name}: gaps in {dues}"
        assert timer_row(conn, name)["skipped"] == 0
        assert timer_row(conn, name)["last_due_at"] == dues[-1]
    # the runs spread over the runners, each in its own transaction
    assert scalar(conn, "SELECT count(DISTINCT runner) FROM timers.runs") >= 2


@pytest.mark.parametrize("other_runner_up", [True, False], ids=["other-runner-up", "restarted"])
def test_runner_killed_mid_run_leaves_nothing_and_the_due_time_is_redone(
    conn: psycopg.Connection, start_runner: StartRunner, fired: Fired, other_runner_up: bool
) -> None:
    # long enough that a second runner's start (seconds on a loaded machine) ends before it
    save(conn, "slowpoke", "every 1h", LOG_SQL + "; SELECT pg_sleep(4)")
    first = start_runner()
    due = due_now(conn, "slowpoke")
    wait_until(lambda: "slowpoke" in running_timers(conn), what="the run to start")
    second = start_runner() if other_runner_up else None
    first.kill()  # SIGKILL: no goodbye, the run's transaction dies with the connection
    assert fired() == []
    if second is None:
        second = start_runner()
    wait_until(
        lambda: timer_row(conn, "slowpoke")["last_due_at"] == due,
        timeout=15,
        what="another runner to redo the due time",
    )
    assert fired() == [
        (
            "slowpoke",
            due.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f").rstrip("0").rstrip(".")
            + "Z",
        )
    ]
    assert [r["kind"] for r in history(conn, "slowpoke")] == ["scheduled"]
    assert timer_row(conn, "slowpoke")["skipped"] == 0
    assert second.stop() == 0


def test_failed_run_is_recorded_and_logged_on_one_line(
    conn: psycopg.Connection, start_runner: StartRunner
) -> None:
    conn.execute("CREATE TABLE hits (n int)")
    save(conn, "boom", "every 1h", "INSERT INTO hits VALUES (1); SELECT 1/0")
    runner = start_runner()
    due_now(conn, "boom")
    wait_until(lambda: status(conn, "boom")["failures"] == 1)
    assert conn.execute("SELECT count(*) FROM hits").fetchone() == (0,)
    st = status(conn, "boom")
    assert (st["last_ok"], st["last_error"], st["failures_24h"]) == (False, "division by zero", 1)
    assert runner.stop() == 0
    lines = [ln for ln in runner.log().splitlines() if "event=run_failed" in ln]
    assert len(lines) == 1
    assert "timer=boom" in lines[0] and 'error="division by zero"' in lines[0]
    assert f"database={conn.info.dbname}" in lines[0]


def test_run_context_and_application_name(
    conn: psycopg.Connection, start_runner: StartRunner
) -> None:
    conn.execute("CREATE TABLE ctx (timer text, due text, app text)")
    save(
        conn,
        "ctx",
        "every 1h",
        "INSERT INTO ctx SELECT current_setting('pgtimers.timer'),"
        " current_setting('pgtimers.due_at'), current_setting('application_name')",
    )
    start_runner()
    due = due_now(conn, "ctx")
    wait_until(lambda: scalar(conn, "SELECT count(*) FROM ctx") == 1)
    row = conn.execute("SELECT * FROM ctx").fetchone()
    assert row is not None
    timer, due_text, app = row
    assert (timer, app) == ("ctx", "pgtimers: ctx")
    assert dt.datetime.fromisoformat(due_text.replace("Z", "+00:00")) == due
    assert due_text.endswith("Z")


def test_run_now_end_to_end(
    db: Database, conn: psycopg.Connection, start_runner: StartRunner
) -> None:
    conn.execute("CREATE TABLE hits (n int)")
    save(conn, "now", "daily 02:00", "INSERT INTO hits VALUES (1), (2)", enabled=False)
    before = timer_row(conn, "now")
    start_runner()
    with db.connect("pgt_alice") as alice:
        result = scalar(alice, "CALL timers.run('now')")
    assert result["finished"] is True
    assert {k: result[k] for k in ("name", "ok", "error", "rows")} == {
        "name": "now",
        "ok": True,
        "error": "",
        "rows": 2,
    }
    assert set(result) == {"name", "finished", "ok", "error", "took_ms", "rows"}
    after = timer_row(conn, "now")
    # a disabled timer runs; its plan does not move
    assert (after["next_due_at"], after["last_due_at"]) == (before["next_due_at"], None)
    assert (after["runs"], after["scheduled_runs"], after["last_ok"]) == (1, 0, True)
    assert [r["kind"] for r in history(conn, "now")] == ["run_now"]
    assert conn.execute(
        "SELECT actor, session, action, object FROM timers.audit WHERE action = 'run'"
    ).fetchall() == [("pgt_alice", "pgt_alice", "run", "now")]


@pytest.mark.parametrize(
    ("sql", "rows"),
    [
        ("CALL public.refresh_totals()", 3),  # 2 inserted + 1 updated
        ("DO $$ BEGIN INSERT INTO public.totals VALUES ('x', 1); END $$", 1),
        ("DELETE FROM public.totals; UPDATE public.totals SET n = n WHERE false", 1),
        ("SELECT * FROM generate_series(1, 4)", 4),  # what it returned
        ("SELECT 1 WHERE false", 0),
    ],
    ids=["call", "do", "last-counts-none", "select", "nothing"],
)
def test_rows_of_a_run_count_what_a_procedure_wrote(
    db: Database, conn: psycopg.Connection, start_runner: StartRunner, sql: str, rows: int
) -> None:
    conn.execute("CREATE TABLE public.totals (k text PRIMARY KEY, n int)")
    conn.execute("INSERT INTO public.totals VALUES ('a', 1)")
    conn.execute(
        "CREATE PROCEDURE public.refresh_totals() LANGUAGE sql AS $$"
        " INSERT INTO public.totals VALUES ('b', 2), ('c', 3);"
        " UPDATE public.totals SET n = n + 1 WHERE k = 'a' $$"
    )
    conn.execute("GRANT ALL ON public.totals TO pgt_alice")
    conn.execute("GRANT EXECUTE ON PROCEDURE public.refresh_totals() TO pgt_alice")
    save(conn, "totals", "daily 02:00", sql, enabled=False)
    start_runner()
    result = scalar(conn, "CALL timers.run('totals')")
    assert (result["ok"], result["error"], result["rows"]) == (True, "", rows)
    assert status(conn, "totals")["last_rows"] == rows
    assert [r["rows"] for r in history(conn, "totals")] == [rows]


def test_run_now_reports_a_failure_and_refuses_a_running_timer(
    db: Database, conn: psycopg.Connection, start_runner: StartRunner
) -> None:
    save(conn, "bad", "daily 02:00", "SELECT 1/0")
    save(conn, "busy", "every 1h", "SELECT pg_sleep(2)")
    start_runner()
    with db.connect("pgt_alice") as alice:
        result = scalar(alice, "CALL timers.run('bad')")
        assert (result["finished"], result["ok"], result["error"]) == (
            True,
            False,
            "division by zero",
        )
        due_now(conn, "busy")
        wait_until(lambda: "busy" in running_timers(conn), what="the scheduled run")
        assert status(conn, "busy")["running"] is True
        with pytest.raises(errors.LockNotAvailable, match="timer 'busy' is running"):
            alice.execute("CALL timers.run('busy')")


def test_slow_timer_does_not_make_another_late(
    conn: psycopg.Connection, start_runner: StartRunner
) -> None:
    save(conn, "slow1", "every 1h", "SELECT pg_sleep(3)")
    save(conn, "slow2", "every 1h", "SELECT pg_sleep(3)")
    start_runner()  # 2 workers, plus the burst worker while both are busy
    save(conn, "quick", "every 1s", "SELECT 1")
    wait_until(lambda: timer_row(conn, "quick")["runs"] >= 1)
    due_now(conn, "slow1")
    due_now(conn, "slow2")
    wait_until(lambda: {"slow1", "slow2"} <= set(running_timers(conn)), what="both slow runs")
    conn.execute("UPDATE timers.timers SET max_late_ms = 0 WHERE name = 'quick'")
    runs_before = timer_row(conn, "quick")["runs"]
    time.sleep(2.5)
    assert {"slow1", "slow2"} <= set(running_timers(conn)), "the slow runs should still be running"
    quick = timer_row(conn, "quick")
    assert quick["runs"] - runs_before >= 2
    assert quick["skipped"] == 0
    assert quick["max_late_ms"] < 500


def test_one_worker_runs_one_timer_at_a_time(
    conn: psycopg.Connection, start_runner: StartRunner, fired: Fired
) -> None:
    save(conn, "s1", "every 1h", LOG_SQL + "; SELECT pg_sleep(1)")
    save(conn, "s2", "every 1h", LOG_SQL + "; SELECT pg_sleep(1)")
    start_runner("--workers", "1")
    conn.execute("UPDATE timers.timers SET next_due_at = now() WHERE name IN ('s1', 's2')")
    conn.execute("NOTIFY pgtimers")
    wait_until(lambda: len(fired()) == 2, timeout=10)
    starts = [r[0] for r in conn.execute("SELECT at FROM fired ORDER BY at").fetchall()]
    assert (starts[1] - starts[0]).total_seconds() >= 0.95


def test_sigterm_lets_the_running_run_finish_and_exits_0(
    conn: psycopg.Connection, start_runner: StartRunner, fired: Fired
) -> None:
    save(conn, "finishing", "every 1h", LOG_SQL + "; SELECT pg_sleep(1.5)")
    runner = start_runner()
    due_now(conn, "finishing")
    wait_until(lambda: "finishing" in running_timers(conn), what="the run to start")
    runner.proc.send_signal(signal.SIGTERM)
    assert runner.proc.wait(10) == 0
    assert len(fired()) == 1
    assert [(r["kind"], r["ok"]) for r in history(conn, "finishing")] == [("scheduled", True)]
    assert "event=stopping signal=SIGTERM" in runner.log()


def test_seed_overlap_an_every_1s_that_takes_1_2s_keeps_its_regular_times(
    conn: psycopg.Connection, start_runner: StartRunner, fired: Fired
) -> None:
    # The seed's `every 10s` that takes 11 s, ten times faster: it runs at 0, 2, 4 ...
    start_runner()
    save(conn, "overlap", "every 1s", LOG_SQL + "; SELECT pg_sleep(1.2)")
    wait_until(lambda: len(fired()) >= 3, timeout=10)
    dues = [dt.datetime.fromisoformat(d.replace("Z", "+00:00")) for _, d in fired()[:3]]
    assert [(b - a).total_seconds() for a, b in itertools.pairwise(dues)] == [2.0, 2.0]
    skips = [r for r in history(conn, "overlap") if r["kind"] == "skipped"]
    assert len(skips) >= 2
    assert all("was still running" in r["reason"] for r in skips)
    st = status(conn, "overlap")
    assert st["skipped"] >= 2 and "was still running" in st["last_skip_reason"]
    assert st["caught_up"] == 0


def test_a_late_start_gets_its_one_catch_up_run(
    db: Database, conn: psycopg.Connection, start_runner: StartRunner, fired: Fired
) -> None:
    start_runner()
    save(conn, "late", "every 2s", LOG_SQL + "; SELECT pg_sleep(0.5)")
    wait_until(lambda: len(fired()) >= 1, timeout=5)
    row = timer_row(conn, "late")
    due = row["next_due_at"]
    # Hold the timer's row (as a busy runner would) until 1.7 s after its due time:
    # the run starts late, and the next due time comes while it runs.
    holder = db.connect(autocommit=False)

    def hold() -> None:
        holder.execute("SELECT 1 FROM timers.timers WHERE name = 'late' FOR UPDATE")
        wait_s = (due - scalar(holder, "SELECT clock_timestamp()")).total_seconds()
        time.sleep(max(0.0, wait_s) + 1.7)
        holder.commit()

    thread = threading.Thread(target=hold)
    thread.start()
    thread.join()
    holder.close()
    wait_until(lambda: timer_row(conn, "late")["caught_up"] == 1, timeout=6)
    kinds = collections.Counter(r["kind"] for r in history(conn, "late"))
    assert kinds["catch_up"] == 1
    assert kinds["skipped"] == 0
    catch = next(r for r in history(conn, "late") if r["kind"] == "catch_up")
    assert catch["due_at"] == due + dt.timedelta(seconds=2)


def test_status_running_and_runners_table(
    conn: psycopg.Connection, start_runner: StartRunner
) -> None:
    save(conn, "r", "every 1h", "SELECT pg_sleep(1)")
    runner = start_runner()
    rows = conn.execute("SELECT host, os_pid, workers FROM timers.runners").fetchall()
    assert len(rows) == 1 and rows[0][1] == runner.pid and rows[0][2] == 2
    assert conn.execute("SELECT timers._live_runners()").fetchone() == (1,)
    due_now(conn, "r")
    wait_until(lambda: status(conn, "r")["running"], what="running = true")
    wait_until(lambda: not status(conn, "r")["running"], what="running = false")
    assert runner.stop() == 0
    assert conn.execute("SELECT timers._live_runners()").fetchone() == (0,)


def test_cli_run_name_runs_now_and_exits_by_result(
    db: Database, conn: psycopg.Connection, start_runner: Callable[..., RunnerProcess]
) -> None:
    save(conn, "good", "daily 03:00", "SELECT 1")
    save(conn, "bad", "daily 03:00", "SELECT 1/0")
    start_runner()

    def cli(name: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pgtimers", "run", name, "--dsn", db.dsn],
            capture_output=True,
            text=True,
            check=False,
        )

    ok = cli("good")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout) | {"took_ms": 0} == {
        "name": "good",
        "finished": True,
        "ok": True,
        "error": "",
        "took_ms": 0,
        "rows": 1,
    }
    failed = cli("bad")
    assert failed.returncode == 1
    assert json.loads(failed.stdout)["error"] == "division by zero"
    missing = cli("nope")
    assert missing.returncode == 2 and "there is no timer 'nope'" in missing.stderr


def test_nothing_a_run_sets_leaks_into_the_next_run_on_the_connection(
    db: Database, conn: psycopg.Connection, start_runner: Callable[..., RunnerProcess]
) -> None:
    conn.execute("CREATE TABLE seen (timer text, work_mem text)")
    conn.execute("GRANT INSERT ON seen TO pgt_alice")
    with db.connect("pgt_alice") as alice:
        # A plain SET and a temp table without ON COMMIT DROP, run as a non-superuser.
        save(
            alice,
            "dirty",
            "daily 03:00",
            "SET work_mem = '77MB'; CREATE TEMP TABLE scratch (a int);"
            " INSERT INTO seen VALUES ('dirty', current_setting('work_mem'))",
        )
        save(
            alice,
            "clean",
            "daily 03:00",
            "INSERT INTO seen VALUES ('clean', current_setting('work_mem'))",
        )
    start_runner("--workers", "1")
    for name in ("dirty", "dirty", "clean"):  # one worker: the same connection each time
        row = conn.execute("CALL timers.run(%s)", [name]).fetchone()
        assert row is not None and row[0]["ok"] is True, row
    rows = conn.execute("SELECT timer, work_mem FROM seen").fetchall()
    assert rows[:2] == [("dirty", "77MB"), ("dirty", "77MB")]
    assert rows[2][0] == "clean" and rows[2][1] != "77MB"


def test_a_timer_with_a_time_limit_of_its_own_runs_under_it(
    conn: psycopg.Connection, start_runner: StartRunner, fired: Fired
) -> None:
    """Not the runner's default limit: a second step with the timer's own (its claim comes
    back to the runner, which runs it in a transaction with that statement_timeout)."""
    save(conn, "short", "every 1h", LOG_SQL + "; SELECT pg_sleep(3)", timeout="1 second")
    save(conn, "long", "every 1h", LOG_SQL + "; SELECT pg_sleep(1.2)", timeout="20 seconds")
    runner = start_runner()
    due_now(conn, "short")
    due_now(conn, "long")
    wait_until(lambda: status(conn, "short")["failures"] == 1, timeout=15, what="short to time out")
    wait_until(lambda: status(conn, "long")["runs"] == 1, timeout=15, what="long to run")
    assert status(conn, "short")["last_error"] == (
        "timed out: the run took longer than its timeout of 00:00:01"
    )
    assert status(conn, "long")["last_ok"] is True
    assert [t for t, _ in fired()] == ["long"]
    assert "event=run_error" not in runner.log()

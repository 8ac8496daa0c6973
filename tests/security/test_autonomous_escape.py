"""An autonomous timer's SQL runs in a session of its owner's own login: there is no
other identity in that session to get back to or to switch to. Owner A's procedure tries
every way out (RESET ROLE, SET ROLE and SET SESSION AUTHORIZATION to another owner, the
runner's login, pgtimers_runner and the superuser; pg_authid; the runner's bookkeeping and
its routines; killing the runner's backends) and each is refused for want of privilege;
A's run is recorded as it ran, not as forged; and owner B's run right after, in a session
of its own, runs as B and sees nothing A left (temporary table, prepared statement,
LISTEN, settings, search_path).

The runner logs in as a plain login that is a member of pgtimers_runner only (not a
superuser), with the owners' passwords in its password file (PGPASSFILE).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row

from tests.conftest import Database, scalar
from tests.integration.runner.test_autonomous import (
    PASSWORD,
    drop_owner,
    finished,
    make_owner,
    runs,
    save_autonomous,
)
from tests.support.runner import RunnerProcess

# A's procedure: each way out in a block of its own, the outcome recorded whether or
# not it got through (a block that got through is undone by the sentinel P0099, so one
# success does not change what the next attempt runs as). The names it needs are in
# public.escape_targets. SECURITY INVOKER: SET ROLE is refused in a definer's function.
ESCAPE = r"""
CREATE PROCEDURE public.escape() LANGUAGE plpgsql AS $body$
DECLARE
    tg public.escape_targets;
    v_run bigint;
    v_pids integer[];
    v_ok boolean;
    v_state text;
    v_detail text;
    v_what text;
    v_pid integer;
BEGIN
    SELECT * INTO tg FROM public.escape_targets;
    INSERT INTO public.attempts VALUES ('whoami', NULL, '', session_user || '/' || current_user);
    -- the leftovers a statement cannot make at the top level of an autonomous timer's SQL
    CREATE TEMP TABLE leftover_in (x int);
    EXECUTE 'PREPARE leftover_p AS SELECT 1';
    LISTEN leftover_ch;
    PERFORM set_config('escape.mark_in', 'A', false);
    BEGIN
        SELECT max(o.run_id) INTO v_run FROM timers.autonomous_runs o;
    EXCEPTION WHEN OTHERS THEN
        v_run := 0;
    END;
    SELECT array_agg(a.pid) INTO v_pids FROM pg_stat_activity a
     WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
       AND a.application_name LIKE 'pgtimers runner%';
    FOREACH v_what IN ARRAY ARRAY[
        'reset role, read b_secret', 'set role B', 'set role runner login',
        'set role pgtimers_runner', 'set role superuser', 'session authorization B',
        'session authorization superuser', 'read pg_authid', 'insert timers.runs',
        'update timers.timers', 'delete timers.autonomous_runs', 'forge _autonomous_finish',
        'terminate a runner backend']
    LOOP
        v_ok := false;
        v_state := '';
        v_detail := '';
        BEGIN
            CASE v_what
            WHEN 'reset role, read b_secret' THEN
                RESET ROLE;
                PERFORM count(*) FROM public.b_secret;
            WHEN 'set role B' THEN
                EXECUTE format('SET ROLE %I', tg.b);
            WHEN 'set role runner login' THEN
                EXECUTE format('SET ROLE %I', tg.runner);
            WHEN 'set role pgtimers_runner' THEN
                SET ROLE pgtimers_runner;
            WHEN 'set role superuser' THEN
                EXECUTE format('SET ROLE %I', tg.superuser);
            WHEN 'session authorization B' THEN
                EXECUTE format('SET SESSION AUTHORIZATION %I', tg.b);
            WHEN 'session authorization superuser' THEN
                EXECUTE format('SET SESSION AUTHORIZATION %I', tg.superuser);
            WHEN 'read pg_authid' THEN
                PERFORM count(*) FROM pg_catalog.pg_authid;
            WHEN 'insert timers.runs' THEN
                INSERT INTO timers.runs (timer_id, timer, kind, due_at, ok, runner)
                VALUES (tg.timer_id, 'a_escape', 'scheduled', now(), true, 'forged');
            WHEN 'update timers.timers' THEN
                UPDATE timers.timers SET last_error = 'forged' WHERE id = tg.timer_id;
            WHEN 'delete timers.autonomous_runs' THEN
                DELETE FROM timers.autonomous_runs;
            WHEN 'forge _autonomous_finish' THEN
                PERFORM timers._autonomous_finish(
                    v_run, '{"ok": false, "error": "forged", "sqlstate": "", "rows": 0}', 'forged');
            WHEN 'terminate a runner backend' THEN
                IF v_pids IS NULL THEN
                    RAISE EXCEPTION 'no runner backend seen' USING ERRCODE = 'P0098';
                END IF;
                FOREACH v_pid IN ARRAY v_pids LOOP
                    PERFORM pg_terminate_backend(v_pid);
                END LOOP;
            END CASE;
            v_ok := true;
            v_detail := 'got through as ' || session_user || '/' || current_user;
            RAISE EXCEPTION USING ERRCODE = 'P0099';
        EXCEPTION WHEN OTHERS THEN
            IF SQLSTATE <> 'P0099' THEN
                v_state := SQLSTATE;
                v_detail := SQLERRM;
            END IF;
        END;
        INSERT INTO public.attempts VALUES (v_what, v_ok, v_state, v_detail);
    END LOOP;
END
$body$"""

# A's timer: the procedure, then top-level statements that leave session state.
A_SQL = (
    "CALL public.escape();\n"
    "CREATE TEMP TABLE leftover (x int);\n"
    "SET escape.mark = 'A';\n"
    "SET search_path = a_schema"
)

# B's timer: what its session looks like.
B_SQL = (
    "INSERT INTO public.b_seen SELECT session_user, current_user,"
    " (SELECT count(*) FROM pg_catalog.pg_class"
    "   WHERE relnamespace = pg_catalog.pg_my_temp_schema()),"
    " pg_catalog.to_regclass('pg_temp.leftover') IS NOT NULL,"
    " (SELECT count(*) FROM pg_catalog.pg_prepared_statements),"
    " ARRAY(SELECT pg_catalog.pg_listening_channels()),"
    " pg_catalog.current_setting('escape.mark', true),"
    " pg_catalog.current_setting('escape.mark_in', true),"
    " pg_catalog.current_setting('search_path')"
)

ATTEMPTS = 13


@dataclass
class Cast:
    """Owners A and B, the runner's plain login, and the runner's password file."""

    a: str
    b: str
    runner: str
    passfile: Path

    def runner_dsn(self, db: Database) -> str:
        return make_conninfo(db.dsn, user=self.runner, password=PASSWORD)


@pytest.fixture
def cast(db: Database, conn: psycopg.Connection, tmp_path: Path) -> Iterator[Cast]:
    pid = os.getpid()
    passfile = tmp_path / "pgpass"
    c = Cast(f"pgt_esc_a_{pid}", f"pgt_esc_b_{pid}", f"pgt_esc_runner_{pid}", passfile)
    make_owner(conn, c.a, passfile)
    make_owner(conn, c.b, passfile)
    runner = sql.Identifier(c.runner)
    conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(runner))
    conn.execute(
        sql.SQL("CREATE ROLE {} LOGIN PASSWORD {} IN ROLE pgtimers_runner").format(
            runner, sql.Literal(PASSWORD)
        )
    )
    try:
        yield c
    finally:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
            [c.runner],
        )
        drop_owner(conn, c.a)
        drop_owner(conn, c.b)
        conn.execute(sql.SQL("DROP ROLE {}").format(runner))


@pytest.fixture
def runners(tmp_path: Path) -> Iterator[list[RunnerProcess]]:
    started: list[RunnerProcess] = []
    yield started
    for proc in started:
        proc.kill()


def _stage(db: Database, conn: psycopg.Connection, c: Cast) -> None:
    superuser = scalar(conn, "SELECT current_user")
    with db.connect(c.b) as b:
        b.execute("CREATE TABLE public.b_secret (secret text)")
        b.execute("INSERT INTO public.b_secret VALUES ('b only')")
        b.execute(
            "CREATE TABLE public.b_seen (login text, role text, temps bigint, leftover boolean,"
            " prepared bigint, channels text[], mark text, mark_in text, search_path text)"
        )
        save_autonomous(b, "b_looks", "daily 03:00", B_SQL)
    conn.execute(sql.SQL("CREATE SCHEMA a_schema AUTHORIZATION {}").format(sql.Identifier(c.a)))
    with db.connect(c.a) as a:
        a.execute(
            "CREATE TABLE public.escape_targets"
            " (b text, runner text, superuser text, timer_id bigint)"
        )
        a.execute(
            "CREATE TABLE public.attempts (what text, ok boolean, sqlstate text, detail text)"
        )
        # a session of another login may record too: a run that is not A's shows as such
        a.execute("GRANT SELECT ON public.escape_targets TO PUBLIC")
        a.execute("GRANT INSERT ON public.attempts TO PUBLIC")
        a.execute(ESCAPE)
        save_autonomous(a, "a_escape", "in 1s", A_SQL)
    timer_id = scalar(conn, "SELECT id FROM timers.timers WHERE name = 'a_escape'")
    conn.execute(
        "INSERT INTO public.escape_targets VALUES (%s, %s, %s, %s)",
        [c.b, c.runner, superuser, timer_id],
    )


def _scans(conn: psycopg.Connection) -> int:
    """How often b_secret was scanned (read before the test's own read of it)."""
    conn.execute("SELECT pg_stat_clear_snapshot()")
    return int(
        scalar(
            conn,
            "SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0) FROM pg_stat_user_tables"
            " WHERE relid = 'public.b_secret'::regclass",
        )
    )


def _rows(conn: psycopg.Connection, query: str) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(query).fetchall()


def test_an_autonomous_timer_cannot_leave_its_owner_nor_reach_the_next_run(
    db: Database,
    conn: psycopg.Connection,
    cast: Cast,
    runners: list[RunnerProcess],
    tmp_path: Path,
) -> None:
    c = cast
    # the runner's login can act as neither owner, and no owner as it
    for owner in (c.a, c.b):
        assert not scalar(conn, "SELECT pg_has_role(%s, %s, 'USAGE')", [c.runner, owner])
        assert not scalar(conn, "SELECT pg_has_role(%s, %s, 'MEMBER')", [c.runner, owner])
        assert not scalar(conn, "SELECT pg_has_role(%s, %s, 'MEMBER')", [owner, c.runner])
        assert not scalar(conn, "SELECT pg_has_role(%s, 'pgtimers_runner', 'MEMBER')", [owner])
    assert not scalar(conn, "SELECT rolsuper FROM pg_roles WHERE rolname = %s", [c.runner])

    _stage(db, conn, c)
    scans_before = _scans(conn)
    runner = RunnerProcess(
        ["--dsn", c.runner_dsn(db), "--workers", "2"],
        tmp_path / "runner.log",
        env={"PGPASSFILE": str(c.passfile)},
    )
    runners.append(runner)
    runner.wait_for("event=serving", timeout=20)

    [a_run] = finished(conn, "a_escape")
    # every way out was refused for want of privilege, in a session of A's own login
    attempts = _rows(conn, "SELECT * FROM public.attempts")
    tried = attempts[1:]
    assert len(tried) == ATTEMPTS, tried
    got_through = [t for t in tried if t["ok"] or t["sqlstate"] != "42501"]
    assert got_through == [], got_through
    assert attempts[0] == {
        "what": "whoami",
        "ok": None,
        "sqlstate": "",
        "detail": f"{c.a}/{c.a}",
    }

    # then B's timer, run now
    with db.connect(c.b) as b:
        result = scalar(b, "CALL timers.run('b_looks')")
    assert result["ok"], result
    [b_run] = runs(conn, "b_looks")

    # B's table was neither changed nor read
    assert _scans(conn) == scans_before
    assert scalar(conn, "SELECT array_agg(secret) FROM public.b_secret") == ["b only"]

    # A's run is recorded as it ran (ok), once; the bookkeeping has the real runs only
    assert a_run["ok"] is True and a_run["error"] == "", a_run
    assert (b_run["kind"], b_run["ok"]) == ("run_now", True), b_run
    all_runs = _rows(conn, "SELECT timer, kind, ok, error, runner FROM timers.runs ORDER BY id")
    assert [(r["timer"], r["kind"], r["ok"]) for r in all_runs] == [
        ("a_escape", "scheduled", True),
        ("b_looks", "run_now", True),
    ], all_runs
    assert all(r["runner"] not in ("", "forged") for r in all_runs), all_runs
    assert scalar(conn, "SELECT count(*) FROM timers.autonomous_runs") == 0
    timers = _rows(conn, "SELECT name, sql, last_ok, last_error FROM timers.timers ORDER BY name")
    assert [(t["name"], t["sql"], t["last_ok"], t["last_error"]) for t in timers] == [
        ("a_escape", A_SQL, True, ""),
        ("b_looks", B_SQL, True, ""),
    ], timers
    assert runner.proc.poll() is None, runner.log()

    # B ran as B, in a session with nothing of A's
    [seen] = _rows(conn, "SELECT * FROM public.b_seen")
    assert seen == {
        "login": c.b,
        "role": c.b,
        "temps": 0,
        "leftover": False,
        "prepared": 0,
        "channels": [],
        "mark": None,
        "mark_in": None,
        "search_path": '"$user", public',
    }, seen

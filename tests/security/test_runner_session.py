"""A run must leave nothing in the runner's session that outlives it.

A timer's SQL runs inside its owner's executor (SECURITY DEFINER), on a connection
the runner keeps and reuses for the next runs — of other owners — and for its own
queries, as the runner's login role (a superuser in the embedded default and in
these tests). Whatever the SQL leaves in that session is later used by someone
else, with their rights:

* a cursor WITH HOLD is run to completion at COMMIT, outside the executor, as the
  runner (PostgreSQL's CVE-2020-25695 class: "at-commit user code");
* a deferred constraint trigger fires at COMMIT (as the runner before
  PostgreSQL 18, which runs AFTER triggers as the role that queued them);
* a plain SET (or set_config(..., false)) of search_path persists, and the
  runner's own queries (pgtimers/runner/queries.sql) then resolve operators in the
  owner's schema (CVE-2018-1058 applied to the runner);
* PREPARE/DEALLOCATE share one namespace with the driver's protocol-level
  statements (asyncpg's __asyncpg_stmt_N__, psycopg's _pg3_N): a run can replace
  the statement the runner executes next;
* a TEMP table is found first by the next owner's unqualified names (the
  executors' search_path does not put pg_temp last), with triggers that run as
  that owner;
* a session-level advisory lock stays held.

Each fire's transaction puts the runner's session back before its COMMIT
(timers._session_reset: RESET ALL, the runner's own settings again, DISCARD TEMP,
UNLISTEN), which closes the settings and temporary-table cases; the tests model that
reset with the settings the worker reads when it connects (queries.sql session_settings),
so they follow whatever the worker does.

pg_cron sidesteps most of this by opening a new session for each job run; compare
citusdata/pg_cron#192 (unqualified operators in privileged code).

The fast cases play the runner with a superuser psycopg session that calls
timers._exec_as() and commits, as timers._execute does inside a run; the
end-to-end cases start a real `pgtimers run` and use CALL timers.run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import errors

from pgtimers.runner.queries import query
from tests.conftest import Database
from tests.security.helpers import ALICE, BOB, NOBODY, Runner, connect, save
from tests.support.wait import wait_until


@pytest.fixture
def logdb(db: Database) -> Database:
    """public.who_ran, and public.log_who(note): records current_user; alice owns the function."""
    with db.connect() as su:
        su.execute("CREATE TABLE public.who_ran (who name DEFAULT current_user, note text)")
        su.execute("GRANT ALL ON public.who_ran TO PUBLIC")
    with connect(db, ALICE) as alice:
        alice.execute(
            "CREATE FUNCTION public.log_who(note text) RETURNS integer LANGUAGE plpgsql AS $$"
            " BEGIN INSERT INTO public.who_ran (note) VALUES (note); RETURN 1; END $$"
        )
        save(alice, "t0", "SELECT 1")
    with connect(db, BOB) as bob:
        save(bob, "b0", "SELECT 1")
    return db


def quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _who_ran(db: Database) -> list[str]:
    with db.connect() as su:
        return sorted({r[0] for r in su.execute("SELECT who FROM public.who_ran")})


@pytest.fixture
def runner_session(logdb: Database) -> Iterator[psycopg.Connection]:
    """A superuser connection used like a runner's worker: transaction per run, then reused."""
    # startup settings, as the runner gives its own (RESET ALL returns to them)
    conn = psycopg.connect(logdb.dsn, autocommit=False, options="-c statement_timeout=20s")
    yield conn
    conn.close()


def _session_settings(conn: psycopg.Connection) -> tuple[Any, Any]:
    """The session's own settings, as the worker reads them when it connects."""
    row = conn.execute(query("session_settings")).fetchone()
    conn.commit()
    assert row is not None
    return row[0] or [], row[1] or []


def _run(conn: psycopg.Connection, owner: str, sql: str) -> bool:
    """One run, as the runner's worker does it: the SQL as its owner, the session put back
    (timers._session_reset), COMMIT. Only SQL that timers.save accepts gets this far: SQL
    refused at save never runs (returns False)."""
    try:
        conn.execute("SELECT timers._check_sql(%s)", [sql])
    except psycopg.Error:
        conn.rollback()
        return False
    conn.commit()
    names, values = _session_settings(conn)
    try:
        conn.execute("SELECT timers._exec_as(%s, %s)", [owner, sql])
    except psycopg.Error:
        conn.rollback()
    else:
        conn.execute("SELECT timers._session_reset(%s, %s)", [names, values])
        conn.commit()
    return True


# --------------------------------------------------------------------------- at-commit code


@pytest.mark.parametrize(
    "sql",
    [
        "DECLARE c CURSOR WITH HOLD FOR SELECT public.log_who('hold')",
        "DO $$ BEGIN EXECUTE"
        " 'DECLARE c CURSOR WITH HOLD FOR SELECT public.log_who(''hold'')'; END $$",
    ],
    ids=["declare", "in-do"],
)
def test_a_cursor_with_hold_never_runs_as_the_runner(
    logdb: Database, runner_session: psycopg.Connection, sql: str
) -> None:
    _run(runner_session, ALICE, sql)
    assert _who_ran(logdb) in ([], [ALICE])


def test_a_deferred_trigger_fires_as_the_owner(
    request: pytest.FixtureRequest, logdb: Database, runner_session: psycopg.Connection
) -> None:
    """PostgreSQL 18 runs AFTER triggers as the role that queued them; older servers as
    the role in effect at COMMIT — the runner — so the executor fires them itself
    (SET CONSTRAINTS ALL IMMEDIATE after the SQL)."""
    with connect(logdb, ALICE) as alice:
        alice.execute("CREATE TABLE public.trap (x int)")
        alice.execute(
            "CREATE FUNCTION public.trap_fn() RETURNS trigger LANGUAGE plpgsql AS $$"
            " BEGIN PERFORM public.log_who('deferred'); RETURN NULL; END $$"
        )
        alice.execute(
            "CREATE CONSTRAINT TRIGGER trap_t AFTER INSERT ON public.trap"
            " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.trap_fn()"
        )
    _run(runner_session, ALICE, "INSERT INTO public.trap VALUES (1)")
    assert _who_ran(logdb) == [ALICE]


# --------------------------------------------------------------------------- settings


_SETTING_CASES = [
    ("search_path", "SET search_path = public, pg_catalog"),
    ("search_path", "SELECT set_config('search_path', 'public, pg_catalog', false)"),
    ("search_path", "DO $$ BEGIN EXECUTE 'SET search_path = public, pg_catalog'; END $$"),
    ("statement_timeout", "SET statement_timeout = 1"),
    ("standard_conforming_strings", "SET standard_conforming_strings = off"),
    ("TimeZone", "SET TimeZone = 'Pacific/Kiritimati'"),
    ("default_transaction_read_only", "SET default_transaction_read_only = on"),
    ("row_security", "SET row_security = off"),
]


@pytest.mark.parametrize(
    ("setting", "sql"), _SETTING_CASES, ids=[f"{s}-{i}" for i, (s, _) in enumerate(_SETTING_CASES)]
)
def test_settings_do_not_outlive_the_run(
    runner_session: psycopg.Connection, setting: str, sql: str
) -> None:
    """The worker's reset_session (RESET ALL) after each run; a plain SET persists otherwise."""
    before = runner_session.execute(f"SHOW {setting}").fetchone()
    runner_session.commit()
    _run(runner_session, ALICE, sql)
    after = runner_session.execute(f"SHOW {setting}").fetchone()
    runner_session.commit()
    assert after == before


def test_set_local_ends_with_the_run(runner_session: psycopg.Connection) -> None:
    before = runner_session.execute("SHOW search_path").fetchone()
    runner_session.commit()
    _run(runner_session, ALICE, "SET LOCAL search_path = public, pg_catalog")
    assert runner_session.execute("SHOW search_path").fetchone() == before


def test_the_runners_queries_never_use_an_owners_operator(
    logdb: Database, runner_session: psycopg.Connection
) -> None:
    with connect(logdb, ALICE) as alice:
        alice.execute(
            "CREATE FUNCTION public.le(timestamptz, timestamptz) RETURNS boolean"
            " LANGUAGE plpgsql AS $$"
            " BEGIN PERFORM public.log_who('<='); RETURN $1 OPERATOR(pg_catalog.<=) $2; END $$"
        )
        alice.execute(
            "CREATE OPERATOR public.<= (FUNCTION = public.le,"
            " LEFTARG = timestamptz, RIGHTARG = timestamptz)"
        )
    """After SET search_path = <owner's schema>, pg_catalog persisted, the runner's fire
    (its claims compare next_due_at <= now()) would use the owner's operator as the runner."""
    _run(runner_session, ALICE, "SET search_path = public, pg_catalog")
    runner_session.commit()
    runner_session.autocommit = True  # as the runner: a CALL that commits after each fire
    psycopg.RawCursor(runner_session).execute(
        query("fire_many"),
        ["t", [], [], False, 600000, 100, 50, "mark", *_session_settings(runner_session), None],
    )
    assert _who_ran(logdb) in ([], [ALICE])


# --------------------------------------------------------------------------- prepared statements


def test_a_run_cannot_replace_the_runners_prepared_statements(
    logdb: Database, runner_session: psycopg.Connection
) -> None:
    runner_session.autocommit = True
    assert runner_session.execute("SELECT %s::int + 1", [41], prepare=True).fetchone() == (42,)
    row = runner_session.execute(
        "SELECT name, parameter_types::text[] FROM pg_prepared_statements WHERE NOT from_sql"
    ).fetchone()
    assert row is not None
    name, types = row
    hijack = (
        f'DEALLOCATE "{name}"; PREPARE "{name}"({", ".join(types)}) AS'
        " SELECT public.log_who('prepared') + $1"
    )
    with contextlib.suppress(psycopg.Error):
        runner_session.execute("SELECT timers._exec_as(%s, %s)", [ALICE, hijack])
    runner_session.execute("SELECT %s::int + 1", [41], prepare=True)
    assert _who_ran(logdb) in ([], [ALICE])


def test_prepared_statements_do_not_outlive_the_run(runner_session: psycopg.Connection) -> None:
    assert _run(runner_session, ALICE, "DO $$ BEGIN EXECUTE 'PREPARE mine AS SELECT 1'; END $$")
    rows = runner_session.execute(
        "SELECT name FROM pg_prepared_statements WHERE from_sql"
    ).fetchall()
    runner_session.commit()
    assert rows == []


# --------------------------------------------------------------------------- temporary objects


def test_one_owners_temp_table_never_captures_another_owners_run(
    logdb: Database, runner_session: psycopg.Connection
) -> None:
    with connect(logdb, ALICE) as alice:
        alice.execute("CREATE TABLE public.accounts (x int)")
    with connect(logdb, BOB) as bob:
        bob.execute(
            "CREATE FUNCTION public.bob_trap() RETURNS trigger LANGUAGE plpgsql AS $$"
            " BEGIN INSERT INTO public.who_ran (note) VALUES ('temp trigger'); RETURN NEW; END $$"
        )
    """A TEMP table left by Bob's run would shadow Alice's public.accounts in her next run
    (the executors' search_path does not put pg_temp last) and its trigger would run as Alice."""
    _run(
        runner_session,
        BOB,
        "CREATE TEMP TABLE accounts (x int); GRANT ALL ON accounts TO PUBLIC;"
        " CREATE TRIGGER trap BEFORE INSERT ON accounts FOR EACH ROW"
        " EXECUTE FUNCTION public.bob_trap()",
    )
    _run(runner_session, ALICE, "INSERT INTO accounts VALUES (1)")
    assert _who_ran(logdb) == []
    with logdb.connect() as su:
        assert su.execute("SELECT count(*) FROM public.accounts").fetchone() == (1,)


def test_temp_tables_do_not_outlive_the_run(runner_session: psycopg.Connection) -> None:
    _run(runner_session, ALICE, "CREATE TEMP TABLE scratch (x int)")
    row = runner_session.execute(
        "SELECT count(*) FROM pg_class WHERE relnamespace = pg_my_temp_schema()"
    ).fetchone()
    runner_session.commit()
    assert row == (0,)


def test_session_advisory_locks_do_not_outlive_the_run(runner_session: psycopg.Connection) -> None:
    _run(runner_session, ALICE, "SELECT pg_advisory_lock(28776, 1)")
    row = runner_session.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
    ).fetchone()
    runner_session.commit()
    assert row == (0,)


# --------------------------------------------------------------------------- end to end


@pytest.fixture
def runner(logdb: Database, tmp_path: Path) -> Iterator[Runner]:
    r = Runner(logdb, tmp_path / "runner.log")
    yield r
    r.terminate()


def _call_run(db: Database, role: str, name: str, path: str | None = None) -> dict[str, Any] | None:
    with connect(db, role) as conn:
        if path:
            conn.execute(f"SET search_path = {path}")
        row = conn.execute("CALL timers.run(%s)", [name]).fetchone()
        return row[0] if row else None


def test_end_to_end_a_timer_cannot_make_a_superuser_timer(logdb: Database, runner: Runner) -> None:
    with connect(logdb, ALICE) as alice:
        save(
            alice,
            "t1",
            "SELECT timers._save('postgres', jsonb_build_object('name', 'evil',"
            " 'schedule', 'every 1s',"
            " 'sql', 'INSERT INTO public.who_ran (note) VALUES (''evil'')'))",
        )
    result = _call_run(logdb, ALICE, "t1")
    assert result and result["finished"]
    with logdb.connect() as su:
        owners: dict[str, str] = dict(
            su.execute("SELECT name, owner FROM timers.timers").fetchall()
        )
    if "evil" in owners:
        with contextlib.suppress(AssertionError):  # it may not run: checked below either way
            wait_until(lambda: _who_ran(logdb), timeout=5)
    assert set(owners.values()) <= {ALICE, BOB}
    assert _who_ran(logdb) in ([], [ALICE])


def test_end_to_end_a_cursor_with_hold_never_runs_as_the_runner(
    logdb: Database, runner: Runner
) -> None:
    """DECLARE ... WITH HOLD is refused at save; in dynamic SQL the save check cannot
    see it, and the run-time guard (timers._exec_as) stops it."""
    with connect(logdb, ALICE) as alice:
        save(
            alice,
            "t1",
            "DO $$ BEGIN EXECUTE"
            " 'DECLARE c CURSOR WITH HOLD FOR SELECT public.log_who(''hold'')'; END $$",
        )
    result = _call_run(logdb, ALICE, "t1")
    assert result and result["finished"]
    assert _who_ran(logdb) in ([], [ALICE])


def test_end_to_end_the_runner_never_uses_an_owners_operator(
    logdb: Database, runner: Runner
) -> None:
    with connect(logdb, ALICE) as alice:
        for op in ("<=", ">"):
            fn = "le" if op == "<=" else "gt"
            alice.execute(
                f"CREATE FUNCTION public.{fn}(timestamptz, timestamptz) RETURNS boolean"
                f" LANGUAGE plpgsql AS $$ BEGIN PERFORM public.log_who('{op}');"
                f" RETURN $1 OPERATOR(pg_catalog.{op}) $2; END $$"
            )
            alice.execute(
                f"CREATE OPERATOR public.{op} (FUNCTION = public.{fn},"
                " LEFTARG = timestamptz, RIGHTARG = timestamptz)"
            )
        save(alice, "t1", "SET search_path = public, pg_catalog")
    first = _call_run(logdb, ALICE, "t1")
    assert first and first["finished"]
    second = _call_run(logdb, ALICE, "t0")  # the runner claims it with queries.sql claim_request
    assert second and second["finished"]
    assert _who_ran(logdb) in ([], [ALICE])


def test_end_to_end_run_now_never_uses_an_operator_of_an_earlier_schema(
    logdb: Database, runner: Runner
) -> None:
    with logdb.connect() as su:
        su.execute(f"CREATE SCHEMA evil AUTHORIZATION {NOBODY}")
    with connect(logdb, NOBODY) as nobody:
        nobody.execute(
            "CREATE FUNCTION evil.mul(double precision, integer) RETURNS double precision"
            " LANGUAGE plpgsql AS $$ BEGIN INSERT INTO public.who_ran (note) VALUES ('evil *');"
            " RETURN $1 OPERATOR(pg_catalog.*) $2; END $$"
        )
        nobody.execute(
            "CREATE OPERATOR evil.* (FUNCTION = evil.mul,"
            " LEFTARG = double precision, RIGHTARG = integer)"
        )
        nobody.execute("GRANT USAGE ON SCHEMA evil TO PUBLIC")
    with connect(logdb, ALICE) as alice:
        save(alice, "slow", "SELECT pg_sleep(0.3)")
    result = _call_run(logdb, ALICE, "slow", path="evil, timers, public")
    assert result and result["finished"]
    assert _who_ran(logdb) == []


def test_end_to_end_a_timer_runs_as_its_owner(logdb: Database, runner: Runner) -> None:
    """The baseline of the cases above: a plain run logs its owner, nothing else."""
    with connect(logdb, ALICE) as alice:
        save(alice, "t1", "SELECT public.log_who('plain')")
    result = _call_run(logdb, ALICE, "t1")
    assert result and result["ok"], result
    assert _who_ran(logdb) == [ALICE]


def test_end_to_end_escapes_fail_the_run_and_change_nothing(
    logdb: Database, runner: Runner
) -> None:
    """Identity and transaction escapes hidden in DO blocks fail at run time, as the run's error."""
    escapes = {
        "e_role": "DO $$ BEGIN EXECUTE 'SET ROLE postgres'; END $$",
        "e_reset": "DO $$ BEGIN EXECUTE 'RESET ROLE'; END $$",
        "e_auth": "DO $$ BEGIN"
        " PERFORM set_config('session_authorization', 'postgres', false); END $$",
        "e_commit": "INSERT INTO public.who_ran (note) VALUES ('before');"
        " DO $$ BEGIN COMMIT; END $$",
        "e_db": "DO $$ BEGIN EXECUTE 'CREATE DATABASE pgt_sec_escape'; END $$",
    }
    with connect(logdb, ALICE) as alice:
        for name, sql in escapes.items():
            save(alice, name, sql)
    for name in escapes:
        result = _call_run(logdb, ALICE, name)
        assert result and result["finished"] and result["ok"] is False, (name, result)
        assert result["error"], name
    assert _who_ran(logdb) == []
    with logdb.connect() as su:
        assert (
            su.execute("SELECT 1 FROM pg_database WHERE datname = 'pgt_sec_escape'").fetchone()
            is None
        )
    with pytest.raises(errors.InsufficientPrivilege), connect(logdb, ALICE) as alice:
        save(alice, "e_plain", "SET ROLE postgres")

"""Autonomous timers: the SQL runs as the owner's own login, statement by statement, each
committing by itself (VACUUM, CREATE INDEX CONCURRENTLY, procedures that COMMIT), within
the timer's timeout; an owner the runner cannot log in as fails by name."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.rows import dict_row

from tests.conftest import Database, scalar
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

StartRunner = Callable[..., RunnerProcess]
PASSWORD = "autonomous-secret"

PURGE = """
CREATE PROCEDURE purge() LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
    LOOP
        DELETE FROM old_events
         WHERE id IN (SELECT id FROM old_events WHERE at < now() - interval '30 days' LIMIT 1000);
        GET DIAGNOSTICS n = ROW_COUNT;
        EXIT WHEN n = 0;
        INSERT INTO batches VALUES (txid_current(), n);
        COMMIT;
    END LOOP;
END $$"""


class Owner:
    """A login role that owns timers, with its password in the runner's password file."""

    def __init__(self, name: str, passfile: Path) -> None:
        self.name = name
        self.passfile = passfile

    @property
    def env(self) -> dict[str, str]:
        """The runner's environment: its password file holds the owner's password."""
        return {"PGPASSFILE": str(self.passfile)}


def make_owner(conn: psycopg.Connection, name: str, passfile: Path, login: bool = True) -> None:
    """Create role `name` (a timers admin), its password in `passfile` (mode 0600)."""
    ident = sql.Identifier(name)
    conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(ident))
    conn.execute(
        sql.SQL("CREATE ROLE {} {} PASSWORD {} IN ROLE pgtimers_admin").format(
            ident, sql.SQL("LOGIN" if login else "NOLOGIN"), sql.Literal(PASSWORD)
        )
    )
    conn.execute(sql.SQL("GRANT CREATE ON SCHEMA public TO {}").format(ident))
    with passfile.open("a") as f:
        f.write(f"*:*:*:{name}:{PASSWORD}\n")
    passfile.chmod(0o600)


def drop_owner(conn: psycopg.Connection, name: str) -> None:
    """Drop what role `name` owns, then the role."""
    ident = sql.Identifier(name)
    conn.execute(sql.SQL("DROP OWNED BY {}").format(ident))
    conn.execute(sql.SQL("DROP ROLE {}").format(ident))


@pytest.fixture
def owner(conn: psycopg.Connection, tmp_path: Path) -> Iterator[Owner]:
    """A login role that owns timers, reachable by password."""
    name = f"pgt_auto_{os.getpid()}"
    passfile = tmp_path / "pgpass"
    make_owner(conn, name, passfile)
    yield Owner(name, passfile)
    drop_owner(conn, name)


def save_autonomous(
    conn: psycopg.Connection, name: str, schedule: str, text: str, **opts: Any
) -> None:
    """timers.save with autonomous => true (and named options)."""
    names = "".join(f", {k} => %({k})s" for k in opts)
    conn.execute(
        f"SELECT timers.save(%(n)s, %(s)s, %(q)s, autonomous => true{names})",
        {"n": name, "s": schedule, "q": text, **opts},
    )


def runs(conn: psycopg.Connection, name: str) -> list[dict[str, Any]]:
    """The timer's timers.runs rows, oldest first."""
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(
            "SELECT kind, due_at, ok, error, rows, attempt FROM timers.runs"
            " WHERE timer = %s AND kind <> 'skipped' ORDER BY id",
            [name],
        ).fetchall()


def finished(conn: psycopg.Connection, name: str, count: int = 1) -> list[dict[str, Any]]:
    """Wait for `count` recorded runs of the timer (ok not NULL)."""
    recorded: list[dict[str, Any]] = wait_until(
        lambda: (r := [x for x in runs(conn, name) if x["ok"] is not None])[count - 1 :] and r,
        timeout=30,
        what=f"{count} recorded run(s) of {name}",
    )
    return recorded


def test_vacuum_an_index_built_concurrently_and_a_procedure_that_commits_run_as_the_owner(
    db: Database, conn: psycopg.Connection, owner: Owner, start_runner: StartRunner
) -> None:
    with db.connect(owner.name) as mine:
        mine.execute("CREATE TABLE sales (id bigserial PRIMARY KEY, shop int)")
        mine.execute("INSERT INTO sales (shop) SELECT g % 50 FROM generate_series(1, 5000) g")
        mine.execute("CREATE TABLE old_events (id bigserial PRIMARY KEY, at timestamptz)")
        mine.execute(
            "INSERT INTO old_events (at)"
            " SELECT now() - interval '1 year' FROM generate_series(1, 5500)"
        )
        mine.execute("CREATE TABLE batches (xid bigint, n bigint)")
        mine.execute("CREATE TABLE who (login text, role text, due text, attempt text)")
        mine.execute(PURGE)
        save_autonomous(
            mine,
            "maintain",
            "in 1s",
            "VACUUM ANALYZE sales; CALL purge();\n"
            "CREATE INDEX CONCURRENTLY sales_shop ON sales (shop);\n"
            "INSERT INTO who VALUES (session_user, current_user,"
            " current_setting('pgtimers.due_at'), current_setting('pgtimers.attempt'))",
        )
    start_runner(env=owner.env)
    [run] = finished(conn, "maintain")
    assert run["ok"], run["error"]
    assert run["rows"] == 1  # VACUUM, CALL and CREATE INDEX write no rows; the INSERT one
    assert scalar(
        conn, "SELECT last_vacuum IS NOT NULL FROM pg_stat_user_tables WHERE relname = 'sales'"
    )
    assert scalar(conn, "SELECT count(*) FROM old_events") == 0
    # one commit per batch of 1,000: six transactions
    assert scalar(conn, "SELECT count(DISTINCT xid) FROM batches") == 6
    assert scalar(conn, "SELECT indisvalid FROM pg_index WHERE indexrelid = 'sales_shop'::regclass")
    login, role, due, attempt = conn.execute("SELECT * FROM who").fetchone() or ()
    assert (login, role, attempt) == (owner.name, owner.name, "1")
    assert due == scalar(
        conn,
        "SELECT to_char(last_due_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
        " FROM timers.timers WHERE name = 'maintain'",
    )
    assert scalar(conn, "SELECT count(*) FROM timers.autonomous_runs") == 0


def test_the_timeout_stops_a_long_statement_and_its_session(
    db: Database, conn: psycopg.Connection, owner: Owner, start_runner: StartRunner
) -> None:
    with db.connect(owner.name) as mine:
        save_autonomous(mine, "sleepy", "in 1s", "SELECT pg_sleep(60)", timeout="2 seconds")
    start_runner(env=owner.env)
    started = time.monotonic()
    [run] = finished(conn, "sleepy")
    assert not run["ok"]
    assert run["error"].startswith("timed out"), run["error"]
    assert time.monotonic() - started < 20
    wait_until(
        lambda: (
            not scalar(
                conn,
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgtimers: sleepy'",
            )
        ),
        what="the owner's session to end",
    )


def test_an_owner_the_runner_cannot_log_in_as_fails_its_run_by_name(
    db: Database, conn: psycopg.Connection, tmp_path: Path, start_runner: StartRunner
) -> None:
    name = f"pgt_nologin_{os.getpid()}"
    make_owner(conn, name, tmp_path / "pgpass", login=False)
    try:
        with db.connect(name) as mine:
            save_autonomous(mine, "cannot", "in 1s", "VACUUM")
        start_runner(env={"PGPASSFILE": str(tmp_path / "pgpass")})
        [run] = finished(conn, "cannot")
        assert not run["ok"]
        assert f"cannot log in as the timer's owner '{name}'" in run["error"]
        assert "pgpass" in run["error"] and "--owner-dsn" in run["error"]
        trouble = scalar(conn, "SELECT last_error FROM timers.trouble WHERE name = 'cannot'")
        assert name in trouble
    finally:
        drop_owner(conn, name)


def test_run_now_and_retries_of_an_autonomous_timer(
    db: Database, conn: psycopg.Connection, owner: Owner, start_runner: StartRunner
) -> None:
    with db.connect(owner.name) as mine:
        mine.execute("CREATE TABLE t (x int)")
        save_autonomous(mine, "now", "daily 03:00", "INSERT INTO t VALUES (1), (2); VACUUM t")
        save_autonomous(
            mine, "flaky", "in 1s", "VACUUM no_such_table", retries=1, retry_delay="1 second"
        )
    start_runner(env=owner.env)
    with db.connect(owner.name) as mine:
        result = scalar(mine, "CALL timers.run('now')")
    assert result["ok"] and result["rows"] == 2, result
    [run] = runs(conn, "now")
    assert (run["kind"], run["ok"], run["rows"]) == ("run_now", True, 2)
    attempts = finished(conn, "flaky", 2)
    assert [(a["kind"], a["attempt"], a["ok"]) for a in attempts] == [
        ("scheduled", 1, False),
        ("retry", 2, False),
    ]
    assert 'relation "no_such_table" does not exist' in attempts[1]["error"]


def test_a_killed_runner_leaves_one_interrupted_run_and_no_second_start(
    db: Database, conn: psycopg.Connection, owner: Owner, start_runner: StartRunner
) -> None:
    with db.connect(owner.name) as mine:
        mine.execute("CREATE TABLE started (at timestamptz DEFAULT clock_timestamp())")
        save_autonomous(
            mine, "long", "in 1s", "INSERT INTO started DEFAULT VALUES; SELECT pg_sleep(60)"
        )
    first = start_runner(env=owner.env)
    wait_until(
        lambda: scalar(
            conn,
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgtimers: long'"
            " AND query LIKE '%pg_sleep%'",
        ),
        what="the run's sleep",
    )
    first.kill()
    start_runner(env=owner.env)
    [run] = finished(conn, "long")
    assert not run["ok"] and run["error"].startswith("interrupted:"), run
    time.sleep(2)  # a second start would show by now
    assert scalar(conn, "SELECT count(*) FROM started") == 1
    assert len(runs(conn, "long")) == 1
    assert scalar(conn, "SELECT count(*) FROM timers.autonomous_runs") == 0


def test_an_atomic_run_of_several_statements_counts_the_rows_of_all(
    db: Database, conn: psycopg.Connection, owner: Owner, start_runner: StartRunner
) -> None:
    with db.connect(owner.name) as mine:
        mine.execute("CREATE TABLE t (x int)")
        mine.execute(
            "SELECT timers.save('several', 'in 1s',"
            " 'INSERT INTO t VALUES (1), (2), (3); UPDATE t SET x = x + 1 WHERE x > 1; SELECT 1')"
        )
    start_runner()
    [run] = finished(conn, "several")
    assert run["ok"] and run["rows"] == 5, run


def test_a_procedure_that_commits_in_an_atomic_timer_names_autonomous(
    db: Database, conn: psycopg.Connection, owner: Owner, start_runner: StartRunner
) -> None:
    with db.connect(owner.name) as mine:
        mine.execute("CREATE TABLE old_events (id bigserial PRIMARY KEY, at timestamptz)")
        mine.execute("CREATE TABLE batches (xid bigint, n bigint)")
        mine.execute("INSERT INTO old_events (at) VALUES (now() - interval '1 year')")
        mine.execute(PURGE)
        mine.execute("SELECT timers.save('purge', 'in 1s', 'CALL purge()')")
    start_runner()
    [run] = finished(conn, "purge")
    assert not run["ok"]
    assert "invalid transaction termination" in run["error"]
    assert "autonomous => true" in run["error"]


def test_cancel_stops_an_autonomous_run_in_the_owners_session(
    db: Database, conn: psycopg.Connection, owner: Owner, start_runner: StartRunner
) -> None:
    with db.connect(owner.name) as mine:
        save_autonomous(mine, "cancel_me", "in 1s", "SELECT pg_sleep(60); VACUUM")
    start_runner(env=owner.env)
    sleeping = (
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE application_name = 'pgtimers: cancel_me' AND query LIKE '%pg_sleep%'"
    )
    wait_until(lambda: scalar(conn, sleeping), what="the run's sleep")
    assert scalar(conn, "SELECT running FROM timers.status WHERE name = 'cancel_me'")
    with db.connect(owner.name) as mine:
        # an autonomous run holds no row lock: it is running all the same
        with pytest.raises(psycopg.errors.LockNotAvailable, match="is running"):
            save_autonomous(mine, "cancel_me", "in 1s", "VACUUM")
        assert scalar(mine, "SELECT enabled FROM timers.enable('cancel_me', false)") is False
        assert scalar(conn, "SELECT action FROM timers.pending_changes") == "disable"
        answer = scalar(mine, "SELECT timers.cancel('cancel_me')")
    assert answer["running"] and answer["cancelled"], answer
    [run] = finished(conn, "cancel_me")
    assert not run["ok"] and run["error"].startswith("cancelled:"), run
    assert scalar(conn, "SELECT count(*) FROM timers.pending_changes") == 0
    state = conn.execute("SELECT enabled, running FROM timers.status WHERE name = 'cancel_me'")
    assert state.fetchone() == (False, False)


def test_an_autonomous_timer_cannot_be_backfilled(
    db: Database, conn: psycopg.Connection, owner: Owner
) -> None:
    with db.connect(owner.name) as mine:
        save_autonomous(mine, "nightly", "daily 03:00", "VACUUM")
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="is autonomous"):
            mine.execute(
                "SELECT timers.backfill('nightly',"
                " now() - interval '3 days', now() - interval '1 day')"
            )


def test_run_now_of_an_index_built_concurrently_does_not_wait_for_its_own_caller(
    db: Database, conn: psycopg.Connection, owner: Owner, start_runner: StartRunner
) -> None:
    """CREATE INDEX CONCURRENTLY waits for every older transaction: timers.run keeps none
    open while it waits for the answer."""
    with db.connect(owner.name) as mine:
        mine.execute("CREATE TABLE t (x int)")
        save_autonomous(mine, "index", "daily 03:00", "CREATE INDEX CONCURRENTLY t_x ON t (x)")
    start_runner(env=owner.env)
    with db.connect(owner.name) as mine:
        result = scalar(mine, "CALL timers.run('index')")
    assert result["finished"] and result["ok"], result
    assert result["took_ms"] < 10_000, result
    assert scalar(conn, "SELECT indisvalid FROM pg_index WHERE indexrelid = 't_x'::regclass")


def test_an_interrupted_attempt_is_retried_only_as_its_retries_allow(
    db: Database, conn: psycopg.Connection, owner: Owner, start_runner: StartRunner
) -> None:
    with db.connect(owner.name) as mine:
        mine.execute("CREATE TABLE started (attempt text)")
        save_autonomous(
            mine,
            "again",
            "in 1s",
            "INSERT INTO started VALUES (current_setting('pgtimers.attempt'));"
            " SELECT pg_sleep(CASE current_setting('pgtimers.attempt')"
            " WHEN '1' THEN 60 ELSE 0 END)",
            retries=1,
            retry_delay="1 second",
        )
    first = start_runner(env=owner.env)
    sleeping = (
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE application_name = 'pgtimers: again' AND query LIKE '%pg_sleep%'"
    )
    wait_until(lambda: scalar(conn, sleeping), what="the first attempt's sleep")
    first.kill()
    start_runner(env=owner.env)
    attempts = finished(conn, "again", 2)
    assert [(a["kind"], a["attempt"], a["ok"]) for a in attempts] == [
        ("scheduled", 1, False),
        ("retry", 2, True),
    ]
    assert attempts[0]["error"].startswith("interrupted:")
    time.sleep(2)  # a third start would show by now
    assert [r[0] for r in conn.execute("SELECT attempt FROM started ORDER BY 1")] == ["1", "2"]

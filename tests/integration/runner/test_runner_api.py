"""The runner API: the routines a runner calls are declared by the schema, a runner serves
only a database whose schema serves its API number, and refuses another one with one
line saying what to do while it serves the rest."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import errors, sql

from pgtimers.runner.api_version import RUNNER_API
from pgtimers.schema.install import install
from pgtimers.schema.paths import sql_dir
from tests import previous_release
from tests.conftest import Database, _Databases, scalar
from tests.integration.runner.conftest import LOG_SQL, LOG_TABLE, RunnerProcess, save, wait_until

RUNNER_SQL = Path(__file__).resolve().parents[3] / "pgtimers" / "runner"
Start = Callable[..., RunnerProcess]


@pytest.fixture
def other_db(_databases: _Databases) -> Iterator[Database]:
    """A second fresh database with pgtimers installed."""
    database = _databases.take()
    yield database
    _databases.give_back(database)


def _called() -> set[str]:
    """The schema routines the runner's named queries call (comments left out)."""
    names: set[str] = set()
    for path in RUNNER_SQL.glob("*.sql"):
        for line in path.read_text().splitlines():
            if not line.lstrip().startswith("--"):
                names |= set(re.findall(r"\btimers\.(\w+)\s*\(", line))
    return names


def test_every_routine_the_runner_calls_is_declared(conn: psycopg.Connection) -> None:
    declared = conn.execute(
        "SELECT routine, to_regprocedure(routine) IS NOT NULL FROM timers._runner_api_routines()"
        " WHERE api = %s",
        [RUNNER_API],
    ).fetchall()
    assert all(exists for _, exists in declared), [r for r, exists in declared if not exists]
    names = {re.sub(r"^timers\.(\w+)\(.*$", r"\1", r) for r, _ in declared}
    # timers._runner_api() is the check itself: the one routine that never changes
    assert _called() - names == {"_runner_api"}
    assert scalar(
        conn,
        "SELECT oldest <= %s AND %s <= newest FROM timers._runner_api()",
        [
            RUNNER_API,
            RUNNER_API,
        ],
    )


def test_an_upgrade_may_not_drop_a_routine_old_runners_call(conn: psycopg.Connection) -> None:
    """99_orphans.sql drops what the code no longer defines, but stops the install at a
    routine that runners of a served API call (here: every routine but one is redefined,
    as an install does, and that one is _runner_stop)."""
    orphans = (sql_dir() / "code" / "99_orphans.sql").read_text()
    with pytest.raises(errors.ObjectNotInPrerequisiteState) as raised, conn.transaction():
        conn.execute("""
            DO $$
            DECLARE r record;
            BEGIN
                FOR r IN SELECT p.oid::regprocedure AS f, p.prokind FROM pg_proc p
                          WHERE p.pronamespace = 'timers'::regnamespace
                            AND p.oid <> 'timers._runner_stop(text)'::regprocedure
                LOOP
                    EXECUTE format('ALTER %s %s SET pgtimers.touched = on',
                        CASE r.prokind WHEN 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END, r.f);
                END LOOP;
            END $$""")
        conn.execute(orphans)
    assert "timers._runner_stop(text)" in str(raised.value)
    assert "runners of API 1" in str(raised.value)
    assert scalar(conn, "SELECT to_regprocedure('timers._runner_stop(text)') IS NOT NULL")


def _declare(conn: psycopg.Connection, api: int) -> None:
    """The schema says it serves runner API `api` only."""
    conn.execute(
        sql.SQL(
            "CREATE OR REPLACE FUNCTION timers._runner_api(OUT oldest int, OUT newest int)"
            " LANGUAGE sql AS $$ SELECT {api}, {api} $$"
        ).format(api=sql.Literal(api))
    )


def _refused_while_serving_the_other(
    start_runner: Start, db: Database, other: Database, event: str, hint: str
) -> RunnerProcess:
    """A runner of both databases serves `db` (its timer fires) and refuses `other` (its
    timer does not) with one `event` line that holds `hint`."""
    for each in (db, other):
        with each.connect() as c:
            c.execute(LOG_TABLE)
            save(c, "tick", "every 1s", LOG_SQL)
    runner = start_runner("--dsn", other.dsn, wait=False)
    runner.wait_for("event=serving", timeout=30)
    runner.wait_for(f"event={event}", timeout=30)
    with db.connect() as c:
        wait_until(lambda: scalar(c, "SELECT count(*) FROM fired") >= 2, what="fires in db")
    with other.connect() as c:
        assert scalar(c, "SELECT count(*) FROM fired") == 0
        assert scalar(c, "SELECT count(*) FROM timers.runs") == 0
        assert scalar(c, "SELECT count(*) FROM timers.runners") == 0  # never registered
    lines = [line for line in runner.log().splitlines() if f"event={event}" in line]
    assert len(lines) == 1, runner.log()
    assert f"database={other.name}" in lines[0] and hint in lines[0], lines[0]
    assert f"runner_api={RUNNER_API}" in lines[0]
    return runner


@pytest.mark.parametrize("declares", ["nothing", "older"])
def test_a_runner_newer_than_the_schema_refuses_it_and_serves_the_others(
    start_runner: Start, db: Database, other_db: Database, declares: str
) -> None:
    with other_db.connect() as c:
        if declares == "nothing":  # a schema from before the runner API
            c.execute("DROP FUNCTION timers._runner_api()")
        else:
            _declare(c, RUNNER_API - 1)
    runner = _refused_while_serving_the_other(
        start_runner, db, other_db, "schema_outdated", "pgtimers install"
    )
    assert runner.stop() == 0


def test_a_runner_older_than_the_schema_refuses_it_and_serves_the_others(
    start_runner: Start, db: Database, other_db: Database
) -> None:
    with other_db.connect() as c:
        _declare(c, RUNNER_API + 1)
    runner = _refused_while_serving_the_other(
        start_runner, db, other_db, "runner_outdated", "upgrade the pgtimers package"
    )
    assert runner.stop() == 0


def test_a_schema_of_the_previous_release_is_refused_until_installed(
    start_runner: Start, db: Database, empty_db: Database, tmp_path: Path
) -> None:
    """The previous release's schema (from git) is refused with the install hint while
    the other database is served; `pgtimers install` then brings it into service (at
    the runner's next look, within 30 s)."""
    release = previous_release.checkout(previous_release.previous_release(), tmp_path / "old")
    previous_release.install(release, empty_db.dsn)
    runner = _refused_while_serving_the_other(
        start_runner, db, empty_db, "schema_outdated", "pgtimers install"
    )
    install(empty_db.dsn)
    with empty_db.connect() as c:
        wait_until(lambda: scalar(c, "SELECT count(*) FROM fired") >= 1, 45, "fires once installed")
    assert runner.log().count("event=serving") == 2
    assert runner.stop() == 0


def test_an_install_past_a_running_runner_is_refused_at_its_next_start(
    start_runner: Start, db: Database, other_db: Database
) -> None:
    """An install that raises the oldest runner API served past a running runner drops
    routines that runner calls (here the heartbeat's): its call fails, its control
    session starts again, and the start check refuses the database with the upgrade
    hint; the other database is served all along."""
    for each in (db, other_db):
        with each.connect() as c:
            c.execute(LOG_TABLE)
            save(c, "tick", "every 1s", LOG_SQL)
    runner = start_runner("--dsn", other_db.dsn, wait=False)
    wait_until(lambda: runner.log().count("event=serving") == 2, 30, "both served")
    with other_db.connect() as c:
        wait_until(lambda: scalar(c, "SELECT count(*) FROM fired") >= 1, what="fires in other")
        with c.transaction():
            _declare(c, RUNNER_API + 1)
            c.execute("DROP FUNCTION timers._runner_beat(text)")
    runner.wait_for("event=runner_outdated", timeout=30)
    with db.connect() as c:
        now = scalar(c, "SELECT count(*) FROM fired")
        wait_until(lambda: scalar(c, "SELECT count(*) FROM fired") >= now + 2, what="db served")
    lines = [line for line in runner.log().splitlines() if "event=runner_outdated" in line]
    assert len(lines) == 1 and f"database={other_db.name}" in lines[0], runner.log()
    assert "upgrade the pgtimers package" in lines[0]
    print(lines[0])
    assert runner.stop() == 0

"""Timers survive what PostgreSQL objects survive: a dump restored into another cluster
(where the roles have other oids), REASSIGN OWNED, a role rename, DROP OWNED.

A timer names its executor, and the executor's owner is the role it runs as, so
PostgreSQL's own handling of ownership is what a timer follows."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql as pgsql

from pgtimers.schema.install import upgrade
from tests.conftest import Database, Server
from tests.security.helpers import Runner, connect, fresh_role
from tests.support.embedded import embedded_server, postgres_bin


def _bin(name: str) -> str:
    return str(postgres_bin(name))


@pytest.fixture
def other_cluster() -> Iterator[Server]:
    """A second PostgreSQL cluster, made for this test and removed after it."""
    with embedded_server("pgtimers-restore-") as dsn:
        yield Server(dsn)


def _run(*args: str) -> str:
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_dump_restored_into_another_cluster_runs_its_timers(
    db: Database, other_cluster: Server, tmp_path: Path
) -> None:
    with fresh_role(db, "pgtimers_admin", prefix="pgt_restore") as owner:
        with db.connect() as su:
            su.execute(
                "CREATE TABLE public.who_ran (who name DEFAULT current_user, what text,"
                " work_mem text DEFAULT current_setting('work_mem'))"
            )
            su.execute("GRANT ALL ON public.who_ran TO PUBLIC")
            # a role setting of this database: runs take it, and only a restore with -C
            # (as docs/operations.md says) brings it along
            su.execute(
                pgsql.SQL("ALTER ROLE {} IN DATABASE {} SET work_mem = '6MB'").format(
                    pgsql.Identifier(owner), pgsql.Identifier(db.name)
                )
            )
        with connect(db, owner) as conn:
            conn.execute(
                "SELECT timers.save('nightly', 'daily 02:00',"
                " 'INSERT INTO public.who_ran (what) VALUES (''nightly'')')"
            )
            conn.execute(
                "SELECT timers.arm('job:task:report:1', '2030-01-01',"
                " 'INSERT INTO public.who_ran (what) VALUES (''keyed'')')"
            )
        # the other cluster: some roles first, so that the restored ones get other oids
        with other_cluster.admin() as su:
            for i in range(5):
                su.execute(pgsql.SQL("CREATE ROLE {}").format(pgsql.Identifier(f"pgt_pad_{i}")))
        globals_sql = _run(_bin("pg_dumpall"), "--globals-only", "-d", db.server.dsn)
        subprocess.run(
            [_bin("psql"), "-q", "-d", other_cluster.dsn],
            input=globals_sql,
            capture_output=True,
            text=True,
            check=False,
        )  # roles that exist already (postgres) only warn
        dump = tmp_path / "app.dump"
        _run(_bin("pg_dump"), "-Fc", "-f", str(dump), "-d", db.dsn)
        # the steps of docs/operations.md: pg_restore -C makes the database as it was
        _run(_bin("pg_restore"), "--exit-on-error", "-C", "-d", other_cluster.dsn, str(dump))
        target = Database(other_cluster, db.name)
        # the step docs/operations.md gives after a restore: nothing to change
        assert upgrade(target.dsn).summary().endswith("up to date, nothing changed")

        with db.connect() as a, target.connect() as b:
            oid = "SELECT oid FROM pg_roles WHERE rolname = %s"
            assert a.execute(oid, [owner]).fetchone() != b.execute(oid, [owner]).fetchone()
            assert b.execute(
                "SELECT created_by FROM timers.status WHERE name = 'nightly'"
            ).fetchone() == (owner,)
        runner = Runner(target, tmp_path / "runner.log")
        try:
            with target.connect(owner) as conn:
                row = conn.execute("CALL timers.run('nightly')").fetchone()
                assert row is not None and row[0]["ok"] is True, row
                conn.execute("SELECT timers.move('job:task:report:1', now())")

            def keyed_fired() -> bool:
                with target.connect() as su:
                    found = su.execute(
                        "SELECT ok FROM timers.keyed_timers WHERE status = 'fired'"
                    ).fetchone()
                    return bool(found and found[0])

            from tests.support.wait import wait_until

            assert wait_until(keyed_fired, timeout=15)
        finally:
            runner.terminate()
        with target.connect() as su:
            ran = su.execute(
                "SELECT who, what, work_mem FROM public.who_ran ORDER BY what"
            ).fetchall()
        assert ran == [(owner, "keyed", "6MB"), (owner, "nightly", "6MB")]
        with other_cluster.admin() as su:
            su.execute(pgsql.SQL("DROP DATABASE {} WITH (FORCE)").format(pgsql.Identifier(db.name)))


def _run_as_saved(database: Database, name: str) -> list[tuple[str, str]]:
    """Run timer name's saved SQL the way a run does (timers._exec_as, as the runner)."""
    with database.connect() as su, su.transaction():
        su.execute("SELECT set_config('pgtimers.timer', %s, true)", [name])
        with contextlib.suppress(psycopg.Error), su.transaction():
            su.execute(
                "SELECT timers._exec_as(owner, sql) FROM timers.timers WHERE name = %s", [name]
            )
    with database.connect() as su:
        return [(r[0], r[1]) for r in su.execute("SELECT who, what FROM public.who_ran")]


@pytest.fixture
def who_ran(db: Database) -> Database:
    with db.connect() as su:
        su.execute("CREATE TABLE public.who_ran (who name DEFAULT current_user, what text)")
        su.execute("GRANT ALL ON public.who_ran TO PUBLIC")
    return db


def test_a_renamed_role_keeps_its_timers_and_the_new_holder_of_the_name_never_runs_them(
    who_ran: Database,
) -> None:
    db = who_ran
    with fresh_role(db, "pgtimers_admin", prefix="pgt_ren") as first:
        with connect(db, first) as conn:
            conn.execute(
                "SELECT timers.save('t', 'daily 02:00', 'INSERT INTO public.who_ran (what)"
                " VALUES (''t'')')"
            )
        with db.server.admin() as su:
            su.execute(
                pgsql.SQL("ALTER ROLE {} RENAME TO {}").format(
                    pgsql.Identifier(first), pgsql.Identifier(first + "_x")
                )
            )
            su.execute(pgsql.SQL("CREATE ROLE {} IN ROLE pgtimers_admin").format(
                pgsql.Identifier(first)))  # fmt: skip
        try:
            assert _run_as_saved(db, "t") == [(first + "_x", "t")]
            with db.connect() as su:
                shown = su.execute("SELECT created_by FROM timers.status").fetchone()
            assert shown == (first + "_x",)
        finally:
            with db.server.admin() as su:
                su.execute(pgsql.SQL("DROP ROLE {}").format(pgsql.Identifier(first)))
                su.execute(
                    pgsql.SQL("ALTER ROLE {} RENAME TO {}").format(
                        pgsql.Identifier(first + "_x"), pgsql.Identifier(first)
                    )
                )


def test_drop_owned_leaves_the_timer_failing_by_name(who_ran: Database) -> None:
    db = who_ran
    with fresh_role(db, "pgtimers_admin", prefix="pgt_gone") as owner:
        with connect(db, owner) as conn:
            conn.execute(
                "SELECT timers.save('t', 'daily 02:00', 'INSERT INTO public.who_ran (what)"
                " VALUES (''t'')')"
            )
        with db.connect() as su:
            su.execute(pgsql.SQL("DROP OWNED BY {}").format(pgsql.Identifier(owner)))
            su.execute("SELECT set_config('pgtimers.timer', 't', false)")
            with pytest.raises(psycopg.errors.UndefinedObject, match=f'"{owner}" has no executor'):
                su.execute("SELECT timers._exec_as(owner, sql) FROM timers.timers")
        assert _run_as_saved(db, "t") == []

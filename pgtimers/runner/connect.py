"""asyncpg connections of the runner: from a libpq DSN (several hosts too), with the
run-session settings set after connecting (PgBouncer refuses them as startup parameters),
and a check that the server session is the connection's own (not transaction pooling)."""

from __future__ import annotations

import getpass
import json
import os
import secrets
from typing import Any

import asyncpg
from psycopg.conninfo import conninfo_to_dict

from pgtimers.queries import beside
from pgtimers.runner.session import QUICK, Session, keep_alive

query = beside(__file__, "connect.sql")

# The run-session settings (client connection checks, keepalives, the default time
# limit), set after connecting; the worker sets them again after a session reset.
RUN_SESSION_SETTINGS = query("run_session_settings")

_SSLMODES = {"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}
_SESSION_ATTRS = {"any", "read-write", "read-only", "primary", "standby", "prefer-standby"}


POOLED = (
    "the runner's connection goes through transaction or statement pooling (PgBouncer"
    " pool_mode = transaction or statement): its runs, LISTEN and session settings need a"
    " server session of their own; give the runner session pooling (pool_mode = session)"
    " or connect it directly to PostgreSQL"
)
# A pooled server session also shows through errors like these (seen through PgBouncer
# under load): a statement the client prepared is missing on the server session that got
# the next message, or a statement of that name there is another one.
_POOLED_SIGNS = (
    asyncpg.InvalidSQLStatementNameError,
    asyncpg.DuplicatePreparedStatementError,
    asyncpg.ProtocolViolationError,
    asyncpg.ProtocolError,
)
PROBE_ROUNDS = 3


class PoolingError(Exception):
    """The connection goes through transaction pooling: session state does not stay."""

    def __init__(self, message: str = POOLED) -> None:
        super().__init__(message)


def connect_kwargs(dsn: str) -> dict[str, Any]:
    """asyncpg.connect() keyword arguments for a libpq DSN (URI or key=value), with every
    host of a multi-host DSN (host=a,b port=5432,5433) and its target_session_attrs."""
    params = conninfo_to_dict(dsn)
    kwargs: dict[str, Any] = {}
    for libpq, ours in (("user", "user"), ("password", "password"), ("dbname", "database")):
        if params.get(libpq):
            kwargs[ours] = str(params[libpq])
    hosts = [h for h in str(params.get("host") or "").split(",") if h]
    ports = [int(p) for p in str(params.get("port") or "").split(",") if p]
    if len(hosts) > 1:
        kwargs["host"] = hosts
        kwargs["port"] = ports if len(ports) > 1 else (ports or [5432]) * len(hosts)
    else:
        if hosts:
            kwargs["host"] = hosts[0]
        if ports:
            kwargs["port"] = ports[0]
    if params.get("target_session_attrs") in _SESSION_ATTRS:
        kwargs["target_session_attrs"] = str(params["target_session_attrs"])
    if params.get("sslmode") in _SSLMODES:
        kwargs["ssl"] = str(params["sslmode"])
    if params.get("connect_timeout"):
        kwargs["timeout"] = float(str(params["connect_timeout"]))
    if params.get("passfile"):
        kwargs["passfile"] = str(params["passfile"])
    return kwargs


def database_name(dsn: str) -> str:
    """The database a DSN connects to, with libpq's defaults."""
    params = conninfo_to_dict(dsn)
    name = params.get("dbname") or os.environ.get("PGDATABASE")
    name = name or params.get("user") or os.environ.get("PGUSER") or getpass.getuser()
    return str(name)


async def connect(
    dsn: str,
    application_name: str = "pgtimers runner",
    label: str = "runner",
    database: str = "?",
) -> Session:
    """A connection with the run-session settings and jsonb as Python values, a deadline
    on its queries (session.py; QUICK unless its owner sets another) and TCP keepalives;
    `label` and `database` name it in log lines.

    Its statements are prepared once and kept (one round trip a fire): a timer's SQL
    cannot PREPARE or DEALLOCATE, and a run that did fails and drops what it prepared
    (timers._restore_session)."""
    kwargs = connect_kwargs(dsn)
    kwargs.setdefault("timeout", QUICK)
    conn: Session = await asyncpg.connect(
        server_settings={"application_name": application_name},
        connection_class=Session,
        **kwargs,
    )
    conn.label, conn.database = label, database
    keep_alive(conn)
    try:
        await conn.execute(RUN_SESSION_SETTINGS)
        await conn.set_type_codec(
            "jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog", format="text"
        )
    except _POOLED_SIGNS as exc:
        conn.terminate()
        raise PoolingError() from exc
    except BaseException:
        conn.terminate()
        raise
    return conn


async def check_own_session(conn: Session, dsn: str) -> None:
    """The connection has a server session of its own, not a pooled one; else PoolingError.

    The connection marks its server session (a setting only it knows). Through PgBouncer's
    transaction or statement pooling a client has a server session only while a
    transaction lasts: the next transaction may be served by another one (the mark or the
    backend changes, or a statement it prepared is gone), and another client may be given
    this one (it sees the mark or the backend). A direct connection and session pooling
    never show either. Asked PROBE_ROUNDS times, interleaved with a second connection."""
    mark = secrets.token_hex(16)
    probe: Session | None = None
    try:
        await conn.fetchval(query("mark_session"), mark)
        first = await conn.fetchrow(query("session_seen"))
        assert first is not None  # one row, always
        probe = await connect(dsn, "pgtimers runner probe", "probe", conn.database)
        for _ in range(PROBE_ROUNDS):
            seen = await probe.fetchrow(query("session_seen"))
            again = await conn.fetchrow(query("session_seen"))
            assert seen is not None and again is not None
            if seen[0] == mark or seen[1] == first[1] or tuple(again) != tuple(first):
                raise PoolingError()
    except _POOLED_SIGNS as exc:
        raise PoolingError() from exc
    finally:
        if probe is not None:
            await close(probe)
    if first[0] != mark:
        raise PoolingError()


async def close(conn: asyncpg.Connection) -> None:
    """Close a connection, cutting it off when the server does not answer within 5 s."""
    if conn.is_closed():
        return
    try:
        await conn.close(timeout=5)
    except Exception:
        conn.terminate()

"""asyncpg connections of the runner: from a libpq DSN (several hosts too), with the
run-session settings set after connecting, and a check that the session is its own."""

from __future__ import annotations

import json
from typing import Any

import asyncpg
from psycopg.conninfo import conninfo_to_dict

# A dead runner must let go of its row locks soon, even during a long statement: the
# server checks the client socket and TCP keepalives probe the peer. Set after
# connecting, not as startup parameters, which PgBouncer refuses.
RUN_SESSION_SETTINGS = (
    "SET client_connection_check_interval = '5s'; SET tcp_keepalives_idle = 30;"
    " SET tcp_keepalives_interval = 10; SET tcp_keepalives_count = 3;"
    " SET statement_timeout = '10min'"
)
# The time limit a fire runs under unless its timer has its own (timers._fire).
DEFAULT_TIMEOUT_MS = 600_000

_SSLMODES = {"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}
_SESSION_ATTRS = {"any", "read-write", "read-only", "primary", "standby", "prefer-standby"}


class PoolingError(Exception):
    """The connection goes through transaction pooling: session state does not stay."""


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


async def connect(dsn: str, application_name: str = "pgtimers runner") -> asyncpg.Connection:
    """A connection with the run-session settings and jsonb as Python values.

    Its statements are prepared once and kept (one round trip a fire): a timer's SQL
    cannot PREPARE or DEALLOCATE, and a run that did fails and drops what it prepared
    (timers._restore_session)."""
    kwargs = connect_kwargs(dsn)
    kwargs.setdefault("timeout", 10.0)
    conn: asyncpg.Connection = await asyncpg.connect(
        server_settings={"application_name": application_name}, **kwargs
    )
    try:
        await conn.execute(RUN_SESSION_SETTINGS)
        await conn.set_type_codec(
            "jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog", format="text"
        )
    except BaseException:
        conn.terminate()
        raise
    return conn


async def check_own_session(conn: asyncpg.Connection, dsn: str) -> None:
    """The connection is a session of its own, not a pooled one; else PoolingError.

    Through PgBouncer's transaction (or statement) pooling, two client connections one
    after the other get the same server backend, and one connection's backend changes
    between transactions; a direct connection or session pooling never does either."""
    first = await conn.fetchval("SELECT pg_backend_pid()")
    other = await connect(dsn, application_name="pgtimers runner probe")
    try:
        seen = await other.fetchval("SELECT pg_backend_pid()")
    finally:
        await close(other)
    again = await conn.fetchval("SELECT pg_backend_pid()")
    if seen == first or again != first:
        raise PoolingError(
            "the runner's connections go through transaction pooling (PgBouncer"
            " pool_mode = transaction): a run and its bookkeeping need a session of their own;"
            " give the runner session pooling (pool_mode = session) or a direct DSN"
        )


async def close(conn: asyncpg.Connection) -> None:
    """Close a connection, cutting it off when the server does not answer within 5 s."""
    if conn.is_closed():
        return
    try:
        await conn.close(timeout=5)
    except Exception:
        conn.terminate()

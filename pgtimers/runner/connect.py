"""asyncpg connections of the runner: from a libpq DSN, with the run-session settings."""

from __future__ import annotations

import json
from typing import Any

import asyncpg
from psycopg.conninfo import conninfo_to_dict

# A dead runner must let go of its row locks soon, even during a long statement:
# the server checks the client socket and TCP keepalives probe the peer.
RUN_SESSION_SETTINGS = {
    "application_name": "pgtimers runner",
    "client_connection_check_interval": "5s",
    "tcp_keepalives_idle": "30",
    "tcp_keepalives_interval": "10",
    "tcp_keepalives_count": "3",
}

_SSLMODES = {"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}


def connect_kwargs(dsn: str) -> dict[str, Any]:
    """asyncpg.connect() keyword arguments for a libpq DSN (URI or key=value)."""
    params = conninfo_to_dict(dsn)
    kwargs: dict[str, Any] = {}
    for libpq, ours in (
        ("host", "host"),
        ("user", "user"),
        ("password", "password"),
        ("dbname", "database"),
    ):
        if params.get(libpq):
            kwargs[ours] = str(params[libpq])
    if params.get("port"):
        kwargs["port"] = int(str(params["port"]).split(",")[0])
    if params.get("sslmode") in _SSLMODES:
        kwargs["ssl"] = str(params["sslmode"])
    if params.get("connect_timeout"):
        kwargs["timeout"] = float(str(params["connect_timeout"]))
    if params.get("passfile"):
        kwargs["passfile"] = str(params["passfile"])
    return kwargs


async def _init(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec(
        "jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog", format="text"
    )


async def connect(dsn: str, application_name: str = "pgtimers runner") -> asyncpg.Connection:
    """A connection with the run-session settings and jsonb as Python values."""
    settings = dict(RUN_SESSION_SETTINGS, application_name=application_name)
    kwargs = connect_kwargs(dsn)
    kwargs.setdefault("timeout", 10.0)
    # No named prepared statements: a timer's SQL shares this session and could
    # DEALLOCATE and re-PREPARE one of ours to run its own query as the runner.
    conn: asyncpg.Connection = await asyncpg.connect(
        server_settings=settings, statement_cache_size=0, **kwargs
    )
    await _init(conn)
    return conn


async def close(conn: asyncpg.Connection) -> None:
    """Close a connection, cutting it off when the server does not answer within 5 s."""
    if conn.is_closed():
        return
    try:
        await conn.close(timeout=5)
    except Exception:
        conn.terminate()

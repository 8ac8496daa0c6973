"""--all-databases: which databases of a server have the pgtimers schema."""

from __future__ import annotations

import asyncpg
from psycopg.conninfo import make_conninfo

from pgtimers.runner.connect import connect
from pgtimers.runner.queries import query


async def installed_databases(base_dsn: str) -> list[str]:
    """DSNs of the databases of base_dsn's server that have the pgtimers schema."""
    conn = await connect(base_dsn, application_name="pgtimers runner discovery")
    try:
        names = [r[0] for r in await conn.fetch(query("list_databases"))]
    finally:
        await conn.close()
    found = []
    for name in names:
        dsn = make_conninfo(base_dsn, dbname=name)
        if await _has_schema(dsn):
            found.append(dsn)
    return found


async def _has_schema(dsn: str) -> bool:
    try:
        db = await connect(dsn, application_name="pgtimers runner discovery")
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
        return False
    try:
        return bool(await db.fetchval(query("schema_installed")))
    finally:
        await db.close()

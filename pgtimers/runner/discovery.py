"""--all-databases: which databases of a server have the pgtimers schema."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection

import asyncpg
from psycopg.conninfo import make_conninfo

from pgtimers.runner.budget import ConnectionBudget
from pgtimers.runner.connect import connect
from pgtimers.runner.queries import query

DISCOVERY = "discovery"  # the budget's name for discovery's slot


async def installed_databases(
    base_dsn: str,
    budget: ConnectionBudget,
    served: Collection[str],
    stops: tuple[asyncio.Event, ...],
    alive: Callable[[], None],
) -> list[str]:
    """DSNs of the databases of base_dsn's server that have the pgtimers schema and are
    not in `served` (those look after themselves), one connection at a time within one
    slot of the budget. The first time, before the budget knows its size (nothing holds a
    slot yet), the list is read outside it and tells the budget the server's settings."""
    if budget.limit is None:
        return await _look(base_dsn, budget, served)
    async with budget.slot(DISCOVERY, stops, alive) as got:
        return await _look(base_dsn, budget, served) if got else []


async def _look(base_dsn: str, budget: ConnectionBudget, served: Collection[str]) -> list[str]:
    conn = await connect(base_dsn, application_name="pgtimers runner discovery")
    try:
        names = [r[0] for r in await conn.fetch(query("list_databases"))]
        await budget.learn(conn)
    finally:
        await conn.close()
    found = []
    for name in names:
        dsn = make_conninfo(base_dsn, dbname=name)
        if dsn not in served and await _has_schema(dsn):
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

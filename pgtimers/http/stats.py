"""Reading every served database at once, as the caller: GET /api/stats (the
Monitor's timers, trouble first) and the data behind GET /metrics."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import asyncpg
from aiohttp import web

from pgtimers.http.backend import Backend, Caller
from pgtimers.http.context import backend_and_caller
from pgtimers.http.errors import HttpError, from_postgres, json_response
from pgtimers.http.queries import query

T = TypeVar("T")


@dataclass
class DatabaseRead:
    """What one database gave the caller (or why it gave nothing)."""

    name: str
    value: Any = None
    runners: int | None = None
    error: HttpError | None = None

    @property
    def readable(self) -> bool:
        """Whether the database gave a value (no error)."""
        return self.error is None


async def read_all(
    request: web.Request, read: Callable[[asyncpg.Pool], Awaitable[T]]
) -> list[DatabaseRead]:
    """`read` on every served database as the request's caller, concurrently.

    A database the caller may not read is left out with its error; when the
    caller's credentials were refused by every database, that is the 401."""
    backend, caller = backend_and_caller(request)
    served = backend.databases()
    results = await asyncio.gather(
        *(_read_one(backend, caller, name, dsn, read) for name, dsn in served.items())
    )
    errors = [r.error for r in results if r.error is not None]
    if results and len(errors) == len(results) and all(e.status == 401 for e in errors):
        raise errors[0]
    return list(results)


async def _read_one(
    backend: Backend,
    caller: Caller,
    name: str,
    dsn: str,
    read: Callable[[asyncpg.Pool], Awaitable[T]],
) -> DatabaseRead:
    try:
        pool = await backend.pool(dsn, caller)
        value = await read(pool)
        try:
            runners = await pool.fetchval(query("live_runners"))
        except asyncpg.PostgresError:
            runners = None
        return DatabaseRead(name, value, runners)
    except HttpError as err:
        return DatabaseRead(name, error=err)
    except asyncpg.PostgresError as exc:
        return DatabaseRead(name, error=from_postgres(exc))
    except (OSError, asyncpg.InterfaceError, asyncio.TimeoutError) as exc:
        return DatabaseRead(name, error=HttpError(503, f"cannot reach the database: {exc}"))


def _trouble_first(timer: dict[str, Any]) -> tuple[Any, ...]:
    return (
        timer.get("trouble", "") == "",
        timer.get("last_ok") is not False,
        -int(timer.get("failures_24h") or 0),
        -int(timer.get("last_late_ms") or 0),
        str(timer.get("database", "")),
        str(timer.get("name", "")).lower(),
    )


async def stats(request: web.Request) -> web.Response:
    """{"now_ms", "timers": [status row + "trouble", ...], "undeliverable": [...],
    "databases": [...]}."""

    async def read(pool: asyncpg.Pool) -> list[dict[str, Any]]:
        await pool.execute(query("deadline_check"))
        rows: list[dict[str, Any]] = json.loads(await pool.fetchval(query("stats_timers")))
        return rows

    async def read_undeliverable(pool: asyncpg.Pool) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = json.loads(await pool.fetchval(query("undeliverable")))
        return rows

    reads = await read_all(request, read)
    given_up = await read_all(request, read_undeliverable)
    timers = [t for r in reads if r.readable for t in r.value]
    timers.sort(key=_trouble_first)
    body = {
        "now_ms": int(time.time() * 1000),
        "timers": timers,
        # webhook deliveries given up, of each database the caller may read
        "undeliverable": [
            {"database": r.name, **d} for r in given_up if r.readable for d in r.value
        ],
        "databases": [
            {
                "name": r.name,
                "readable": r.readable,
                "timers": len(r.value) if r.readable else 0,
                "runners": r.runners,
                "error": r.error.message if r.error else "",
            }
            for r in reads
        ],
    }
    return json_response(json.dumps(body))

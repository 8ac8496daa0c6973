"""The timer routes: GET/POST /api/timers, POST /api/timers/<name>/run|enable|delete,
and "Keep data for..." (GET /api/tables, POST /api/keep). Each runs one named
query of http.sql under the caller's role; PostgreSQL privileges decide."""

from __future__ import annotations

import json

import asyncpg
from aiohttp import web

from pgtimers.http_auth import authenticate, refuse_cross_site
from pgtimers.http_backend import Backend
from pgtimers.http_body import ENABLE_KEYS, KEEP_KEYS, SAVE_KEYS, parse_object
from pgtimers.http_errors import HttpError, json_response
from pgtimers.queries import query

RUN_FIELDS = ("name", "finished", "ok", "error", "took_ms", "rows")
BACKEND = web.AppKey("backend", Backend)
ANONYMOUS = web.AppKey("anonymous", bool)


def _sql(name: str) -> str:
    return query("http.sql", name)


async def caller_pool(request: web.Request) -> asyncpg.Pool:
    """The pool of `?db=` (or the default database) as the request's caller."""
    backend = request.app[BACKEND]
    caller = authenticate(request, backend.settings, request.app[ANONYMOUS])
    db = request.query.get("db")
    _, dsn = backend.resolve(db)
    return await backend.pool(dsn, caller)


async def _post_pool(request: web.Request) -> asyncpg.Pool:
    refuse_cross_site(request)
    return await caller_pool(request)


async def list_timers(request: web.Request) -> web.Response:
    pool = await caller_pool(request)
    return json_response(await pool.fetchval(_sql("list_timers")))


async def save_timer(request: web.Request) -> web.Response:
    pool = await _post_pool(request)
    body = parse_object(await request.read(), SAVE_KEYS, empty_ok=False)
    args = [body.get(key) for key in SAVE_KEYS]
    return json_response(await pool.fetchval(_sql("save_timer"), *args))


async def run_timer(request: web.Request) -> web.Response:
    pool = await _post_pool(request)
    row = await pool.fetchrow(_sql("run_timer"), request.match_info["name"])
    if row is None or row[0] is None:
        raise HttpError(500, "timers.run returned no result")
    # jsonb keeps its keys in its own order; the seed's order is this one
    result = json.loads(row[0])
    ordered = {key: result.pop(key) for key in RUN_FIELDS if key in result}
    return json_response(json.dumps({**ordered, **result}))


async def enable_timer(request: web.Request) -> web.Response:
    pool = await _post_pool(request)
    body = parse_object(await request.read(), ENABLE_KEYS, empty_ok=True)
    enabled = body.get("enabled")
    enabled = True if enabled is None else enabled
    return json_response(
        await pool.fetchval(_sql("enable_timer"), request.match_info["name"], enabled)
    )


async def delete_timer(request: web.Request) -> web.Response:
    pool = await _post_pool(request)
    return json_response(await pool.fetchval(_sql("delete_timer"), request.match_info["name"]))


async def list_tables(request: web.Request) -> web.Response:
    pool = await caller_pool(request)
    body = await pool.fetchval(_sql("partitioned_tables"))
    return json_response('{"tables": ' + body + "}")


async def keep_data_for(request: web.Request) -> web.Response:
    """One keep timer per table, all or none (one transaction)."""
    pool = await _post_pool(request)
    body = parse_object(await request.read(), KEEP_KEYS, empty_ok=False)
    schedule = body.get("schedule") or "monthly 1 02:00"
    saved: list[str] = []
    async with pool.acquire() as conn, conn.transaction():
        for table in body["tables"]:
            saved += [await conn.fetchval(_sql("keep_data_for"), table, body["keep"], schedule)]
    return json_response('{"timers": [' + ", ".join(saved) + "]}")


def add_routes(app: web.Application) -> None:
    app.router.add_get("/api/timers", list_timers)
    app.router.add_post("/api/timers", save_timer)
    app.router.add_post("/api/timers/{name}/run", run_timer)
    app.router.add_post("/api/timers/{name}/enable", enable_timer)
    app.router.add_post("/api/timers/{name}/delete", delete_timer)
    app.router.add_get("/api/tables", list_tables)
    app.router.add_post("/api/keep", keep_data_for)

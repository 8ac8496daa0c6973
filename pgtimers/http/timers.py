"""The timer routes: GET/POST /api/timers, POST /api/timers/<name>/run|enable|delete,
and "Keep data for..." (GET /api/tables, POST /api/keep). Each runs one named
query of queries.sql under the caller's role; PostgreSQL privileges decide."""

from __future__ import annotations

import json

from aiohttp import web

from pgtimers.http.body import ENABLE_KEYS, KEEP_KEYS, SAVE_KEYS, parse_object
from pgtimers.http.context import caller_pool, post_pool
from pgtimers.http.errors import HttpError, json_response
from pgtimers.http.queries import query as _sql

RUN_FIELDS = ("name", "finished", "ok", "error", "took_ms", "rows")


async def list_timers(request: web.Request) -> web.Response:
    """GET /api/timers: timers.status as the caller sees it."""
    pool = await caller_pool(request)
    return json_response(await pool.fetchval(_sql("list_timers")))


async def save_timer(request: web.Request) -> web.Response:
    """POST /api/timers: timers.save, as the caller."""
    pool = await post_pool(request)
    body = parse_object(await request.read(), SAVE_KEYS, empty_ok=False)
    args = [body.get(key) for key in SAVE_KEYS]
    return json_response(await pool.fetchval(_sql("save_timer"), *args))


async def run_timer(request: web.Request) -> web.Response:
    """POST /api/timers/<name>/run: CALL timers.run and its result."""
    pool = await post_pool(request)
    row = await pool.fetchrow(_sql("run_timer"), request.match_info["name"])
    if row is None or row[0] is None:
        raise HttpError(500, "timers.run returned no result")
    # jsonb keeps its keys in its own order; the seed's order is this one
    result = json.loads(row[0])
    ordered = {key: result.pop(key) for key in RUN_FIELDS if key in result}
    return json_response(json.dumps({**ordered, **result}))


async def enable_timer(request: web.Request) -> web.Response:
    """POST /api/timers/<name>/enable: turn a timer on (or off with enabled false)."""
    pool = await post_pool(request)
    body = parse_object(await request.read(), ENABLE_KEYS, empty_ok=True)
    enabled = body.get("enabled")
    enabled = True if enabled is None else enabled
    return json_response(
        await pool.fetchval(_sql("enable_timer"), request.match_info["name"], enabled)
    )


async def delete_timer(request: web.Request) -> web.Response:
    """POST /api/timers/<name>/delete: timers.delete."""
    pool = await post_pool(request)
    return json_response(await pool.fetchval(_sql("delete_timer"), request.match_info["name"]))


async def list_tables(request: web.Request) -> web.Response:
    """GET /api/tables: the range-partitioned tables the caller can see, for keep timers."""
    pool = await caller_pool(request)
    body = await pool.fetchval(_sql("partitioned_tables"))
    return json_response('{"tables": ' + body + "}")


async def keep_data_for(request: web.Request) -> web.Response:
    """One keep timer per table, all or none (one transaction)."""
    pool = await post_pool(request)
    body = parse_object(await request.read(), KEEP_KEYS, empty_ok=False)
    schedule = body.get("schedule") or "monthly 1 02:00"
    saved: list[str] = []
    async with pool.acquire() as conn, conn.transaction():
        for table in body["tables"]:
            saved += [await conn.fetchval(_sql("keep_data_for"), table, body["keep"], schedule)]
    return json_response('{"timers": [' + ", ".join(saved) + "]}")


def add_routes(app: web.Application) -> None:
    """Add the timer routes and the routes of "Keep data for..."."""
    app.router.add_get("/api/timers", list_timers)
    app.router.add_post("/api/timers", save_timer)
    app.router.add_post("/api/timers/{name}/run", run_timer)
    app.router.add_post("/api/timers/{name}/enable", enable_timer)
    app.router.add_post("/api/timers/{name}/delete", delete_timer)
    app.router.add_get("/api/tables", list_tables)
    app.router.add_post("/api/keep", keep_data_for)

"""The timer routes: GET/POST /api/timers, POST /api/timers/<name>/run|enable|delete,
GET /api/timers/<name>/history (a timer's page), and "Keep data for..." (GET
/api/tables, POST /api/keep). Each runs one named
query of queries.sql under the caller's role; PostgreSQL privileges decide."""

from __future__ import annotations

import json

from aiohttp import web

from pgtimers.http.body import ENABLE_KEYS, KEEP_KEYS, SAVE_KEYS, parse_object
from pgtimers.http.context import BACKEND, add_post, caller_pool, post_body, post_pool
from pgtimers.http.errors import HttpError, json_response
from pgtimers.http.queries import query as _sql
from pgtimers.options import timer_json

RUN_FIELDS = ("name", "finished", "ok", "error", "took_ms", "rows")
# ?window= of GET /api/timers/<name>/history: how far back its charts go
WINDOWS = {"24h": "24 hours", "7d": "7 days"}

# The OpenAPI pieces of GET /api/timers/<name>/history (openapi.py puts them in).
_INT = {"type": "integer", "format": "int64"}
_LIST = {"type": "array", "items": _INT}
WINDOW_PARAMETER = {
    "name": "window",
    "in": "query",
    "required": False,
    "description": "how far back the chart points and hours go",
    "schema": {"type": "string", "enum": list(WINDOWS), "default": "24h"},
}
HISTORY_RUN = {
    "type": "object",
    "required": [
        "kind",
        "due_ms",
        "started_ms",
        "took_ms",
        "late_ms",
        "ok",
        "rows",
        "error",
        "attempt",
        "messages",
    ],
    "properties": {
        "kind": {
            "type": "string",
            "description": "scheduled, catch_up, retry, backfill, run_now or skipped",
        },
        "due_ms": dict(_INT, nullable=True),
        "started_ms": _INT,
        "took_ms": _INT,
        "late_ms": _INT,
        "ok": {"type": "boolean", "nullable": True, "description": "null for a skip"},
        "rows": _INT,
        "error": {"type": "string"},
        "reason": {"type": "string", "description": "why the due time was skipped"},
        "attempt": dict(_INT, description="1 for a due time's first try, 2 for its first retry..."),
        "backfill": dict(_INT, nullable=True, description="the backfill it ran for"),
        "messages": {
            "type": "string",
            "description": "the NOTICE, INFO and WARNING messages the run raised, then its"
            " error's DETAIL and HINT, one a line: the first 8 KB, then a line that says how"
            " much was cut ('' when it said nothing)",
        },
    },
}
HISTORY_FIELDS = {
    "now_ms": _INT,
    "timer": {"$ref": "#/components/schemas/Timer"},
    "zone": {"type": "string", "description": "the zone its schedule is read in"},
    "next_ms": dict(_LIST, description="its next 10 due times, as scheduled"),
    "runs": {"type": "array", "items": HISTORY_RUN, "description": "the last 100, newest first"},
    "since_ms": _INT,
    "points": {
        "type": "array",
        "description": "every run and skip of the window, oldest first (the newest 5000): "
        "[started_ms, due_ms, late_ms, took_ms, ok|failed|skipped, kind]",
        "items": {"type": "array", "items": {}},
    },
    "points_cut": {"type": "boolean", "description": "the window had more than 5000"},
    "hours": {
        "type": "array",
        "description": "each hour of the window: [hour_ms, runs, failures, skips]",
        "items": _LIST,
    },
    "audit_readable": {"type": "boolean"},
    "follows": {
        "type": "array",
        "items": {"type": "object"},
        "description": "the timers it follows (relation follows) and those that follow it"
        " (followed_by), each with name, last_ok, last_due_ms, last_run_ms and last_error",
    },
    "window": {"type": "string", "enum": list(WINDOWS)},
    "audit": {
        "type": "array",
        "nullable": True,
        "items": {"type": "object"},
        "description": "its timers.audit rows, newest 50; null when the caller may not read them",
    },
}
HISTORY = {"type": "object", "required": list(HISTORY_FIELDS), "properties": HISTORY_FIELDS}


async def list_timers(request: web.Request) -> web.Response:
    """GET /api/timers: timers.status as the caller sees it."""
    pool = await caller_pool(request)
    await pool.execute(_sql("deadline_check"))
    return json_response(await pool.fetchval(_sql("list_timers")))


async def timer_history(request: web.Request) -> web.Response:
    """GET /api/timers/<name>/history[?window=24h|7d]: the timer, its next due times, its
    last runs and skips, the window's runs as chart points, and its audit rows when the
    caller may read timers.audit (else `"audit": null`)."""
    window = request.query.get("window", "24h")
    if window not in WINDOWS:
        raise HttpError(400, f"bad window {window!r}: use one of {', '.join(WINDOWS)}")
    pool = await caller_pool(request)
    name = request.match_info["name"]
    async with pool.acquire() as conn:
        body = await conn.fetchval(_sql("timer_history"), name, WINDOWS[window])
        if body is None:
            database, _ = request.app[BACKEND].resolve(request.query.get("db"))
            raise HttpError(404, f"there is no timer '{name}' in database {database}")
        readable = json.loads(body)["audit_readable"]
        audit = await conn.fetchval(_sql("timer_audit"), name) if readable else "null"
    return json_response(f'{body[:-1]}, "window": "{window}", "audit": {audit}}}')


async def save_timer(request: web.Request) -> web.Response:
    """POST /api/timers: timers.save_json(jsonb), as the caller."""
    pool, raw = await post_body(request)
    body = parse_object(raw, SAVE_KEYS, empty_ok=False)
    # one JSON object, its nulls left out (the defaults); timers.save names a bad value
    return json_response(await pool.fetchval(_sql("save_timer"), timer_json(body)))


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
    pool, raw = await post_body(request)
    body = parse_object(raw, ENABLE_KEYS, empty_ok=True)
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
    pool, raw = await post_body(request)
    body = parse_object(raw, KEEP_KEYS, empty_ok=False)
    schedule = body.get("schedule") or "monthly 1 02:00"
    saved: list[str] = []
    async with pool.acquire() as conn, conn.transaction():
        for table in body["tables"]:
            saved += [await conn.fetchval(_sql("keep_data_for"), table, body["keep"], schedule)]
    return json_response('{"timers": [' + ", ".join(saved) + "]}")


def add_routes(app: web.Application) -> None:
    """Add the timer routes and the routes of "Keep data for..."."""
    app.router.add_get("/api/timers", list_timers)
    add_post(app, "/api/timers", save_timer)
    app.router.add_get("/api/timers/{name}/history", timer_history)
    add_post(app, "/api/timers/{name}/run", run_timer)
    add_post(app, "/api/timers/{name}/enable", enable_timer)
    add_post(app, "/api/timers/{name}/delete", delete_timer)
    app.router.add_get("/api/tables", list_tables)
    add_post(app, "/api/keep", keep_data_for)

"""The backfill routes: POST /api/timers/{name}/backfill (timers.backfill), GET
/api/backfills[?timer=] (the view timers.backfills) and POST /api/backfills/{id}/cancel
(timers.cancel_backfill). Each runs named queries of queries.sql under the caller's role,
like the other routes: backfilling and cancelling need pgtimers_admin, reading
pgtimers_reader. A backfill is its timers.backfills row as row_to_json gives it."""

from __future__ import annotations

import re
from typing import Any

import asyncpg
from aiohttp import web

from pgtimers.http.body import BACKFILL_KEYS, BIGINT_MAX, parse_object
from pgtimers.http.context import add_post, caller_pool, post_body, post_pool
from pgtimers.http.errors import HttpError, json_response
from pgtimers.http.queries import query
from pgtimers.http.values import name_the_bad_value

STATES = ("running", "done", "cancelled")
_ID = re.compile(r"-?[0-9]{1,19}")

# OpenAPI (openapi.py): a timers.backfills row, the body of a backfill, the parameters.
_INT: dict[str, Any] = {"type": "integer", "format": "int64"}
_STR: dict[str, Any] = {"type": "string"}
_WHEN: dict[str, Any] = {"type": "string", "format": "date-time"}
_FIELDS: dict[str, dict[str, Any]] = {
    "id": _INT,
    "timer": _STR,
    "from_at": _WHEN,
    "to_at": _WHEN,
    "total": dict(_INT, description="its due times from_at <= d < to_at (at most 10000)"),
    "done": dict(_INT, description="how many of them have run"),
    "failed": dict(_INT, description="how many of those failed"),
    "state": {"type": "string", "enum": list(STATES)},
    "requested_by": _STR,
    "requested_at": _WHEN,
    "next_at": dict(_WHEN, nullable=True, description="the due time it runs next"),
    "ended_at": dict(_WHEN, nullable=True),
    "note": dict(_STR, description="why it ended early, as cancelled"),
}
BACKFILL: dict[str, Any] = {"type": "object", "required": list(_FIELDS), "properties": _FIELDS}
_TIME: dict[str, Any] = {
    "oneOf": [_STR, _INT],
    "description": "ISO 8601 text or Unix milliseconds",
}
BACKFILL_BODY: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["from_at", "to_at"],
    "properties": {
        "from_at": dict(_TIME, example="2027-01-04T00:00:00Z"),
        "to_at": dict(_TIME, example="2027-01-11T00:00:00Z"),
    },
}
ID_PARAMETER: dict[str, Any] = {
    "name": "id",
    "in": "path",
    "required": True,
    "description": "the id timers.backfill returned",
    "schema": _INT,
}
TIMER_FILTER: dict[str, Any] = {
    "name": "timer",
    "in": "query",
    "required": False,
    "description": "one timer's backfills; empty or absent: every timer's",
    "schema": _STR,
}


async def backfill_timer(request: web.Request) -> web.Response:
    """POST /api/timers/<name>/backfill: run the timer's due times from_at <= d < to_at;
    answers the new backfill's row."""
    pool, raw = await post_body(request)
    body = parse_object(raw, BACKFILL_KEYS, empty_ok=False)
    name = request.match_info["name"]
    async with pool.acquire() as conn:
        try:
            async with conn.transaction():
                ident = await conn.fetchval(query("backfill"), name, body["from_at"], body["to_at"])
                row = await conn.fetchval(query("backfill_row"), ident)
        except asyncpg.exceptions.DataError:
            await name_the_bad_value(conn, body, BACKFILL_KEYS)
            raise
    return json_response(row)


async def list_backfills(request: web.Request) -> web.Response:
    """GET /api/backfills[?timer=NAME]: timers.backfills, newest first."""
    pool = await caller_pool(request)
    timer = request.query.get("timer") or None
    return json_response(await pool.fetchval(query("list_backfills"), timer))


def backfill_id(text: str) -> int:
    """The {id} of a path, or a 400."""
    if not _ID.fullmatch(text) or abs(int(text)) > BIGINT_MAX:
        raise HttpError(
            400, f"bad backfill id '{text[:40]}': use the number timers.backfill returned"
        )
    return int(text)


async def cancel_backfill(request: web.Request) -> web.Response:
    """POST /api/backfills/<id>/cancel: no further due time of it runs; its row."""
    pool = await post_pool(request)
    ident = backfill_id(request.match_info["id"])
    return json_response(await pool.fetchval(query("cancel_backfill"), ident))


def add_backfill_routes(app: web.Application) -> None:
    """POST /api/timers/{name}/backfill, GET /api/backfills, POST /api/backfills/{id}/cancel."""
    add_post(app, "/api/timers/{name}/backfill", backfill_timer)
    app.router.add_get("/api/backfills", list_backfills)
    add_post(app, "/api/backfills/{id}/cancel", cancel_backfill)

"""The keyed timer routes, read-only: GET /api/keyed (timers.list_keyed, in tick order)
and GET /api/keyed/{key} (one timers.keyed row). Each runs a named query of queries.sql
under the caller's role, like the other routes; readers see `sql` only for their own."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from pgtimers.http.context import caller_pool
from pgtimers.http.errors import HttpError, json_response
from pgtimers.http.queries import query
from pgtimers.keyed import STATUSES

_STR: dict[str, Any] = {"type": "string"}
_INT: dict[str, Any] = {"type": "integer", "format": "int64"}
_WHEN: dict[str, Any] = {"type": "string", "format": "date-time"}
_SPAN: dict[str, Any] = {"type": "string", "description": "an interval, as PostgreSQL prints it"}


def _null(schema: dict[str, Any]) -> dict[str, Any]:
    return dict(schema, nullable=True)


# OpenAPI (openapi.py): a timers.keyed row. The seed's fields are required; the
# view's other columns follow them, and a column it gains is allowed (no additionalProperties).
_SEED_FIELDS: dict[str, dict[str, Any]] = {
    "key": _STR,
    "id": _INT,
    "on": _STR,
    "kind": _STR,
    "name": _STR,
    "occurrence": _STR,
    "n": _null(_INT),
    "place": _INT,
    "status": {"type": "string", "enum": list(STATUSES)},
    "version": _STR,
    "owed_at": _null(_WHEN),
    "armed_at": _WHEN,
    "fired_at": _null(_WHEN),
    "late_by": _null(_SPAN),
    "attempt": _INT,
    "wakes": _INT,
    "commit": _null(_STR),
    "superseded_by": _null(_STR),
    "by": _null(_STR),
    "held_since": _null(_WHEN),
    "held_by": _null(_STR),
    "remaining": _null(_SPAN),
}
KEYED_TIMER: dict[str, Any] = {
    "type": "object",
    "required": list(_SEED_FIELDS),
    "properties": {
        **_SEED_FIELDS,
        "resumed_at": _null(_WHEN),
        "late_at": _null(_WHEN),
        "test_clock": _null(_STR),
        "owner": _STR,
        "sql": _null(dict(_STR, description="null for a reader, unless the timer is its own")),
        "ok": _null({"type": "boolean"}),
        "error": _STR,
        "rows": _null(_INT),
        "took_ms": _null(_INT),
        "updated_at": _WHEN,
    },
}
KEY_PARAMETER: dict[str, Any] = {
    "name": "key",
    "in": "path",
    "required": True,
    "description": "the key, URL-encoded: clk_8Tx1%23US:rung:notice%2090d:2027@0",
    "schema": {"type": "string", "minLength": 1},
}
KEYED_FILTERS: list[dict[str, Any]] = [
    {"name": name, "in": "query", "required": False, "description": text, "schema": schema}
    for name, text, schema in (
        ("on", "one owner (the key's first part); empty or absent: all", _STR),
        (
            "status",
            "one state; empty or absent: all; any other value is a 400",
            {"type": "string", "enum": ["", *STATUSES]},
        ),
        ("test_clock", "the timers of one test clock", _STR),
    )
]


def _param(request: web.Request, name: str) -> str | None:
    """A query parameter; absent or empty is no filter."""
    value = request.query.get(name)
    return value or None


async def list_keyed(request: web.Request) -> web.Response:
    """The keyed timers of `on`, `status` and `test_clock` (each optional), in tick order."""
    pool = await caller_pool(request)
    status = _param(request, "status")
    if status is not None and status not in STATUSES:
        raise HttpError(400, f"bad status '{status}': use one of {', '.join(STATUSES)}")
    body = await pool.fetchval(
        query("list_keyed"),
        _param(request, "on"),
        status,
        _param(request, "test_clock"),
    )
    return json_response(body)


async def get_keyed(request: web.Request) -> web.Response:
    """One keyed timer by its key (URL-encoded in the path), or 404."""
    pool = await caller_pool(request)
    key = request.match_info["key"]
    row = await pool.fetchrow(query("keyed_timer"), key)
    if row is None or row[0] is None:
        database = row[1] if row is not None else "?"
        raise HttpError(404, f"there is no keyed timer '{key}' in database {database}")
    return json_response(row[0])


def add_keyed_routes(app: web.Application) -> None:
    """GET /api/keyed and GET /api/keyed/{key}; a key may hold '/': it is the rest of the path."""
    app.router.add_get("/api/keyed", list_keyed)
    app.router.add_get("/api/keyed/{key:.+}", get_keyed)

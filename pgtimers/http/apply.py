"""Timers as code over HTTP: POST /api/apply (timers.apply: a declared set of timers and
calendars becomes a plan, applied only with ?dry_run=false) and GET /api/export
(timers.export: the timers as such a set). Both run under the caller's role: applying and
exporting need pgtimers_admin, as in SQL. The body of an apply is checked for its shape and
types here, each error naming the timer or calendar; what a value means, the SQL says."""

from __future__ import annotations

import json
from typing import Any

import asyncpg
from aiohttp import web

from pgtimers.http.body import SAVE_KEYS, check_object, read_json
from pgtimers.http.context import add_post, caller_pool, post_body
from pgtimers.http.errors import HttpError, from_postgres, json_response
from pgtimers.http.queries import query

FLAGS = {"prune": False, "dry_run": True}
APPLY_PARAMETERS = ("db", *FLAGS)
SPEC_KEYS = ("timer", "calendar", "managed_by")
CALENDAR_KEYS: dict[str, tuple[str, bool]] = {
    "name": ("str", True),
    "week": ("str", False),
    "valid_from": ("str", False),
    "valid_until": ("str", False),
}
# a calendar's lists: each an array of objects with these keys
CALENDAR_LISTS: dict[str, dict[str, tuple[str, bool]]] = {
    "weeks": {"from_day": ("str", True), "week": ("str", True)},
    "holidays": {"day": ("str", True), "note": ("str", False)},
    "trading_days": {"day": ("str", True), "note": ("str", False)},
}


# OpenAPI (openapi.py): the query parameters of an apply, a declared set, and its plan.
_STR: dict[str, Any] = {"type": "string"}
_TEXT: dict[str, Any] = {"type": "string", "nullable": True}
FLAG_PARAMETERS: list[dict[str, Any]] = [
    {
        "name": name,
        "in": "query",
        "required": False,
        "description": text,
        "schema": {"type": "boolean", "default": FLAGS[name]},
    }
    for name, text in (
        ("prune", "true: delete the timers of this set (managed_by) that the spec no longer names"),
        ("dry_run", "false: make the plan; true (the default): only say what it would be"),
    )
]


def _entries(required: list[str], **properties: dict[str, Any]) -> dict[str, Any]:
    item = {
        "type": "object",
        "additionalProperties": False,
        "required": required,
        "properties": properties,
    }
    return {"type": "array", "items": item}


CALENDAR: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name"],
    "properties": {
        "name": _STR,
        "week": dict(_TEXT, description="its trading days of the week; null: mon-fri"),
        "valid_from": dict(_TEXT, description="a date: the first day it knows"),
        "valid_until": dict(_TEXT, description="a date: the last day it knows"),
        "weeks": _entries(["from_day", "week"], from_day=_STR, week=_STR),
        "holidays": _entries(["day"], day=_STR, note=_TEXT),
        "trading_days": _entries(["day"], day=_STR, note=_TEXT),
    },
}
SPEC: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "description": "a declared set: docs/timers-as-code.md",
    "properties": {
        "timer": {"type": "array", "items": {"$ref": "#/components/schemas/SaveTimer"}},
        "calendar": {"type": "array", "items": {"$ref": "#/components/schemas/Calendar"}},
        "managed_by": dict(
            _STR, description="the set's label (default 'apply'), which prune keeps to"
        ),
    },
}
PLAN: dict[str, Any] = {
    "type": "object",
    "required": ["dry_run", "plan", "changed"],
    "properties": {
        "dry_run": {"type": "boolean", "description": "true: nothing of the plan was made"},
        "plan": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["action", "name", "changes"],
                "properties": {
                    "action": {
                        "type": "string",
                        "enum": ["create", "update", "delete", "unchanged"],
                    },
                    "name": dict(_STR, description="a timer's name, or calendar:NAME"),
                    "changes": {
                        "type": "object",
                        "description": "create: its definition; update: {option: {from, to}};"
                        " delete and unchanged: {}",
                    },
                },
            },
        },
        "changed": {
            "type": "integer",
            "description": "the rows of the plan that are not unchanged (made, or that would be)",
        },
    },
}


def _flag(request: web.Request, name: str) -> bool:
    value = request.query.get(name)
    if value is None:
        return FLAGS[name]
    if value not in ("true", "false"):
        raise HttpError(400, f"bad {name} {value[:40]!r}: use true or false")
    return value == "true"


def _named(kind: str, item: Any, index: int) -> str:
    """How an error names a timer or calendar of the spec: by its name, else its place."""
    name = item.get("name") if isinstance(item, dict) else None
    return f'{kind} "{name}"' if isinstance(name, str) else f"{kind} #{index + 1} (no name)"


def _items(spec: dict[str, Any], key: str) -> list[Any]:
    items = spec.get(key, [])
    if not isinstance(items, list):
        raise HttpError(400, f"the spec's {key!r} must be an array of {key}s")
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise HttpError(400, f"{_named(key, item, index)}: must be a JSON object")
    return items


def _check_calendar(calendar: dict[str, Any]) -> dict[str, Any]:
    plain = {k: v for k, v in calendar.items() if k not in CALENDAR_LISTS}
    known = ", ".join([*CALENDAR_KEYS, *CALENDAR_LISTS])
    for key in plain:
        if key not in CALENDAR_KEYS:
            raise HttpError(400, f"unknown key {key!r} in a calendar; the keys are {known}")
    checked = check_object(plain, CALENDAR_KEYS, "a calendar")
    for key, keys in CALENDAR_LISTS.items():
        if key not in calendar:
            continue
        entries = calendar[key]
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise HttpError(400, f"key {key!r} must be an array of objects with {', '.join(keys)}")
        checked[key] = [check_object(entry, keys, f"an entry of {key}") for entry in entries]
    return checked


def _check_item(key: str, item: dict[str, Any], index: int) -> dict[str, Any]:
    try:
        if key == "calendar":
            return _check_calendar(item)
        return check_object(item, SAVE_KEYS, "a timer")
    except HttpError as err:
        raise HttpError(400, f"{_named(key, item, index)}: {err.message}") from None


def check_spec(spec: Any) -> dict[str, Any]:
    """A declared set checked for its shape and types, as timers.apply takes it (a time in
    Unix ms made ISO text, an interval in seconds made text), or a 400 naming what is wrong."""
    if not isinstance(spec, dict):
        raise HttpError(
            400, 'the body must be a spec: {"timer": [...], "calendar": [...], "managed_by": "..."}'
        )
    for key in spec:
        if key not in SPEC_KEYS:
            raise HttpError(400, f"unknown key {key!r} of a spec: use {', '.join(SPEC_KEYS)}")
    checked: dict[str, Any] = {}
    if "managed_by" in spec:
        if not isinstance(spec["managed_by"], str):
            raise HttpError(400, "the spec's 'managed_by' must be a string")
        checked["managed_by"] = spec["managed_by"]
    for key in ("calendar", "timer"):
        if key in spec:
            checked[key] = [_check_item(key, item, i) for i, item in enumerate(_items(spec, key))]
    return checked


async def apply_spec(request: web.Request) -> web.Response:
    """POST /api/apply[?prune=true][&dry_run=false]: the plan of timers.apply, made only
    with dry_run=false."""
    pool, raw = await post_body(request)
    for name in request.query:
        if name not in APPLY_PARAMETERS:
            raise HttpError(400, f"unknown parameter {name!r}: use {', '.join(APPLY_PARAMETERS)}")
    prune, dry_run = _flag(request, "prune"), _flag(request, "dry_run")
    spec = check_spec(read_json(raw) if raw.strip() else None)
    try:
        body = await pool.fetchval(query("apply"), json.dumps(spec), prune, dry_run)
    except asyncpg.exceptions.NoDataFoundError as exc:
        # P0002 (no such test clock...) names a bad value of the spec here, not a route's
        raise HttpError(400, from_postgres(exc).message) from None
    return json_response(body)


async def export_spec(request: web.Request) -> web.Response:
    """GET /api/export[?timers=PATTERN]: timers.export, the timers (and calendars) as a
    declared set that POST /api/apply takes back unchanged."""
    pool = await caller_pool(request)
    return json_response(await pool.fetchval(query("export"), request.query.get("timers") or None))


def add_apply_routes(app: web.Application) -> None:
    """POST /api/apply and GET /api/export."""
    add_post(app, "/api/apply", apply_spec)
    app.router.add_get("/api/export", export_spec)

"""The OpenAPI 3.0 document of the HTTP API, served at GET /api/openapi.json."""

from __future__ import annotations

import functools
from typing import Any

from pgtimers import __version__
from pgtimers.http.apply import CALENDAR, FLAG_PARAMETERS, PLAN, SPEC
from pgtimers.http.backfills import BACKFILL, BACKFILL_BODY, ID_PARAMETER, TIMER_FILTER
from pgtimers.http.keyed import KEY_PARAMETER, KEYED_FILTERS, KEYED_TIMER
from pgtimers.http.timer_schema import BOOL, INT, SAVE_BODY, STR, TIMER_FIELDS, nullable
from pgtimers.http.timers import HISTORY, WINDOW_PARAMETER


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*statuses: int) -> dict[str, Any]:
    words = {
        400: "bad input: the error names what is wrong",
        401: "no or bad credentials",
        403: "the caller's role may not do this, or a cross-site request",
        404: "no such timer or database",
        409: "the timer is running",
        413: "the body is too large",
        429: "too many failed HTTP Basic sign-ins for the role: try again after Retry-After",
        503: "no runner serves the database, or it cannot be reached",
    }
    # wherever credentials are checked, a role's password may be throttled
    throttled = (429,) if 401 in statuses else ()
    return {str(s): _json(_ref("Error"), words[s]) for s in (*statuses, *throttled)}


DB = {
    "name": "db",
    "in": "query",
    "required": False,
    "description": "a served database; the default database without it",
    "schema": {"type": "string"},
}
NAME = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}


def _post(
    summary: str, ok: dict[str, Any], body: dict[str, Any] | None, *statuses: int
) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": summary,
        "parameters": [DB],
        "responses": {"200": ok, **_errors(400, 401, 403, *statuses, 413, 503)},
    }
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    return op


@functools.cache
def document() -> dict[str, Any]:
    """The OpenAPI document."""
    timer_op = {"parameters": [DB, NAME]}
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "pgtimers HTTP API",
            "version": __version__,
            "description": "Timers of PostgreSQL databases, served by `pgtimers run --http`. "
            "Every route runs the timers.* SQL functions under the caller's database role.",
        },
        "security": [{"basic": []}, {"bearer": []}, {}],
        "paths": {
            "/api/timers": {
                "get": {
                    "summary": "The timers of one database",
                    "parameters": [DB],
                    "responses": {
                        "200": _json(_ref("TimerList"), "now_ms and every timer"),
                        **_errors(401, 403, 404, 503),
                    },
                },
                "post": _post(
                    "Create or replace a timer",
                    _json(_ref("Timer"), "the timer"),
                    _ref("SaveTimer"),
                    404,
                ),
            },
            "/api/timers/{name}/history": {
                "get": {
                    "summary": "A timer's page: next due times, runs and skips, chart points, "
                    "failures per hour, audit rows (timers.runs, timers.next_runs)",
                    "parameters": [DB, NAME, WINDOW_PARAMETER],
                    "responses": {
                        "200": _json(_ref("TimerHistory"), "the timer and what happened"),
                        **_errors(400, 401, 403, 404, 503),
                    },
                }
            },
            "/api/timers/{name}/run": {
                "post": {
                    **_post(
                        "Run a timer now (waits up to a minute)",
                        _json(_ref("RunResult"), "the run"),
                        None,
                        404,
                        409,
                    ),
                    **timer_op,
                }
            },
            "/api/timers/{name}/enable": {
                "post": {
                    **_post(
                        "Turn a timer on or off",
                        _json(_ref("Timer"), "the timer"),
                        {
                            "type": "object",
                            "additionalProperties": False,
                            "properties": {"enabled": {"type": "boolean", "default": True}},
                        },
                        404,
                        409,
                    ),
                    **timer_op,
                }
            },
            "/api/timers/{name}/delete": {
                "post": {
                    **_post("Delete a timer", _json(_ref("Deleted"), "deleted"), None, 404, 409),
                    **timer_op,
                }
            },
            "/api/timers/{name}/backfill": {
                "post": {
                    **_post(
                        "Backfill: run the timer's due times from_at <= d < to_at, oldest "
                        "first, each once (timers.backfill)",
                        _json(_ref("Backfill"), "the backfill, as timers.backfills shows it"),
                        _ref("BackfillRange"),
                        404,
                    ),
                    **timer_op,
                }
            },
            "/api/backfills": {
                "get": {
                    "summary": "Backfills, newest first (timers.backfills)",
                    "parameters": [DB, TIMER_FILTER],
                    "responses": {
                        "200": _json({"type": "array", "items": _ref("Backfill")}, "them"),
                        **_errors(400, 401, 403, 404, 503),
                    },
                }
            },
            "/api/backfills/{id}/cancel": {
                "post": {
                    **_post(
                        "Cancel a backfill: none of its due times runs after the one running "
                        "(timers.cancel_backfill)",
                        _json(_ref("Backfill"), "the backfill"),
                        None,
                        404,
                    ),
                    "parameters": [DB, ID_PARAMETER],
                }
            },
            "/api/keyed": {
                "get": {
                    "summary": "Keyed timers, in tick order (timers.list_keyed)",
                    "parameters": [DB, *KEYED_FILTERS],
                    "responses": {
                        "200": _json({"type": "array", "items": _ref("KeyedTimer")}, "the timers"),
                        **_errors(400, 401, 403, 404, 503),
                    },
                }
            },
            "/api/keyed/{key}": {
                "get": {
                    "summary": "One keyed timer (its timers.keyed row)",
                    "parameters": [DB, KEY_PARAMETER],
                    "responses": {
                        "200": _json(_ref("KeyedTimer"), "the timer"),
                        **_errors(400, 401, 403, 404, 503),
                    },
                }
            },
            "/api/stats": {
                "get": {
                    "summary": "Every served database's timers the caller may read, trouble first",
                    "responses": {"200": _json(_ref("Stats"), "the Monitor"), **_errors(401)},
                }
            },
            "/api/tables": {
                "get": {
                    "summary": "Range-partitioned tables, for Keep data for...",
                    "parameters": [DB],
                    "responses": {
                        "200": _json(_ref("Tables"), "the tables"),
                        **_errors(401, 403, 404, 503),
                    },
                }
            },
            "/api/keep": {
                "post": _post(
                    "Save the monthly timers that drop old partitions of tables",
                    _json(_ref("KeepResult"), "the timers saved"),
                    _ref("Keep"),
                    404,
                    409,
                )
            },
            "/api/apply": {
                "post": {
                    **_post(
                        "Make the timers what a declared set says (timers.apply): a plan of "
                        "create, update, delete and unchanged; only a dry run unless "
                        "dry_run=false",
                        _json(_ref("Plan"), "the plan, made or not (dry_run)"),
                        _ref("Spec"),
                        404,
                        409,
                    ),
                    "parameters": [DB, *FLAG_PARAMETERS],
                }
            },
            "/api/export": {
                "get": {
                    "summary": "The timers and calendars as a declared set (timers.export)",
                    "parameters": [
                        DB,
                        {
                            "name": "timers",
                            "in": "query",
                            "required": False,
                            "description": "a name pattern (* any characters, ? one); "
                            "empty or absent: every timer",
                            "schema": STR,
                        },
                    ],
                    "responses": {
                        "200": _json(_ref("Spec"), "the set"),
                        **_errors(401, 403, 404, 503),
                    },
                }
            },
            "/metrics": {
                "get": {
                    "summary": "Prometheus metrics",
                    "responses": {
                        "200": {
                            "description": "text exposition format",
                            "content": {"text/plain": {"schema": {"type": "string"}}},
                        },
                        **_errors(401),
                    },
                }
            },
        },
        "components": {
            "securitySchemes": {
                "basic": {"type": "http", "scheme": "basic", "description": "a database role"},
                "bearer": {"type": "http", "scheme": "bearer", "description": "the token"},
            },
            "schemas": {
                "Timer": {
                    "type": "object",
                    "required": list(TIMER_FIELDS),
                    "properties": TIMER_FIELDS,
                },
                "TimerList": {
                    "type": "object",
                    "required": ["now_ms", "timers"],
                    "properties": {
                        "now_ms": INT,
                        "timers": {"type": "array", "items": _ref("Timer")},
                        "may_export": dict(
                            BOOL, description="the caller may export (and apply) timers"
                        ),
                    },
                },
                "Spec": SPEC,
                "Calendar": CALENDAR,
                "Plan": PLAN,
                "Backfill": BACKFILL,
                "BackfillRange": BACKFILL_BODY,
                "KeyedTimer": KEYED_TIMER,
                "TimerHistory": HISTORY,
                "SaveTimer": SAVE_BODY,
                "RunResult": {
                    "type": "object",
                    "required": ["name", "finished", "ok", "error", "took_ms", "rows"],
                    "properties": {
                        "name": STR,
                        "finished": BOOL,
                        "ok": nullable(BOOL),
                        "error": STR,
                        "took_ms": INT,
                        "rows": INT,
                    },
                },
                "Deleted": {
                    "type": "object",
                    "required": ["deleted"],
                    "properties": {"deleted": BOOL},
                },
                "Error": {"type": "object", "required": ["error"], "properties": {"error": STR}},
                "Stats": {
                    "type": "object",
                    "required": ["now_ms", "timers", "databases"],
                    "properties": {
                        "now_ms": INT,
                        "timers": {
                            "type": "array",
                            "items": {
                                "allOf": [
                                    _ref("Timer"),
                                    {"type": "object", "properties": {"trouble": STR}},
                                ]
                            },
                        },
                        # webhook deliveries given up (view timers.deliveries)
                        "undeliverable": {"type": "array", "items": {"type": "object"}},
                        "databases": {"type": "array", "items": {"type": "object"}},
                    },
                },
                "Tables": {
                    "type": "object",
                    "required": ["tables"],
                    "properties": {"tables": {"type": "array", "items": {"type": "object"}}},
                },
                "Keep": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["tables", "keep"],
                    "properties": {
                        "tables": {
                            "type": "array",
                            "items": STR,
                            "minItems": 1,
                            "maxItems": 100,
                        },
                        "keep": {"type": "string", "example": "1 year"},
                        "schedule": {"type": "string", "default": "monthly 1 02:00"},
                    },
                },
                "KeepResult": {
                    "type": "object",
                    "required": ["timers"],
                    "properties": {"timers": {"type": "array", "items": _ref("Timer")}},
                },
            },
        },
    }

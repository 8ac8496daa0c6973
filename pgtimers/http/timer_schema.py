"""The OpenAPI schemas of a timer (openapi.py puts them in the document): its JSON, which
is its timers.status row in column order, and the body of POST /api/timers, whose keys
are name, schedule, sql and the options of pgtimers/options.py."""

from __future__ import annotations

from typing import Any

from pgtimers.options import OPTIONS, REQUIRED, Option

INT = {"type": "integer", "format": "int64"}
INT32 = {"type": "integer", "format": "int32"}
STR = {"type": "string"}
BOOL = {"type": "boolean"}


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema, with null allowed."""
    return dict(schema, nullable=True)


# An interval in a timer's JSON, as PostgreSQL prints it (timers.status, row_to_json).
SPAN = dict(STR, description="an interval, as PostgreSQL prints it: '00:00:30', '1 day'")

# timers.status, in column order: the body of one timer.
TIMER_FIELDS: dict[str, dict[str, Any]] = {
    "name": STR,
    "database": STR,
    "schedule": STR,
    "sql": STR,
    "enabled": BOOL,
    "created_ms": INT,
    "updated_ms": INT,
    "created_by": STR,
    "next_run_ms": dict(
        INT, description="its next run: the due time moved by its jitter, or a retry"
    ),
    "last_run_ms": INT,
    "last_due_ms": INT,
    "last_late_ms": INT,
    "max_late_ms": INT,
    "last_ok": nullable(BOOL),
    "last_error": STR,
    "last_took_ms": INT,
    "last_rows": INT,
    "runs": INT,
    "failures": INT,
    "failures_24h": INT,
    "skipped": INT,
    "last_skip_ms": INT,
    "last_skip_reason": STR,
    "caught_up": INT,
    "running": BOOL,
    "timezone": STR,
    "catch_up": {"type": "string", "enum": ["skip", "latest", "all"]},
    "start_at": nullable({"type": "string", "format": "date-time"}),
    "end_at": nullable({"type": "string", "format": "date-time"}),
    "max_runs": nullable(INT),
    "expired": BOOL,
    "locked": BOOL,
    "retries": dict(INT32, minimum=0, maximum=100),
    "retry_delay": SPAN,
    "pause_after": nullable(dict(INT32, minimum=1, maximum=10000)),
    "jitter": nullable(SPAN),
    "priority": dict(INT32, minimum=-100, maximum=100),
    "paused_ms": dict(INT, description="when pause_after turned it off; 0 when it is not paused"),
    "catch_up_window": nullable(SPAN),
    "autonomous": dict(
        BOOL,
        description="its SQL runs as its owner, statement by statement, outside one transaction",
    ),
    "deadline": nullable(SPAN),
    "deadline_missed_ms": dict(
        INT, description="when a due time last missed its deadline; 0: never"
    ),
    "deadline_missed": dict(INT, description="due times that missed their deadline"),
    "history": {"type": "string", "enum": ["all", "failures"]},
    "last_success_ms": dict(INT, description="when a run last committed successfully; 0: never"),
    "managed_by": nullable(
        dict(STR, description="the file set (timers.apply) that declares it; null: saved by hand")
    ),
    "run_group": nullable(dict(STR, description="its run group (timers.set_group); null: none")),
    "waiting_for_group": dict(
        BOOL,
        description="due, and its run group's max_running timers are running: it waits",
    ),
}

# a value of each kind of option in the body of POST /api/timers (body.py reads them)
_OPTION_KINDS: dict[str, dict[str, Any]] = {
    "bool": BOOL,
    "str": STR,
    "time": {
        "oneOf": [{"type": "string"}, INT],
        "description": "ISO 8601 text or Unix milliseconds",
    },
    "int": INT,
    "int32": INT32,
    "interval": {
        "oneOf": [{"type": "string"}, {"type": "number"}],
        "description": "an interval ('5 minutes') or seconds",
    },
    "names": {"type": "array", "items": {"type": "string"}, "description": "timer names"},
}


def option_schema(option: Option) -> dict[str, Any]:
    """The schema of one option in the body: its kind, range and default; null is the
    default too."""
    schema = dict(_OPTION_KINDS[option.kind], nullable=True)
    words = f"{option.help}; default {option.shown_default}"
    kind_words = schema.get("description")
    schema["description"] = f"{kind_words}: {words}" if kind_words else words
    if option.choices:
        schema["enum"] = list(option.choices)
    if option.minimum is not None:
        schema["minimum"] = option.minimum
    if option.maximum is not None:
        schema["maximum"] = option.maximum
    if option.default is not None:
        schema["default"] = option.default
    return schema


SAVE_BODY = {
    "type": "object",
    "additionalProperties": False,
    "required": list(REQUIRED),
    "properties": {
        "name": {
            "type": "string",
            "pattern": "^[A-Za-z0-9_-]{1,64}$",
            "description": "1 to 64 letters, digits, _ and -; unique, whatever the case",
        },
        "schedule": {"type": "string", "example": "every 5m"},
        "sql": {"type": "string", "example": "CALL refresh_shop_totals()"},
        **{option.name: option_schema(option) for option in OPTIONS},
    },
}

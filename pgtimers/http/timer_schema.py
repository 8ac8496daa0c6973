"""The OpenAPI schemas of a timer (openapi.py puts them in the document): its JSON, which
is its timers.status row in column order, and the body of POST /api/timers, whose keys
are those of body.SAVE_KEYS."""

from __future__ import annotations

from typing import Any

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
}

TIME = {"oneOf": [{"type": "string"}, INT], "nullable": True}


def _interval(description: str, **more: Any) -> dict[str, Any]:
    return {
        "oneOf": [{"type": "string"}, {"type": "number"}],
        "nullable": True,
        "description": f"an interval ('5 minutes') or seconds: {description}",
        **more,
    }


SAVE_BODY = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "schedule", "sql"],
    "properties": {
        "name": {
            "type": "string",
            "pattern": "^[A-Za-z0-9_-]{1,64}$",
            "description": "1 to 64 letters, digits, _ and -; unique, whatever the case",
        },
        "schedule": {"type": "string", "example": "every 5m"},
        "sql": {"type": "string", "example": "CALL refresh_shop_totals()"},
        "enabled": {"type": "boolean", "default": True},
        "timezone": nullable(STR),
        "catch_up": {"type": "string", "enum": ["skip", "latest", "all"], "nullable": True},
        "start_at": dict(TIME, description="ISO 8601 text or Unix milliseconds"),
        "end_at": dict(TIME, description="ISO 8601 text or Unix milliseconds"),
        "max_runs": nullable(dict(INT, minimum=1)),
        "timeout": _interval("1 second to 24 hours (default 10 minutes)"),
        "locked": {"type": "boolean", "default": False},
        "test_clock": nullable(STR),
        "retries": nullable(
            dict(
                INT32,
                minimum=0,
                maximum=100,
                default=0,
                description="attempts after a failed first one; null: 0",
            )
        ),
        "retry_delay": _interval(
            "before the first retry, 1 second to 1 hour; it doubles with each retry, "
            "to at most an hour; null: 30 seconds",
            default="30 seconds",
        ),
        "pause_after": nullable(
            dict(
                INT32,
                minimum=1,
                maximum=10000,
                description="failed due times in a row that turn it off; null: never",
            )
        ),
        "jitter": _interval(
            "0 to 1 hour, less than the time between its due times: each due time runs "
            "at a fixed offset in [0, jitter); null: none"
        ),
        "priority": nullable(
            dict(
                INT32,
                minimum=-100,
                maximum=100,
                default=0,
                description="higher starts first when workers are short; null: 0",
            )
        ),
        "catch_up_window": _interval(
            "more than 0, at most 1 year: a due time missed while no runner served runs "
            "late only if it is less than this old when a runner is back (with catch_up "
            "'skip', the latest such one runs); null: none, catch_up alone decides"
        ),
        "autonomous": {
            "type": "boolean",
            "default": False,
            "nullable": True,
            "description": "true: the SQL runs in a session of the owner's own login, statement "
            "by statement, outside any transaction block (VACUUM, CREATE INDEX CONCURRENTLY, "
            "procedures that COMMIT); null: false",
        },
        "deadline": _interval(
            "more than 0, at most 1 year: a due time with no successful commit this long "
            "after it was due raises one deadline_missed event; null: none"
        ),
        "history": {
            "type": "string",
            "enum": ["all", "failures"],
            "default": "all",
            "nullable": True,
            "description": "which runs keep a timers.runs row: all, or failures (failures, "
            "skips and retries only; the counters still count every run); null: all",
        },
    },
}

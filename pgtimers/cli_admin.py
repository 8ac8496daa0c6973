"""Admin subcommands of the CLI: list, show, save, enable, disable, delete, history, next."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import psycopg

from pgtimers.format import relative, result_word, table, timestamp
from pgtimers.queries import query

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def _q(name: str) -> str:
    return query("admin.sql", name)


def _one(conn: psycopg.Connection, name: str, params: dict[str, Any]) -> Any:
    row = conn.execute(_q(name), params).fetchone()
    return None if row is None else row[0]


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str))


def _no_such_timer(name: str, conn: psycopg.Connection) -> int:
    database = conn.info.dbname
    print(f"pgtimers: there is no timer '{name}' in database {database}", file=sys.stderr)
    return EXIT_BAD_INPUT


def cmd_list(conn: psycopg.Connection, args: argparse.Namespace) -> int:
    """The timers like the console's list: schedule, next and last run, result, last error."""
    row = conn.execute(_q("list_timers")).fetchone()
    assert row is not None
    now_ms, timers = row
    if args.json:
        _print_json({"now_ms": now_ms, "timers": timers})
        return EXIT_OK
    rows = [
        [
            t["name"],
            t["schedule"],
            "off" if not t["enabled"] else ("expired" if t["expired"] else "on"),
            relative(t["next_run_ms"], now_ms),
            relative(t["last_run_ms"], now_ms),
            "running" if t["running"] else result_word(t["last_ok"]),
            t["last_error"],
        ]
        for t in timers
    ]
    headers = ["name", "schedule", "state", "next run", "last run", "result", "last error"]
    print(table(headers, rows) if rows else "no timers yet: pgtimers save NAME SCHEDULE SQL")
    return EXIT_OK


def cmd_show(conn: psycopg.Connection, args: argparse.Namespace) -> int:
    """Everything about one timer, its last 10 runs and its next 5 due times."""
    status = _one(conn, "show_timer", {"name": args.name})
    if status is None:
        return _no_such_timer(args.name, conn)
    runs = [r[0] for r in conn.execute(_q("timer_history"), {"name": args.name, "limit": 10})]
    upcoming: list[str] = []
    if status["enabled"] and not status["expired"]:
        params = {"schedule": status["schedule"], "n": 5, "timezone": status["timezone"]}
        upcoming = [r[0].isoformat() for r in conn.execute(_q("timer_next"), params)]
    if args.json:
        _print_json({"timer": status, "runs": runs, "next": upcoming})
        return EXIT_OK
    for key, value in status.items():
        shown = (
            timestamp(value)
            if key.endswith("_ms") and "late" not in key and "took" not in key
            else value
        )
        print(f"{key:>17}: {shown}")
    print("\nnext due times:" if upcoming else "\nnext due times: none")
    for when in upcoming:
        print(f"  {when}")
    print()
    print(_runs_table(runs) if runs else "no runs yet")
    return EXIT_OK


def _runs_table(runs: list[dict[str, Any]]) -> str:
    rows = [
        [
            r["started_at"],
            r["kind"],
            r["due_at"],
            r["took_ms"],
            r["late_ms"],
            "-" if r["kind"] == "skipped" else result_word(r["ok"]),
            r["error"] or r["reason"],
        ]
        for r in runs
    ]
    return table(["started", "kind", "due", "took ms", "late ms", "result", "error / reason"], rows)


def cmd_history(conn: psycopg.Connection, args: argparse.Namespace) -> int:
    """The timer's runs and skipped due times, newest first."""
    if _one(conn, "show_timer", {"name": args.name}) is None:
        return _no_such_timer(args.name, conn)
    runs = [r[0] for r in conn.execute(_q("timer_history"), {"name": args.name, "limit": args.n})]
    if args.json:
        _print_json(runs)
    else:
        print(_runs_table(runs) if runs else "no runs yet")
    return EXIT_OK


def cmd_save(conn: psycopg.Connection, args: argparse.Namespace) -> int:
    """Create or replace a timer."""
    status = _one(
        conn,
        "save_timer",
        {
            "name": args.name,
            "schedule": args.schedule,
            "sql": args.sql,
            "enabled": not args.disabled,
            "timezone": args.timezone,
            "catch_up": args.catch_up,
            "start_at": args.start_at,
            "end_at": args.end_at,
            "max_runs": args.max_runs,
            "timeout": args.timeout,
            "locked": args.locked,
            "test_clock": args.test_clock,
        },
    )
    _print_json(status)
    return EXIT_OK


def cmd_enable(conn: psycopg.Connection, args: argparse.Namespace) -> int:
    """Turn a timer on or off."""
    _print_json(_one(conn, "enable_timer", {"name": args.name, "enabled": args.enabled}))
    return EXIT_OK


def cmd_delete(conn: psycopg.Connection, args: argparse.Namespace) -> int:
    """Delete a timer."""
    _print_json(_one(conn, "delete_timer", {"name": args.name}))
    return EXIT_OK


def cmd_next(conn: psycopg.Connection, args: argparse.Namespace) -> int:
    """Preview the next due times of a schedule, in its zone."""
    params = {"schedule": args.schedule, "n": args.n, "timezone": args.timezone}
    for _, local in conn.execute(_q("timer_next"), params):
        print(local)
    return EXIT_OK


def cmd_run_now(conn: psycopg.Connection, args: argparse.Namespace) -> int:
    """Run a timer now through the runner and print the result; exit 1 when it failed."""
    result = _one(conn, "run_timer", {"name": args.name})
    _print_json(result)
    if not result or not result.get("finished"):
        return EXIT_OK
    return EXIT_OK if result.get("ok") else EXIT_FAILED

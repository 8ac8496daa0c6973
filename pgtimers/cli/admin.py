"""Admin subcommands of the CLI: list, show, enable, disable, delete, history, next (and
save, from save.py)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import psycopg

from pgtimers.cli import save
from pgtimers.cli.commands import Subparsers, add_command, positive, with_conn
from pgtimers.cli.exit_codes import ExitCode
from pgtimers.cli.format import plain, relative, result_word, table, timestamp
from pgtimers.queries import beside

_q = beside(__file__, "admin.sql")


def _one(conn: psycopg.Connection, name: str, params: dict[str, Any]) -> Any:
    row = conn.execute(_q(name), params).fetchone()
    return None if row is None else row[0]


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str))


def _no_such_timer(name: str, conn: psycopg.Connection) -> int:
    database = conn.info.dbname
    print(f"pgtimers: there is no timer '{name}' in database {database}", file=sys.stderr)
    return ExitCode.BAD_INPUT


def cmd_list(conn: psycopg.Connection, args: argparse.Namespace) -> int:
    """The timers like the console's list: schedule, next and last run, result, last error."""
    row = conn.execute(_q("list_timers")).fetchone()
    assert row is not None
    now_ms, timers = row
    if args.json:
        _print_json({"now_ms": now_ms, "timers": timers})
        return ExitCode.OK
    rows = [
        [
            t["name"],
            t["schedule"],
            _state(t),
            relative(t["next_run_ms"], now_ms),
            relative(t["last_run_ms"], now_ms),
            "running" if t["running"] else result_word(t["last_ok"]),
            t["last_error"],
        ]
        for t in timers
    ]
    headers = ["name", "schedule", "state", "next run", "last run", "result", "last error"]
    print(table(headers, rows) if rows else "no timers yet: pgtimers save NAME SCHEDULE SQL")
    return ExitCode.OK


def _state(timer: dict[str, Any]) -> str:
    if not timer["enabled"]:
        return "paused" if timer.get("paused_ms") else "off"
    return "expired" if timer["expired"] else "on"


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
        return ExitCode.OK
    for key, value in status.items():
        shown = (
            timestamp(value)
            if key.endswith("_ms") and "late" not in key and "took" not in key
            else plain(value)
        )
        print(f"{key:>17}: {shown}")
    print("\nnext due times:" if upcoming else "\nnext due times: none")
    for when in upcoming:
        print(f"  {when}")
    print()
    print(_runs_table(runs) if runs else "no runs yet")
    return ExitCode.OK


def _runs_table(runs: list[dict[str, Any]]) -> str:
    rows = [
        [
            r["started_at"],
            r["kind"],
            r.get("attempt", 1),
            r["due_at"],
            r["took_ms"],
            r["late_ms"],
            "-" if r["kind"] == "skipped" else result_word(r["ok"]),
            r["error"] or r["reason"],
        ]
        for r in runs
    ]
    headers = ["started", "kind", "attempt", "due", "took ms", "late ms", "result"]
    return table([*headers, "error / reason"], rows)


def cmd_history(conn: psycopg.Connection, args: argparse.Namespace) -> int:
    """The timer's runs and skipped due times, newest first."""
    if _one(conn, "show_timer", {"name": args.name}) is None:
        return _no_such_timer(args.name, conn)
    runs = [r[0] for r in conn.execute(_q("timer_history"), {"name": args.name, "limit": args.n})]
    if args.json:
        _print_json(runs)
    else:
        print(_runs_table(runs) if runs else "no runs yet")
    return ExitCode.OK


def cmd_enable(conn: psycopg.Connection, args: argparse.Namespace) -> int:
    """Turn a timer on or off."""
    _print_json(_one(conn, "enable_timer", {"name": args.name, "enabled": args.enabled}))
    return ExitCode.OK


def cmd_delete(conn: psycopg.Connection, args: argparse.Namespace) -> int:
    """Delete a timer (--cascade: also out of what others follow)."""
    _print_json(_one(conn, "delete_timer", {"name": args.name, "cascade": args.cascade}))
    return ExitCode.OK


def cmd_next(conn: psycopg.Connection, args: argparse.Namespace) -> int:
    """Preview the next due times of a schedule, in its zone."""
    params = {"schedule": args.schedule, "n": args.n, "timezone": args.timezone}
    rows = conn.execute(_q("timer_next"), params).fetchall()
    if args.json:
        _print_json([{"at": at.isoformat(), "local": local} for at, local in rows])
        return ExitCode.OK
    for _, local in rows:
        print(local)
    return ExitCode.OK


def cmd_run_now(conn: psycopg.Connection, args: argparse.Namespace) -> int:
    """Run a timer now through the runner and print the result; exit 1 when it failed."""
    result = _one(conn, "run_timer", {"name": args.name})
    _print_json(result)
    if not result or not result.get("finished"):
        return ExitCode.OK
    return ExitCode.OK if result.get("ok") else ExitCode.FAILED


def add_parsers(sub: Subparsers) -> None:
    """Add list, show, save, enable, disable, delete, history and next."""
    p = add_command(
        sub,
        "list",
        "list the timers: schedule, next and last run, result, last error",
        "pgtimers list --json",
    )
    p.add_argument("--json", action="store_true", help="the GET /api/timers body")
    p.set_defaults(func=with_conn(cmd_list))

    p = add_command(
        sub,
        "show",
        "one timer in full, its last 10 runs and next 5 due times",
        "pgtimers show shop_totals",
    )
    p.add_argument("name")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=with_conn(cmd_show))

    save.add_parser(sub)

    for name, enabled in (("enable", True), ("disable", False)):
        p = add_command(
            sub, name, f"turn a timer {'on' if enabled else 'off'}", f"pgtimers {name} nightly"
        )
        p.add_argument("name")
        p.set_defaults(func=with_conn(cmd_enable), enabled=enabled)

    p = add_command(sub, "delete", "delete a timer", "pgtimers delete nightly")
    p.add_argument("name")
    p.add_argument(
        "--cascade",
        action="store_true",
        help="a timer others follow: take it out of their lists (and delete one that"
        " follows nothing else); without it, refused",
    )
    p.set_defaults(func=with_conn(cmd_delete))

    p = add_command(
        sub,
        "history",
        "a timer's runs and skipped due times, newest first",
        "pgtimers history shop_totals -n 50",
    )
    p.add_argument("name")
    p.add_argument("-n", type=positive, default=20, help="how many (default 20)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=with_conn(cmd_history))

    p = add_command(
        sub,
        "next",
        "preview the next due times of a schedule",
        "pgtimers next 'sun-thu 11:00' -n 5 --timezone Asia/Kathmandu",
    )
    p.add_argument("schedule")
    p.add_argument("-n", type=positive, default=5, help="how many (default 5)")
    p.add_argument("--timezone", help="zone of the wall times (default: the database's)")
    p.add_argument("--json", action="store_true", help="print JSON: [{at, local}, …]")
    p.set_defaults(func=with_conn(cmd_next))

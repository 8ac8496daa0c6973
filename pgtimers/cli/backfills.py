"""Backfills from the CLI: `pgtimers backfill NAME FROM TO [--wait]` (timers.backfill: the
timer's due times FROM <= d < TO, run oldest first by the runner, each once),
`pgtimers backfills [NAME]` (the view timers.backfills) and `pgtimers cancel-backfill ID`
(timers.cancel_backfill). Errors are the SQL functions' own messages, on stderr."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import psycopg
from psycopg.rows import dict_row

from pgtimers.cli.commands import Subparsers, add_command, positive, with_conn
from pgtimers.cli.exit_codes import ExitCode
from pgtimers.cli.format import table, utc_minute
from pgtimers.cli.values import bad_value, refuse
from pgtimers.queries import beside

_q = beside(__file__, "backfills.sql")
POLL_SECONDS = 0.5
EPILOG = f"""\
FROM and TO are times PostgreSQL reads (ISO 8601: 2027-01-04T00:00Z, or
'2027-01-04 00:00 Europe/Paris'); TO must not be after now on the timer's clock,
and the range may hold at most 10000 due times. A runner runs them, one at a time,
never beside the timer's other runs, with pgtimers.due_at = each due time; the
timer may be off or expired.

With --wait it follows the backfill to its end, printing how many have run.
exit codes: {ExitCode.OK.value} made (with --wait: ended with none failed),
{ExitCode.FAILED.value} with --wait: some due time failed, or it was cancelled,
{ExitCode.BAD_INPUT.value} bad input or a database error (the error on stderr)

examples:
  pgtimers backfill hourly_totals 2027-01-04T00:00Z 2027-01-11T00:00Z --wait
  pgtimers backfills hourly_totals
  pgtimers cancel-backfill 7
"""


def _row(conn: psycopg.Connection, ident: int) -> dict[str, Any]:
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(_q("backfill_row"), {"id": ident}).fetchone()
    assert row is not None
    return row


def _json(conn: psycopg.Connection, ident: int) -> Any:
    row = conn.execute(_q("backfill_json"), {"id": ident}).fetchone()
    return None if row is None else row[0]


def _runners(conn: psycopg.Connection) -> int:
    row = conn.execute(_q("live_runners")).fetchone()
    return int(row[0]) if row else 0


def progress(b: dict[str, Any]) -> str:
    """`24/168 done, 1 failed`."""
    return f"{b['done']}/{b['total']} done, {b['failed']} failed"


def ending(b: dict[str, Any]) -> str:
    """The line that says how a backfill ended."""
    if b["state"] == "done":
        return f"backfill {b['id']} done: {b['total']} ran, {b['failed']} failed"
    note = f" ({b['note']})" if b["note"] else ""
    return f"backfill {b['id']} cancelled after {progress(b)}{note}"


def outcome(b: dict[str, Any]) -> int:
    """The exit code of a backfill that has ended: 0 when every due time ran ok."""
    return ExitCode.OK if b["state"] == "done" and not b["failed"] else ExitCode.FAILED


def follow(conn: psycopg.Connection, ident: int, quiet: bool) -> dict[str, Any]:
    """Wait until the backfill has ended; unless quiet, print its progress as it moves."""
    warned = False
    shown: tuple[int, int] | None = None
    while True:
        b = _row(conn, ident)
        if not quiet and (b["done"], b["failed"]) != shown and b["done"]:
            shown = (b["done"], b["failed"])
            print(f"  {progress(b)}", flush=True)
        if b["state"] != "running":
            return b
        if not warned and not _runners(conn):
            print(
                "pgtimers: no runner serves this database now; the backfill runs once one does"
                " (pgtimers run)",
                file=sys.stderr,
            )
            warned = True
        time.sleep(POLL_SECONDS)


def cmd_backfill(conn: psycopg.Connection, args: argparse.Namespace) -> int:
    """Make a backfill and print its id and how many due times it runs (--wait: to its end)."""
    bad = bad_value(conn, [("FROM", args.from_at, "time"), ("TO", args.to_at, "time")])
    if bad:
        return refuse(bad)
    params = {"name": args.name, "from_at": args.from_at, "to_at": args.to_at}
    row = conn.execute(_q("backfill"), params).fetchone()
    assert row is not None
    ident = int(row[0])
    b = _row(conn, ident)
    if not args.json:
        print(
            f"backfill {ident}: {b['total']} due times of timer {b['timer']} from"
            f" {utc_minute(b['from_at'])} to {utc_minute(b['to_at'])}, oldest first",
            flush=True,
        )
    if args.wait:
        b = follow(conn, ident, quiet=args.json)
    if args.json:
        print(json.dumps(_json(conn, ident), indent=2))
    elif args.wait:
        print(ending(b))
    return outcome(b) if args.wait else ExitCode.OK


def cmd_backfills(conn: psycopg.Connection, args: argparse.Namespace) -> int:
    """The backfills of one timer (or of all), newest first."""
    params = {"timer": args.name}
    if args.json:
        row = conn.execute(_q("backfills_json"), params).fetchone()
        print(json.dumps(None if row is None else row[0], indent=2))
        return ExitCode.OK
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(_q("backfill_rows"), params).fetchall()
    if not rows:
        print("no backfills yet: pgtimers backfill NAME FROM TO")
        return ExitCode.OK
    headers = ["id", "timer", "from", "to", "done", "failed", "state", "by", "asked", "note"]
    cells = [
        [
            b["id"],
            b["timer"],
            utc_minute(b["from_at"]),
            utc_minute(b["to_at"]),
            f"{b['done']}/{b['total']}",
            b["failed"],
            b["state"],
            b["requested_by"],
            utc_minute(b["requested_at"]),
            b["note"],
        ]
        for b in rows
    ]
    print(table(headers, cells))
    return ExitCode.OK


def cmd_cancel(conn: psycopg.Connection, args: argparse.Namespace) -> int:
    """Cancel a backfill: none of its due times runs after the one running now."""
    conn.execute(_q("cancel"), {"id": args.id})
    if args.json:
        print(json.dumps(_json(conn, args.id), indent=2))
        return ExitCode.OK
    b = _row(conn, args.id)
    print(ending(b) if b["state"] != "running" else f"backfill {args.id}: {progress(b)}")
    return ExitCode.OK


def add_parsers(sub: Subparsers) -> None:
    """Add backfill, backfills and cancel-backfill."""
    p = add_command(
        sub,
        "backfill",
        "run a timer's past due times FROM <= d < TO, oldest first, each once",
        "pgtimers backfill hourly_totals 2027-01-04T00:00Z 2027-01-11T00:00Z --wait",
    )
    p.epilog = EPILOG
    p.add_argument("name")
    p.add_argument("from_at", metavar="FROM", help="the first due time it may run (included)")
    p.add_argument("to_at", metavar="TO", help="the end of the range (not included)")
    p.add_argument("--wait", action="store_true", help="follow it to its end")
    p.add_argument("--json", action="store_true", help="print its timers.backfills row")
    p.set_defaults(func=with_conn(cmd_backfill))

    p = add_command(
        sub,
        "backfills",
        "the backfills of a timer (or of all), newest first",
        "pgtimers backfills hourly_totals",
    )
    p.add_argument("name", nargs="?", help="one timer's (default: every timer's)")
    p.add_argument("--json", action="store_true", help="the rows (GET /api/backfills)")
    p.set_defaults(func=with_conn(cmd_backfills))

    p = add_command(
        sub,
        "cancel-backfill",
        "cancel a backfill: none of its due times runs after the one running now",
        "pgtimers cancel-backfill 7",
    )
    p.add_argument("id", type=positive, help="the id pgtimers backfill printed")
    p.add_argument("--json", action="store_true", help="print its timers.backfills row")
    p.set_defaults(func=with_conn(cmd_cancel))

"""`pgtimers keyed`: the keyed timers of one owner (or of all), read from timers.list_keyed.

The text output follows seed 000 ("Timers and replay"): a header line per owner
(its counts and next timer, from timers.keyed_owners), then its timers in tick
order. `--json` prints the rows as row_to_json of timers.keyed gives them, so a
column the view gains shows by itself. Nothing here changes a timer.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import psycopg
from psycopg.rows import dict_row

from pgtimers.cli.commands import Subparsers, add_command, with_conn
from pgtimers.cli.exit_codes import ExitCode
from pgtimers.cli.format import span, table, utc_minute
from pgtimers.keyed import STATUSES
from pgtimers.queries import beside

query = beside(__file__, "keyed.sql")
_OK, _BAD = ExitCode.OK.value, ExitCode.BAD_INPUT.value
HELP = "keyed timers: each owner's counts and next timer, then its timers in tick order"
EPILOG = f"""\
The header of each owner counts all of its timers (timers.keyed_owners); the
table lists those that match --status and --test-clock, in tick order (owed_at,
place, the key's bytes). Held timers show how long they wait and on what;
superseded ones, their successor and its cause.

No matching timer: `no keyed timers on OWNER` on stderr (`[]` with --json), exit {_OK}.
exit codes: {_OK} ok, {_BAD} bad input or a database error (the error on stderr)

examples:
  pgtimers keyed --on job_4Tx9 --test-clock tc_7Hq4
  pgtimers keyed --status held
  pgtimers keyed --on 'clk_8Tx1#US' --json
"""


def add_parser(sub: Subparsers) -> None:
    """Add the `keyed` subcommand."""
    p = add_command(sub, "keyed", HELP, "pgtimers keyed --on job_4Tx9 --test-clock tc_7Hq4")
    p.epilog = EPILOG
    p.add_argument("--on", metavar="OWNER", help="one owner, the key's first part (default: all)")
    p.add_argument(
        "--status",
        choices=STATUSES,
        metavar="STATUS",
        help="only timers in this state: " + ", ".join(STATUSES),
    )
    p.add_argument("--test-clock", metavar="NAME", help="only timers on this test clock")
    p.add_argument(
        "--json", action="store_true", help="the rows of timers.keyed as JSON (GET /api/keyed)"
    )
    p.set_defaults(func=with_conn(cmd_keyed))


def _params(args: argparse.Namespace) -> dict[str, Any]:
    return {"on": args.on, "status": args.status, "test_clock": args.test_clock}


def cmd_keyed(conn: psycopg.Connection, args: argparse.Namespace) -> int:
    """Print the keyed timers of `--on` (or of every owner) as text, or as JSON with --json."""
    params = _params(args)
    if args.json:
        rows = [r[0] for r in conn.execute(query("keyed_json"), params)]
        print(json.dumps(rows, indent=2))
        return ExitCode.OK
    with conn.cursor(row_factory=dict_row) as cur:
        timers = cur.execute(query("keyed_rows"), params).fetchall()
        owners = cur.execute(query("keyed_owners"), params).fetchall()
    if not timers:
        print(nothing_found(args), file=sys.stderr)
        return ExitCode.OK
    print(render(owners, timers))
    return ExitCode.OK


def nothing_found(args: argparse.Namespace) -> str:
    """`no keyed timers on OWNER`, with the filters that were given."""
    text = "no keyed timers" + (f" on {args.on}" if args.on else "")
    if args.status:
        text += f" with status {args.status}"
    if args.test_clock:
        text += f" on test clock {args.test_clock}"
    return text


def render(owners: list[dict[str, Any]], timers: list[dict[str, Any]]) -> str:
    """Each owner's header line and table of timers, owners in the keys' byte order."""
    by_owner: dict[str, list[dict[str, Any]]] = {}
    for timer in timers:
        by_owner.setdefault(timer["on"], []).append(timer)
    counts = {o["on"]: o for o in owners}
    blocks = [
        header(name, counts.get(name)) + "\n" + timer_table(rows)
        for name, rows in sorted(by_owner.items(), key=lambda item: item[0].encode("utf-8"))
    ]
    return "\n\n".join(blocks)


def header(name: str, owner: dict[str, Any] | None) -> str:
    """`OWNER · N fired · N held · N armed · next KEY at TIME` (superseded when there are some)."""
    if owner is None:
        return name
    parts = [name, f"{owner['fired']} fired", f"{owner['held']} held", f"{owner['armed']} armed"]
    if owner["superseded"]:
        parts.append(f"{owner['superseded']} superseded")
    if owner["next_timer"] is None:
        parts.append("nothing armed")
    else:
        parts.append(f"next {owner['next_timer']} at {utc_minute(owner['next_owed_at'])}")
    return " · ".join(parts)


def note(timer: dict[str, Any]) -> str:
    """What a row adds after its key: why it waits, what replaced it, how it failed."""
    status = timer["status"]
    if status == "held":
        return (
            f"held since {utc_minute(timer['held_since'])} by {timer['held_by']}"
            f" · remaining {span(timer['remaining'])}"
        )
    if status == "superseded":
        return f"superseded by {timer['superseded_by']} (by {timer['by']})"
    if status == "void":
        return f"void (by {timer['by']})"
    if status == "fired" and timer.get("ok") is False:
        return f"FAILED: {timer.get('error') or ''}".rstrip()
    return ""


def timer_table(timers: list[dict[str, Any]]) -> str:
    """The timers of one owner: status, owed, fired, place, key, and a note when any has one."""
    rows = [
        [
            t["status"],
            utc_minute(t["owed_at"]),
            utc_minute(t["fired_at"]),
            t["place"],
            t["key"],
            note(t),
        ]
        for t in timers
    ]
    headers = ["status", "owed", "fired", "place", "key", "note"]
    if not any(row[-1] for row in rows):
        headers.pop()
        rows = [row[:-1] for row in rows]
    # keys are up to 400 bytes and notes name a second key: never cut them
    return table(headers, rows, width=1000)

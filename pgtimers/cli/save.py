"""`pgtimers save`: create or replace a timer with every option of timers.save, the run
policies (retries, retry delay, pause after, jitter, priority) and autonomous among them. Times and
intervals are read by PostgreSQL one by one first (values.py), so a bad one is named;
what each value may be is timers.save's to say, and its message is printed as it is."""

from __future__ import annotations

import argparse
import json

import psycopg

from pgtimers.cli.commands import Subparsers, add_command, positive, whole, with_conn
from pgtimers.cli.exit_codes import ExitCode
from pgtimers.cli.values import bad_value, refuse
from pgtimers.queries import beside

_q = beside(__file__, "save.sql")
EXAMPLES = """\
examples:
  pgtimers save shop_totals 'every 5m' 'CALL refresh_shop_totals()'
  pgtimers save nightly 'daily 02:00' 'CALL nightly()' --retries 3 --retry-delay '1 minute'
  pgtimers save feed 'hourly' 'CALL pull_feed()' --jitter '5 minutes' --pause-after 5
  pgtimers save billing 'every 1m' 'CALL bill()' --priority 50
  pgtimers save report 'daily 06:00' 'CALL report()' --catch-up-window '2 hours'
  pgtimers save vacuum_events 'daily 03:00' 'VACUUM (ANALYZE) events' --autonomous
  pgtimers save totals 'every 1s' 'CALL add_totals()' --deadline '30 seconds' --history failures
"""


def cmd_save(conn: psycopg.Connection, args: argparse.Namespace) -> int:
    """Create or replace a timer and print its timers.status row as JSON."""
    bad = bad_value(
        conn,
        [
            ("--start-at", args.start_at, "time"),
            ("--end-at", args.end_at, "time"),
            ("--timeout", args.timeout, "interval"),
            ("--retry-delay", args.retry_delay, "interval"),
            ("--jitter", args.jitter, "interval"),
            ("--catch-up-window", args.catch_up_window, "interval"),
            ("--deadline", args.deadline, "interval"),
        ],
    )
    if bad:
        return refuse(bad)
    params = {
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
        "retries": args.retries,
        "retry_delay": args.retry_delay,
        "pause_after": args.pause_after,
        "jitter": args.jitter,
        "priority": args.priority,
        "catch_up_window": args.catch_up_window,
        "autonomous": args.autonomous,
        "deadline": args.deadline,
        "history": args.history,
    }
    row = conn.execute(_q("save_timer"), params).fetchone()
    print(json.dumps(None if row is None else row[0], indent=2, default=str))
    return ExitCode.OK


def add_parser(sub: Subparsers) -> None:
    """Add the `save` subcommand."""
    p = add_command(
        sub,
        "save",
        "create or replace a timer (it runs as the role you connect as)",
        "pgtimers save shop_totals 'every 5m' 'CALL refresh_shop_totals()'",
    )
    p.epilog = EXAMPLES
    p.add_argument("name")
    p.add_argument("schedule")
    p.add_argument("sql")
    p.add_argument("--disabled", action="store_true", help="save it turned off")
    p.add_argument("--timezone", help="zone of its wall times (default: the database's)")
    p.add_argument(
        "--catch-up",
        choices=["skip", "latest", "all"],
        help="what to do with due times missed while no runner was up",
    )
    p.add_argument(
        "--catch-up-window",
        metavar="INTERVAL",
        help="a due time missed while no runner was up runs late only if it is less than"
        " INTERVAL old when a runner is back (up to 1 year; default none)",
    )
    p.add_argument("--start-at", help="not before this time (ISO 8601)")
    p.add_argument("--end-at", help="not after this time (ISO 8601)")
    p.add_argument("--max-runs", type=positive, help="expire after this many runs")
    p.add_argument("--timeout", help="time limit of a run, like '30 s' (default 10 min)")
    p.add_argument("--locked", action="store_true", help="only a superuser can unlock it")
    p.add_argument("--test-clock", help="live on this test clock's time")
    p.add_argument(
        "--autonomous",
        action="store_true",
        help="run the SQL as its owner, statement by statement, outside one transaction"
        " (VACUUM, CREATE INDEX CONCURRENTLY, procedures that COMMIT)",
    )
    told = p.add_argument_group("telling a person (docs/running.md)")
    told.add_argument(
        "--deadline",
        metavar="INTERVAL",
        help="a due time with no successful commit this long after it was due raises one"
        " deadline_missed event (up to 1 year; default none)",
    )
    told.add_argument(
        "--history",
        choices=["all", "failures"],
        help="which runs keep a timers.runs row: all (the default) or failures only",
    )
    policies = p.add_argument_group("run policies (docs/running.md)")
    policies.add_argument(
        "--retries",
        type=whole,
        metavar="N",
        help="try a failed run again N times (0-100; default 0)",
    )
    policies.add_argument(
        "--retry-delay",
        metavar="INTERVAL",
        help="before the first retry; it doubles with each, to at most 1 hour (default 30 s)",
    )
    policies.add_argument(
        "--pause-after",
        type=whole,
        metavar="N",
        help="turn it off after N failed due times in a row (1-10000; default never)",
    )
    policies.add_argument(
        "--jitter",
        metavar="INTERVAL",
        help="run each due time at a fixed offset in [0, INTERVAL), up to 1 hour (default none)",
    )
    policies.add_argument(
        "--priority",
        type=whole,
        metavar="N",
        help="-100 to 100: higher starts first when workers are short (default 0)",
    )
    p.set_defaults(func=with_conn(cmd_save))

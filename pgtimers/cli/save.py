"""`pgtimers save`: create or replace a timer with every option of timers.save, one flag
per option of pgtimers/options.py. Times and intervals are read by PostgreSQL one by one
first (values.py), so a bad one is named by its flag; what each value may be is
timers.save's to say, and its message is printed as it is."""

from __future__ import annotations

import argparse
import json

import psycopg

from pgtimers.cli.commands import Subparsers, add_command, positive, whole, with_conn
from pgtimers.cli.exit_codes import ExitCode
from pgtimers.cli.values import Check, bad_value, refuse
from pgtimers.options import KEYS, OPTIONS, Option, timer_json
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
  pgtimers save candles after 'CALL candles()' --after import_ticks,import_prices
"""


# what values.py casts a kind of option to before the save (the others argparse reads)
_CAST = {"time": "time", "interval": "interval"}


def cmd_save(conn: psycopg.Connection, args: argparse.Namespace) -> int:
    """Create or replace a timer and print its timers.status row as JSON."""
    checks: list[Check] = [
        (option.cli_flag, getattr(args, option.name), _CAST[option.kind])
        for option in OPTIONS
        if option.kind in _CAST
    ]
    bad = bad_value(conn, checks)
    if bad:
        return refuse(bad)
    row = conn.execute(_q("save_timer"), {"timer": timer_of(args)}).fetchone()
    print(json.dumps(None if row is None else row[0], indent=2, default=str))
    return ExitCode.OK


def timer_of(args: argparse.Namespace) -> str:
    """The timer of a `pgtimers save` command line as the JSON object timers.save takes."""
    return timer_json({key: getattr(args, key) for key in KEYS})


def _names(value: str) -> list[str]:
    """The timer names of one --after: comma-separated."""
    return [name.strip() for name in value.split(",") if name.strip()]


def _add_flag(parser: argparse._ActionsContainer, option: Option) -> None:
    """The flag of one option; not given, it is None (or the boolean's default), which
    timers.save takes as the option's default."""
    helped = f"{option.help} (default {option.shown_default})"
    if option.kind == "bool":
        # a flag turns the default around: --locked, --autonomous, --disabled
        if option.default:
            helped = f"{option.name} false ({option.help}; default true)"
        action = "store_false" if option.default else "store_true"
        parser.add_argument(option.cli_flag, dest=option.name, action=action, help=helped)
    elif option.kind in ("int", "int32"):
        # a bigint counts (max_runs: 1 or more); an integer's range is timers.save's to say
        kind = positive if option.kind == "int" else whole
        parser.add_argument(option.cli_flag, type=kind, metavar="N", help=helped)
    elif option.kind == "names":
        # repeated, or comma-separated: --after ticks --after prices, --after ticks,prices
        parser.add_argument(
            option.cli_flag,
            dest=option.name,
            action="extend",
            type=_names,
            metavar="TIMER",
            help=helped,
        )
    elif option.choices:
        parser.add_argument(option.cli_flag, choices=option.choices, help=helped)
    else:
        metavar = {"time": "TIME", "interval": "INTERVAL"}.get(option.kind, "TEXT")
        parser.add_argument(option.cli_flag, metavar=metavar, help=helped)


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
    groups: dict[str, argparse._ActionsContainer] = {"": p}
    for option in OPTIONS:
        if option.group not in groups:
            groups[option.group] = p.add_argument_group(option.group)
        _add_flag(groups[option.group], option)
    p.set_defaults(func=with_conn(cmd_save))

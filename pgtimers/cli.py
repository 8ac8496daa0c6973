"""The `pgtimers` command: install, preview schedules, run the runner."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from collections.abc import Sequence

import psycopg

from pgtimers import __version__

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def resolve_dsn(dsn: str | None) -> str:
    """The DSN from the flag, else PGTIMERS_DSN, else DATABASE_URL, else the embedded server."""
    found = dsn or os.environ.get("PGTIMERS_DSN") or os.environ.get("DATABASE_URL")
    if found:
        return found
    from pgtimers.embedded import embedded_dsn

    return embedded_dsn()


def _add_dsn(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dsn",
        help="database to use (default: PGTIMERS_DSN, DATABASE_URL, else the embedded server)",
    )


def cmd_install(args: argparse.Namespace) -> int:
    """Install or upgrade the timers schema."""
    from pgtimers.install import install

    dsn = resolve_dsn(args.dsn)
    revision = install(dsn)
    print(f"pgtimers schema at revision {revision}")
    return EXIT_OK


def cmd_next(args: argparse.Namespace) -> int:
    """Preview the next due times of a schedule."""
    with psycopg.connect(resolve_dsn(args.dsn), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT to_char(t AT TIME ZONE z, 'Dy YYYY-MM-DD HH24:MI:SS'), z"
            " FROM timers.next_runs(%s, %s, timezone => %s) AS t,"
            " LATERAL (SELECT coalesce(%s, timers._default_zone()) AS z) zz",
            [args.schedule, args.n, args.timezone, args.timezone],
        ).fetchall()
    for when, zone in rows:
        print(f"{when} {zone}")
    return EXIT_OK


def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad date '{text}': use YYYY-MM-DD") from None


def cmd_calendar_import(args: argparse.Namespace) -> int:
    """Build a trading calendar from an exchange's sessions."""
    from pgtimers.calendar_import import CalendarImportError, apply_plan, plan_from_exchange

    today = dt.date.today()
    start = args.from_day or dt.date(today.year, 1, 1)
    end = args.to_day or dt.date(today.year + 1, 12, 31)
    name = args.name or args.exchange.lower()
    try:
        plan = plan_from_exchange(args.exchange, start, end)
    except CalendarImportError as exc:
        print(f"pgtimers: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    with psycopg.connect(resolve_dsn(args.dsn)) as conn:
        counts = apply_plan(conn, name, plan)
    print(
        f"calendar {name}: {args.exchange} from {start} to {end}, week {plan.week},"
        f" {counts['holidays']} holidays, {counts['trading_days']} extra trading days"
        f" ({counts['changed']} changed, {counts['removed']} removed)"
    )
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="pgtimers",
        description="PostgreSQL-native timers: the database runs saved SQL at set times.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  pgtimers install --dsn postgresql://localhost/app\n"
        "  pgtimers next 'cron 0 9 * * 1-5' -n 3 --timezone Asia/Kathmandu\n  pgtimers run",
    )
    parser.add_argument("--version", action="version", version=f"pgtimers {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser(
        "install",
        help="install or upgrade the timers schema (idempotent)",
        epilog="example: pgtimers install --dsn postgresql://localhost/app",
    )
    _add_dsn(p)
    p.set_defaults(func=cmd_install)

    p = sub.add_parser(
        "next",
        help="preview the next due times of a schedule",
        epilog="example: pgtimers next 'sun-thu 11:00' -n 5 --timezone Asia/Kathmandu",
    )
    p.add_argument("schedule")
    p.add_argument("-n", type=int, default=5, help="how many due times (default 5)")
    p.add_argument("--timezone", help="zone of the wall times (default: the database's)")
    _add_dsn(p)
    p.set_defaults(func=cmd_next)

    cal = sub.add_parser("calendar", help="trading calendars")
    cal_sub = cal.add_subparsers(dest="calendar_command", required=True, metavar="ACTION")
    p = cal_sub.add_parser(
        "import",
        help="build a calendar from the exchange_calendars package",
        epilog="example: pgtimers calendar import XNYS --from 2026-01-01 --to 2027-12-31"
        " --name nyse",
    )
    p.add_argument("exchange", help="ISO MIC code of the exchange, like XNYS")
    p.add_argument("--from", dest="from_day", type=_date, help="first day (default: Jan 1)")
    p.add_argument("--to", dest="to_day", type=_date, help="last day (default: end of next year)")
    p.add_argument("--name", help="calendar name (default: the code in lower case)")
    _add_dsn(p)
    p.set_defaults(func=cmd_calendar_import)

    try:
        from pgtimers import runcmd
    except ImportError:
        pass
    else:
        runcmd.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except psycopg.Error as exc:
        diag = exc.diag
        print(f"pgtimers: {diag.message_primary or exc}", file=sys.stderr)
        if diag.message_hint:
            print(f"hint: {diag.message_hint}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return code


if __name__ == "__main__":
    sys.exit(main())

"""The `pgtimers` command: install, administer timers, import calendars, run the runner."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from collections.abc import Callable, Sequence

import psycopg

from pgtimers import __version__, cli_admin, cli_keyed, runcmd
from pgtimers.cli_admin import EXIT_BAD_INPUT, EXIT_OK

Command = Callable[[psycopg.Connection, argparse.Namespace], int]


def resolve_dsn(dsn: str | None) -> str:
    """The DSN from the flag, else PGTIMERS_DSN, else DATABASE_URL, else the embedded server."""
    found = dsn or os.environ.get("PGTIMERS_DSN") or os.environ.get("DATABASE_URL")
    if found:
        return found
    from pgtimers.embedded import embedded_dsn

    return str(embedded_dsn())


def _add_dsn(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dsn",
        help="database (default: PGTIMERS_DSN, else DATABASE_URL, else the embedded server)",
    )


def _with_conn(command: Command) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        with psycopg.connect(resolve_dsn(args.dsn), autocommit=True) as conn:
            return command(conn, args)

    return run


def cmd_install(args: argparse.Namespace) -> int:
    """Install or upgrade the timers schema."""
    from pgtimers.install import upgrade

    print(upgrade(resolve_dsn(args.dsn)).summary())
    return EXIT_OK


def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad date '{text}': use YYYY-MM-DD") from None


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number of 1 or more")
    return int(text)


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


def _sub(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help: str, example: str
) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        name,
        help=help,
        description=help,
        epilog=f"example:\n  {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_dsn(parser)
    return parser


def _admin_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = _sub(
        sub,
        "list",
        "list the timers: schedule, next and last run, result, last error",
        "pgtimers list --json",
    )
    p.add_argument("--json", action="store_true", help="the GET /api/timers body")
    p.set_defaults(func=_with_conn(cli_admin.cmd_list))

    p = _sub(
        sub,
        "show",
        "one timer in full, its last 10 runs and next 5 due times",
        "pgtimers show shop_totals",
    )
    p.add_argument("name")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_with_conn(cli_admin.cmd_show))

    p = _sub(
        sub,
        "save",
        "create or replace a timer (it runs as the role you connect as)",
        "pgtimers save shop_totals 'every 5m' 'CALL refresh_shop_totals()'",
    )
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
    p.add_argument("--start-at", help="not before this time (ISO 8601)")
    p.add_argument("--end-at", help="not after this time (ISO 8601)")
    p.add_argument("--max-runs", type=_positive, help="expire after this many runs")
    p.add_argument("--timeout", help="time limit of a run, like '30 s' (default 10 min)")
    p.add_argument("--locked", action="store_true", help="only a superuser can unlock it")
    p.add_argument("--test-clock", help="live on this test clock's time")
    p.set_defaults(func=_with_conn(cli_admin.cmd_save))

    for name, enabled in (("enable", True), ("disable", False)):
        p = _sub(
            sub, name, f"turn a timer {'on' if enabled else 'off'}", f"pgtimers {name} nightly"
        )
        p.add_argument("name")
        p.set_defaults(func=_with_conn(cli_admin.cmd_enable), enabled=enabled)

    p = _sub(sub, "delete", "delete a timer", "pgtimers delete nightly")
    p.add_argument("name")
    p.set_defaults(func=_with_conn(cli_admin.cmd_delete))

    p = _sub(
        sub,
        "history",
        "a timer's runs and skipped due times, newest first",
        "pgtimers history shop_totals -n 50",
    )
    p.add_argument("name")
    p.add_argument("-n", type=_positive, default=20, help="how many (default 20)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_with_conn(cli_admin.cmd_history))

    p = _sub(
        sub,
        "next",
        "preview the next due times of a schedule",
        "pgtimers next 'sun-thu 11:00' -n 5 --timezone Asia/Kathmandu",
    )
    p.add_argument("schedule")
    p.add_argument("-n", type=_positive, default=5, help="how many (default 5)")
    p.add_argument("--timezone", help="zone of the wall times (default: the database's)")
    p.set_defaults(func=_with_conn(cli_admin.cmd_next))


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="pgtimers",
        description="PostgreSQL-native timers: the database runs saved SQL at set times.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="exit codes: 0 ok, 1 a failed run, 2 bad input (the error on stderr)\n\n"
        "examples:\n  pgtimers run\n  pgtimers install --dsn postgresql://localhost/app\n"
        "  pgtimers save shop_totals 'every 5m' 'CALL refresh_shop_totals()'\n"
        "  pgtimers list\n  pgtimers next 'cron 0 9 * * 1-5' -n 3 --timezone Asia/Kathmandu",
    )
    parser.add_argument("--version", action="version", version=f"pgtimers {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = _sub(
        sub,
        "install",
        "install or upgrade the timers schema (idempotent)",
        "pgtimers install --dsn postgresql://localhost/app",
    )
    p.set_defaults(func=cmd_install)

    _admin_commands(sub)
    cli_keyed.add_parser(sub, _sub, _with_conn)

    cal = sub.add_parser(
        "calendar",
        help="trading calendars: import from exchange_calendars",
        epilog="example:\n  pgtimers calendar import XNYS --from 2026-01-01 --to 2027-12-31",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cal_sub = cal.add_subparsers(dest="calendar_command", required=True, metavar="ACTION")
    p = _sub(
        cal_sub,
        "import",
        "build a calendar from the exchange_calendars package",
        "pgtimers calendar import XNYS --from 2026-01-01 --to 2027-12-31 --name nyse",
    )
    p.add_argument("exchange", help="ISO MIC code of the exchange, like XNYS")
    p.add_argument("--from", dest="from_day", type=_date, help="first day (default: Jan 1)")
    p.add_argument("--to", dest="to_day", type=_date, help="last day (default: end of next year)")
    p.add_argument("--name", help="calendar name (default: the code in lower case)")
    p.set_defaults(func=cmd_calendar_import)

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

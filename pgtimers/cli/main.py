"""The `pgtimers` command: install, administer timers, import calendars, run the runner."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import psycopg

from pgtimers import __version__
from pgtimers.cli import (
    admin,
    apply,
    backfills,
    calendar_import,
    early_signals,
    keyed,
    pg_cron_import,
    run,
    uninstall,
)
from pgtimers.cli.commands import add_command
from pgtimers.cli.dsn import resolve_dsn
from pgtimers.cli.exit_codes import EPILOG, ExitCode


def cmd_install(args: argparse.Namespace) -> int:
    """Install or upgrade the timers schema."""
    # alembic and SQLAlchemy load only for the command that needs them
    from pgtimers.schema.install import upgrade

    print(upgrade(resolve_dsn(args.dsn)).summary())
    return ExitCode.OK


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="pgtimers",
        description="PostgreSQL-native timers: the database runs saved SQL at set times.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"{EPILOG}\n\n"
        "examples:\n  pgtimers run\n  pgtimers install --dsn postgresql://localhost/app\n"
        "  pgtimers save shop_totals 'every 5m' 'CALL refresh_shop_totals()'\n"
        "  pgtimers list\n  pgtimers next 'cron 0 9 * * 1-5' -n 3 --timezone Asia/Kathmandu",
    )
    parser.add_argument("--version", action="version", version=f"pgtimers {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = add_command(
        sub,
        "install",
        "install or upgrade the timers schema (idempotent)",
        "pgtimers install --dsn postgresql://localhost/app",
    )
    p.set_defaults(func=cmd_install)

    admin.add_parsers(sub)
    apply.add_parsers(sub)
    backfills.add_parsers(sub)
    keyed.add_parser(sub)
    calendar_import.add_parser(sub)
    pg_cron_import.add_parser(sub)
    run.add_parser(sub)
    uninstall.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.func is not run.main or args.name:
        early_signals.uninstall()  # only the runner turns a stop signal into exit 0
    try:
        code: int = args.func(args)
    except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName) as exc:
        # a command on a database without pgtimers (or an older one)
        print(f"pgtimers: {exc.diag.message_primary or exc}", file=sys.stderr)
        print(
            "hint: pgtimers is not installed in this database (or not up to date):"
            " run pgtimers install --dsn <this database>",
            file=sys.stderr,
        )
        return ExitCode.BAD_INPUT
    except psycopg.Error as exc:
        diag = exc.diag
        print(f"pgtimers: {diag.message_primary or exc}", file=sys.stderr)
        if diag.message_hint:
            print(f"hint: {diag.message_hint}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    return code


if __name__ == "__main__":
    sys.exit(main())

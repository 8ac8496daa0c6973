"""The `pgtimers` command: install, preview schedules, run the runner."""

from __future__ import annotations

import argparse
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

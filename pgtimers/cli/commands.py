"""Shared pieces of the subcommands: a subparser with --dsn, a connection per command,
and the argument types."""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Callable
from typing import TypeAlias

import psycopg

from pgtimers.cli import dsn

Command = Callable[[psycopg.Connection, argparse.Namespace], int]
# a string: argparse's class is generic only to type checkers
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def add_command(sub: Subparsers, name: str, help: str, example: str) -> argparse.ArgumentParser:
    """A subcommand with its help, one example and the --dsn option."""
    parser = sub.add_parser(
        name,
        help=help,
        description=help,
        epilog=f"example:\n  {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--dsn", help=dsn.HELP)
    return parser


def with_conn(command: Command) -> Callable[[argparse.Namespace], int]:
    """Run `command` on an autocommit connection to the --dsn database."""

    def run(args: argparse.Namespace) -> int:
        with psycopg.connect(dsn.resolve_dsn(args.dsn), autocommit=True) as conn:
            return command(conn, args)

    return run


def date(text: str) -> dt.date:
    """An argument of the form YYYY-MM-DD."""
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad date '{text}': use YYYY-MM-DD") from None


def positive(text: str) -> int:
    """An argument that is a whole number of 1 or more."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number of 1 or more")
    return int(text)


def whole(text: str) -> int:
    """An argument that is a whole number in PostgreSQL's integer range (what it means,
    such as 0 to 100 retries, the SQL function checks)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if not -(2**31) <= value < 2**31:
        raise argparse.ArgumentTypeError(f"'{text}' is out of range")
    return value

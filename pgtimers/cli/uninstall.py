"""`pgtimers uninstall`: drop pgtimers from a database (its schemas, with every timer, run
and executor), and its cluster-wide roles when no other database uses them any more."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

import psycopg

from pgtimers.cli import dsn
from pgtimers.cli.commands import Subparsers, add_command
from pgtimers.cli.exit_codes import ExitCode
from pgtimers.schema.install import pinned
from pgtimers.schema.uninstall import LOCK_TIMEOUT, ROLES, drop, plan

HELP = "drop pgtimers from a database: its schemas, and its roles once no database uses them"
EPILOG = f"""\
Drops the schemas timers and timers_exec: every timer, its history and every
executor (whichever role owns it). The roles {", ".join(ROLES)}
are shared by the whole cluster: they are dropped only when every other database
was checked (connected to with the same credentials) and none has pgtimers; when
one cannot be checked, they are kept and it says which.

It refuses, changing nothing, while a runner serves the database (unless
--force), while objects of other schemas depend on pgtimers (a view on
timers.status, a foreign key to timers.timers; unless --cascade), and when the
role it connects as does not own the schemas. It shows what it will drop and
asks; --yes drops without asking (needed when stdin is not a terminal).

exit codes: 0 dropped (or nothing to drop), 2 refused, not confirmed, or an error

examples:
  pgtimers uninstall --dsn postgresql://localhost/app
  pgtimers uninstall --dsn postgresql://localhost/app --yes --keep-roles"""


def add_parser(sub: Subparsers) -> None:
    """Add the `uninstall` subcommand."""
    p = add_command(sub, "uninstall", HELP, "pgtimers uninstall --dsn postgresql://localhost/app")
    p.epilog = EPILOG
    p.add_argument("-y", "--yes", action="store_true", help="drop without asking")
    p.add_argument(
        "--force", action="store_true", help="drop even while a runner serves the database"
    )
    p.add_argument(
        "--cascade",
        action="store_true",
        help="also drop the objects of other schemas that depend on pgtimers (it lists them)",
    )
    p.add_argument(
        "--keep-roles",
        action="store_true",
        help="keep the cluster-wide roles (and check no other database)",
    )
    p.set_defaults(func=cmd_uninstall)


def _database(flag: str | None) -> str:
    # Unlike the other commands, the embedded server is not given pgtimers first.
    found = dsn.given_dsns([flag] if flag else None)
    if found:
        return found[0]
    from pgtimers.cli.embedded import embedded_dsn

    return embedded_dsn(install_schema=False)


def confirmed(stdin: TextIO = sys.stdin) -> bool | None:
    """Ask on the terminal; None when stdin is not one (nobody can answer)."""
    if not stdin.isatty():
        return None
    try:
        answer = input("Drop all of this? It cannot be undone. [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def _refused(reasons: list[str]) -> int:
    for reason in reasons:
        print(f"pgtimers: uninstall refused, nothing changed: {reason}", file=sys.stderr)
    return ExitCode.BAD_INPUT


def cmd_uninstall(args: argparse.Namespace) -> int:
    """Show what goes, ask, drop it in one transaction, print what was dropped."""
    target = _database(args.dsn)
    # pinned search path: what it runs as the installing role resolves in pg_catalog only
    with psycopg.connect(pinned(target)) as conn:
        planned = plan(conn, target, args.keep_roles)
        conn.rollback()
        refused = planned.refusals(args.force, args.cascade)
        if refused:
            return _refused(refused)
        print("\n".join(planned.describe()))
        if not planned.schemas and not planned.verdict.drop:
            print("nothing to drop")
            return ExitCode.OK
        if not args.yes:
            answer = confirmed()
            if answer is None:
                print(
                    "pgtimers: uninstall asks before it drops, but stdin is not a terminal:"
                    " pass --yes to drop without asking; nothing changed",
                    file=sys.stderr,
                )
                return ExitCode.BAD_INPUT
            if not answer:
                print("not confirmed: nothing changed", file=sys.stderr)
                return ExitCode.BAD_INPUT
        try:
            with conn.transaction():
                # Looked at again inside the transaction: a runner may have started since.
                planned = plan(conn, target, args.keep_roles)
                refused = planned.refusals(args.force, args.cascade)
                if refused:
                    raise _Refused(refused)
                done = drop(conn, planned)
        except _Refused as exc:
            return _refused(exc.reasons)
        except psycopg.errors.LockNotAvailable:
            print(
                f"pgtimers: uninstall could not lock pgtimers' tables within {LOCK_TIMEOUT}:"
                " another session uses them (a run in progress?); nothing changed",
                file=sys.stderr,
            )
            return ExitCode.BAD_INPUT
    print("\n".join(done))
    return ExitCode.OK


class _Refused(Exception):
    def __init__(self, reasons: list[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = reasons

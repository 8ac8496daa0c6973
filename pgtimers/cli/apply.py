"""`pgtimers apply` and `pgtimers export`: timers as code. The files are read and checked
first (spec_file.py), then timers.apply plans them in the database with every check of
timers.save, prints the plan and, unless --check, carries it out in one statement."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import psycopg

from pgtimers.cli import toml_out
from pgtimers.cli.commands import Subparsers, add_command, with_conn
from pgtimers.cli.exit_codes import ExitCode
from pgtimers.cli.spec_file import CALENDAR_KEYS, TIMER_KEYS, Spec, SpecError, read_files
from pgtimers.cli.values import quoted
from pgtimers.queries import beside

_q = beside(__file__, "apply.sql")
_SIGNS = {"create": "+", "update": "~", "delete": "-", "unchanged": "="}
# an error timers.apply raises for one timer or calendar starts with what it is
_ABOUT = re.compile(r'^(timer|calendar) "((?:[^"]|"")*)": ')
APPLY_EXAMPLES = """\
examples:
  pgtimers apply timers.toml                 # plan, then apply
  pgtimers apply timers/*.toml --prune       # and delete the managed timers the files dropped
  pgtimers apply timers.toml --check         # CI: exit 1 when the database differs
  pgtimers export > timers.toml              # the timers as they are, as a file
"""


def _shown(item: Any) -> str:
    if isinstance(item, str):
        return quoted(item, 40)
    return json.dumps(item)


def plan_line(action: str, name: str, changes: Any) -> str:
    """One line of a plan: `~ update NAME: option old -> new, …` and the like."""
    line = f"{_SIGNS.get(action, '?')} {action} {name}"
    if action == "update" and isinstance(changes, dict) and changes:
        told = []
        for option, change in changes.items():
            if isinstance(change, dict) and set(change) == {"from", "to"}:
                told.append(f"{option} {_shown(change['from'])} -> {_shown(change['to'])}")
            else:
                told.append(f"{option} -> {_shown(change)}")
        line += ": " + ", ".join(told)
    return line


def _counts(plan: list[dict[str, Any]]) -> str:
    counts = dict.fromkeys(_SIGNS, 0)
    for step in plan:
        counts[step["action"]] = counts.get(step["action"], 0) + 1
    return ", ".join(f"{n} {action}" for action, n in counts.items())


def _where(spec: Spec, message: str) -> str:
    """An error of timers.apply with the file and line of the timer it names."""
    found = _ABOUT.match(message)
    if not found:
        return message
    kind, name = found.group(1), found.group(2).replace('""', '"')
    places = spec.where if kind == "timer" else spec.where_calendar
    place = places.get(name.lower())
    return f"{place}: {message}" if place else message


def _refused(spec: Spec, exc: psycopg.Error) -> int:
    if isinstance(exc, psycopg.errors.InvalidSchemaName | psycopg.errors.UndefinedTable):
        raise exc  # main() gives the install hint
    diag = exc.diag
    if isinstance(exc, psycopg.errors.UndefinedFunction) and "timers.apply" in str(exc):
        print("pgtimers: this database's pgtimers has no timers.apply", file=sys.stderr)
        print("hint: run pgtimers install --dsn <this database> to upgrade it", file=sys.stderr)
        return ExitCode.BAD_INPUT
    print(f"pgtimers: {_where(spec, diag.message_primary or str(exc))}", file=sys.stderr)
    if diag.message_detail:
        print(f"detail: {diag.message_detail}", file=sys.stderr)
    if diag.message_hint:
        print(f"hint: {diag.message_hint}", file=sys.stderr)
    print("pgtimers: nothing was changed", file=sys.stderr)
    return ExitCode.BAD_INPUT


def _plan(conn: psycopg.Connection, body: dict[str, Any], prune: bool, dry_run: bool) -> Any:
    params = {"spec": json.dumps(body), "prune": prune, "dry_run": dry_run}
    rows = conn.execute(_q("apply"), params).fetchall()
    return [{"action": a, "name": n, "changes": c} for a, n, c in rows]


def cmd_apply(conn: psycopg.Connection, args: argparse.Namespace, spec: Spec) -> int:
    """Plan the files, print the plan and apply it unless --check."""
    body = spec.as_json(args.managed_by)
    try:
        plan = _plan(conn, body, args.prune, dry_run=True)
        differs = any(step["action"] != "unchanged" for step in plan)
        applied = None
        if differs and not args.check:
            applied = _plan(conn, body, args.prune, dry_run=False)
    except psycopg.Error as exc:
        return _refused(spec, exc)
    done = applied if applied is not None else plan
    if args.json:
        print(json.dumps({"plan": done, "applied": applied is not None}, indent=2))
    else:
        for step in done:
            print(plan_line(step["action"], step["name"], step["changes"]))
        if applied is not None:
            print(f"applied: {_counts(applied)}")
        elif args.check and differs:
            print(f"the database differs from the files: {_counts(plan)}")
        else:
            print(f"nothing to change: {_counts(plan)}")
    return ExitCode.DIFFERS if args.check and differs else ExitCode.OK


def run_apply(args: argparse.Namespace) -> int:
    """Read every file first (nothing touches the database when one is bad), then apply."""
    try:
        spec = read_files([Path(f) for f in args.files])
    except SpecError as exc:
        for error in exc.errors:
            print(f"pgtimers: {error}", file=sys.stderr)
        print("pgtimers: nothing was changed", file=sys.stderr)
        return ExitCode.BAD_INPUT
    return with_conn(lambda conn, a: cmd_apply(conn, a, spec))(args)


def cmd_export(conn: psycopg.Connection, args: argparse.Namespace) -> int:
    """Print the timers (and calendars) as a file `pgtimers apply` reads."""
    try:
        row = conn.execute(_q("export"), {"pattern": args.timer}).fetchone()
    except psycopg.errors.UndefinedFunction:
        print("pgtimers: this database's pgtimers has no timers.export", file=sys.stderr)
        print("hint: run pgtimers install --dsn <this database> to upgrade it", file=sys.stderr)
        return ExitCode.BAD_INPUT
    spec = row[0] if row else {}
    database, now = conn.execute(_q("database_now")).fetchone() or ("", "")
    top = {k: v for k, v in spec.items() if k not in ("timer", "calendar")}
    print(f"# pgtimers export of database {database} at {now:%Y-%m-%d %H:%M:%S%z}")
    print("# pgtimers apply THIS_FILE --check: exit 0 while the database still matches it\n")
    tables = [("timer", spec.get("timer") or []), ("calendar", spec.get("calendar") or [])]
    order = [k for k in TIMER_KEYS if k != "sql"] + [*CALENDAR_KEYS, "sql"]
    sys.stdout.write(toml_out.document(top, tables, order))
    return ExitCode.OK


def add_parsers(sub: Subparsers) -> None:
    """Add the `apply` and `export` subcommands."""
    p = add_command(
        sub,
        "apply",
        "make the database's timers those of TOML files: print the plan, then apply it",
        "pgtimers apply timers.toml",
    )
    p.epilog = APPLY_EXAMPLES + "\nthe format: docs/timers-as-code.md"
    p.add_argument("files", nargs="+", metavar="FILE", help="TOML files of [[timer]] tables")
    p.add_argument(
        "--check",
        action="store_true",
        help="change nothing; print the plan and exit 1 when the database differs",
    )
    p.add_argument(
        "--prune",
        action="store_true",
        help="also delete the timers this label manages that the files no longer name",
    )
    p.add_argument("--json", action="store_true", help="print the plan as one JSON document")
    p.add_argument(
        "--managed-by",
        metavar="LABEL",
        help="the label of this file set (default: the files' managed_by, else 'apply');"
        " --prune deletes only timers of this label",
    )
    p.set_defaults(func=run_apply)

    e = add_command(
        sub,
        "export",
        "print the timers and calendars as a TOML file for pgtimers apply",
        "pgtimers export --timer 'shop_*' > shop.toml",
    )
    e.add_argument("--timer", metavar="PATTERN", help="only timers named like this (* and ?)")
    e.set_defaults(func=with_conn(cmd_export))

"""`pgtimers import-pg-cron`: pg_cron's jobs (cron.job) as timers, through
timers.import_pg_cron (or timers.import_pg_cron_jobs, when pg_cron keeps its jobs in
another database). Without --apply nothing changes: the table says what would be done."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from pgtimers.cli import dsn
from pgtimers.cli.commands import Subparsers, add_command
from pgtimers.cli.exit_codes import ExitCode
from pgtimers.cli.format import table
from pgtimers.queries import beside

query = beside(__file__, "pg_cron_import.sql")
COLUMNS = ("jobid", "jobname", "timer", "schedule", "action", "reason", "username", "command")
# the table's columns; each job's reason and command follow it in full
SHOWN = ("jobid", "jobname", "username", "timer", "schedule", "action")
HELP = "turn pg_cron's jobs into timers (a dry run unless --apply)"
EPILOG = """\
Each job of pg_cron's table cron.job becomes a timer: its schedule (a bare cron
or "N seconds" as pg_cron writes it), its command as the SQL, its username as the
role the timer runs as, active as on/off, its jobname (else pg_cron_<jobid>) as the
name. A job that cannot be imported is listed with the reason and left alone.
The jobs are read only from the table of the extension pg_cron (owned by the
extension's owner), and a job becomes a timer of its username only when you could
SET ROLE to it. The dry run lists each job's role and command: read them first.

pg_cron keeps its jobs in one database (its setting cron.database_name). To import
the jobs that run in another database, install pgtimers there and read the jobs
from pg_cron's database with --cron-dsn. pg_cron keeps running its jobs: unschedule
each one (SELECT cron.unschedule(jobid)) once its timer is saved.

exit codes: 0 every job imported (or would be), 2 a job cannot be, or an error

examples:
  pgtimers import-pg-cron --dsn postgresql://localhost/postgres
  pgtimers import-pg-cron --dsn postgresql://localhost/app \\
      --cron-dsn postgresql://localhost/postgres --apply
  pgtimers import-pg-cron --dsn postgresql://localhost/postgres --apply --run-group from_pg_cron"""


def add_parser(sub: Subparsers) -> None:
    """Add the `import-pg-cron` subcommand."""
    p = add_command(sub, "import-pg-cron", HELP, "pgtimers import-pg-cron --apply")
    p.epilog = EPILOG
    p.add_argument(
        "--cron-dsn",
        metavar="DSN",
        help="the database where pg_cron keeps its jobs (default: the --dsn database)",
    )
    p.add_argument(
        "--run-group",
        metavar="NAME",
        help="save every imported timer in this run group (not an autonomous one)",
    )
    p.add_argument("--apply", action="store_true", help="import (default: only show what would be)")
    p.add_argument("--json", action="store_true", help="one JSON object per job, in a list")
    p.set_defaults(func=cmd_import)


class NoPgCron(LookupError):
    """The --cron-dsn database has no pg_cron's table; the message says why."""


def read_jobs(cron_dsn: str) -> tuple[Any, str | None]:
    """The cron.job rows (a JSON list) of pg_cron's database and its cron.timezone, read
    only from pg_cron's own table (as timers.import_pg_cron reads them)."""
    with psycopg.connect(cron_dsn, autocommit=True) as conn:
        conn.execute(query("pin_path"))
        found = conn.execute(query("cron_table")).fetchone()
        assert found is not None
        exists, why_not = found
        where = f"database {conn.info.dbname} (--cron-dsn)"
        if not exists:
            raise NoPgCron(f"pg_cron is not installed in {where}: there is no table cron.job")
        if why_not is not None:
            # never read: its rows could name any role, and a view or policy of its
            # maker would run that role's functions as this login
            raise NoPgCron(
                f"cron.job in {where} is not pg_cron's own table: {why_not}; the import reads"
                " jobs only from the table of the extension pg_cron, owned by the extension's"
                " owner"
            )
        row = conn.execute(query("cron_jobs")).fetchone()
    assert row is not None
    return row[0], row[1]


def import_jobs(
    conn: psycopg.Connection, cron_dsn: str | None, apply: bool, run_group: str | None = None
) -> list[dict[str, Any]]:
    """The import's rows, one per job; with `apply` the timers are saved (in `run_group`)."""
    if cron_dsn is None:
        params: dict[str, Any] = {"dry_run": not apply, "run_group": run_group}
        cursor = conn.execute(query("import_here"), params)
    else:
        jobs, zone = read_jobs(cron_dsn)
        params = {"jobs": Jsonb(jobs), "dry_run": not apply, "timezone": zone}
        cursor = conn.execute(query("import_jobs"), {**params, "run_group": run_group})
    return [dict(zip(COLUMNS, row, strict=True)) for row in cursor]


def summary(rows: list[dict[str, Any]], apply: bool) -> str:
    """The closing lines: the counts, and what to do next."""
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["action"]] = counts.get(r["action"], 0) + 1
    text = ", ".join(f"{n} {action}" for action, n in counts.items()) or "no jobs in cron.job"
    if not apply and counts.get("would import"):
        return f"{text}\ndry run: nothing changed; run again with --apply to import"
    if counts.get("imported"):
        return (
            f"{text}\npg_cron still runs these jobs: unschedule each imported one"
            " (SELECT cron.unschedule(jobid)) so that it does not run twice"
        )
    return text


def printable(text: str) -> str:
    """A job's text as it may be printed: control characters (save newline and tab) and
    line separators escaped, so that what a job's author wrote cannot pass for other output."""
    return "".join(
        c if c in "\n\t" or (c.isprintable() and c not in "\u2028\u2029") else f"\\u{ord(c):04x}"
        for c in text
    )


def commands(rows: list[dict[str, Any]]) -> list[str]:
    """Each job's command in full, indented under the role it runs as."""
    lines = ["commands:"]
    for r in rows:
        lines.append(f"  job {r['jobid']} ({r['timer']}), as {printable(str(r['username']))}:")
        lines += [f"    {line}" for line in printable(str(r["command"] or "")).splitlines() or [""]]
    return lines


def report(rows: list[dict[str, Any]], apply: bool) -> str:
    """A table of the jobs, each reason in full, each command in full, then the summary."""
    if not rows:
        return summary(rows, apply)
    cells = [[r[c] if not isinstance(r[c], str) else printable(r[c]) for c in SHOWN] for r in rows]
    lines = [table(SHOWN, cells), ""]
    notes = [f"  job {r['jobid']} ({r['timer']}): {r['reason']}" for r in rows if r["reason"]]
    if notes:
        lines += ["why:", *notes, ""]
    lines += [*commands(rows), ""]
    return "\n".join([*lines, summary(rows, apply)])


def cmd_import(args: argparse.Namespace) -> int:
    """Import (or, without --apply, preview) pg_cron's jobs as timers."""
    try:
        with psycopg.connect(dsn.resolve_dsn(args.dsn), autocommit=True) as conn:
            rows = import_jobs(conn, args.cron_dsn, args.apply, args.run_group)
    except NoPgCron as exc:
        print(f"pgtimers: {exc}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    except psycopg.errors.InvalidSchemaName:
        print(
            "pgtimers: pgtimers is not installed in the --dsn database: pgtimers install --dsn …",
            file=sys.stderr,
        )
        return ExitCode.BAD_INPUT
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(report(rows, args.apply))
    if any(r["action"] == "cannot import" for r in rows):
        return ExitCode.BAD_INPUT
    return ExitCode.OK

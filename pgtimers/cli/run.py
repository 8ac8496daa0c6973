"""`pgtimers run`: the runner's command line."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import TYPE_CHECKING

import psycopg

from pgtimers.cli import admin, early_signals, run_config
from pgtimers.cli.commands import Subparsers
from pgtimers.cli.dsn import given_dsns, resolve_dsn
from pgtimers.cli.exit_codes import ExitCode
from pgtimers.cli.run_config import ConfigError, RunConfig
from pgtimers.http.settings import HttpConfigError, HttpSettings, parse_addr
from pgtimers.runner import log

if TYPE_CHECKING:
    from pgtimers.http.server import HttpServer
    from pgtimers.runner.service import RunnerOptions

HELP = f"""\
Run the timers of one or more databases: claim each due timer with
FOR UPDATE SKIP LOCKED and run its SQL in its own transaction, exactly once
per due time. Any number of runners on one database is safe.

The databases: --dsn, else `dsn` in --config, else PGTIMERS_DSN, else
DATABASE_URL. With none of them it starts an embedded PostgreSQL whose data
is kept in the user's data directory, installs pgtimers into it and prints its
DSN, so you can `psql` in and save timers.

Workers: N always-there workers (default 2), plus one more while all N are
running and another timer is due (none with --workers 1, which runs one timer
at a time). N comes from --workers, else `workers` in --config, else
PGTIMERS_WORKERS, else 2 (1 to 64). A worker connects only when there is work
and closes its connection after 30 s idle.

Connections: at most M to each server, control sessions and workers, shared in
turn by all its databases; with fewer than the databases, the control session
of a database with nothing due soon parks (closes) while another waits, and
comes back before its next due time. M comes from --max-connections, else
`max_connections` in --config, else PGTIMERS_MAX_CONNECTIONS, else a quarter of
the server's connections for ordinary logins, 2 to 20.

SIGTERM or SIGINT: stop claiming, let running runs finish, exit {ExitCode.OK.value}
(at any moment, start-up included). A runner that could serve no database for
PGTIMERS_GIVE_UP_AFTER seconds (default 300; 0: never) exits {ExitCode.FAILED.value}, so
that its supervisor starts it again. Under systemd (Type=notify) it says when it
is ready and feeds WatchdogSec= while every database's loop shows life.
"""

EPILOG = """\
examples:
  pgtimers run
  pgtimers run --dsn postgresql://runner@db.example/app --workers 4
  pgtimers run --dsn postgresql://runner@db.example/postgres --all-databases
  pgtimers run --config /etc/pgtimers.toml
  pgtimers run shop_totals --dsn postgresql://localhost/app   (run one timer now)
"""


def add_parser(subparsers: Subparsers) -> None:
    """Add the `run` subcommand."""
    p = subparsers.add_parser(
        "run",
        help="run the timers (the runner)",
        description=HELP,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "name",
        nargs="?",
        help="run this one timer now, through the runners serving its database: waits up to"
        f" 60 s and prints the result (exit {ExitCode.FAILED.value} when the run failed)",
    )
    p.add_argument(
        "--dsn",
        action="append",
        default=None,
        metavar="DSN",
        help="a database to serve (repeat for several); default: `dsn` in --config, else"
        " PGTIMERS_DSN, else DATABASE_URL, else the embedded server",
    )
    p.add_argument(
        "--all-databases",
        action="store_true",
        help="serve every database of the server(s) of --dsn that has the schema, "
        "looking for new ones every 30 s",
    )
    p.add_argument(
        "--workers", metavar="N", help="always-there workers per database, 1 to 64 (default 2)"
    )
    p.add_argument(
        "--max-connections",
        metavar="M",
        help="connections to each server, control sessions and workers, shared by all its"
        " databases, 2 to 10000 (default: a quarter of the server's max_connections less"
        " its reserved slots, 2 to 20)",
    )
    p.add_argument(
        "--timezone",
        metavar="ZONE",
        help="set the default zone of the served databases (timers.set_timezone) "
        "at start; needs pgtimers_admin",
    )
    p.add_argument(
        "--http",
        metavar="ADDR",
        help="serve the HTTP API, metrics and console on ADDR (127.0.0.1:8080); see docs/http.md",
    )
    p.add_argument(
        "--http-anonymous",
        action="store_true",
        default=None,
        help="no credentials needed on a loopback --http (http_allow_anonymous_loopback)",
    )
    p.add_argument(
        "--owner-dsn",
        metavar="OWNER=DSN",
        action="append",
        help="the DSN to log in as timer owner OWNER for its autonomous timers (repeatable;"
        " default: the runner's DSN with OWNER's user name, and libpq's password file,"
        " service file, trust or peer); see docs/running.md",
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        help="TOML file with workers, max_connections, dsn, all_databases, timezone, http,"
        " owner_dsns, and [[notify]] webhook sections (docs/operations.md, Getting told)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="also log every run that went well")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Run until SIGTERM/SIGINT, or run one timer now; returns the exit code."""
    if args.name:
        return _run_now(args)
    log.setup(logging.DEBUG if getattr(args, "verbose", False) else logging.INFO)
    try:
        config = run_config.resolve(
            dsns=args.dsn,
            all_databases=args.all_databases,
            workers=args.workers,
            max_connections=args.max_connections,
            timezone=args.timezone,
            http=args.http,
            owner_dsns=args.owner_dsn,
            config_file=args.config,
        )
        http_settings = _http_settings(config, args.http_anonymous)
    except (ConfigError, HttpConfigError) as exc:
        print(f"pgtimers run: {exc}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    dsns = list(config.dsns) or [_embedded()]
    if early_signals.received():
        log.event(logging.INFO, "stopped", note="a stop signal came while starting")
        return ExitCode.OK
    # the runner (asyncpg) and the HTTP API (aiohttp) load only for `pgtimers run`
    from pgtimers.runner.service import RunnerOptions

    options = RunnerOptions(
        dsns=dsns,
        all_databases=config.all_databases,
        workers=config.workers,
        timezone=config.timezone,
        max_connections=config.max_connections,
        max_connections_from=config.max_connections_from,
        owner_dsns=dict(config.owner_dsns),
        notify=config.notify,
    )
    log.event(
        logging.INFO,
        "starting",
        runner=options.runner_id,
        workers=config.workers,
        workers_from=config.workers_from,
        max_connections=config.max_connections or "server",
        max_connections_from=config.max_connections_from,
        databases=len(dsns),
        all_databases=config.all_databases or None,
        notify=len(config.notify) or None,
    )
    return asyncio.run(_run(options, config.http, http_settings))


def _http_settings(config: RunConfig, anonymous: bool | None) -> HttpSettings | None:
    """The HTTP API's settings when --http (or `http` in --config) asks for it."""
    if not config.http:
        return None
    parse_addr(config.http)
    settings = HttpSettings.from_config(config.extra, allow_anonymous_loopback=anonymous)
    return settings.with_run_token()


def _embedded() -> str:
    """Start the embedded server and say how to connect to it."""
    from pgtimers.cli.embedded import data_dir, embedded_dsn

    dsn = embedded_dsn()
    print(
        f"pgtimers: embedded PostgreSQL (data in {data_dir()}); connect with:\n  psql '{dsn}'",
        flush=True,
    )
    return dsn


async def _run(
    options: RunnerOptions, http: str | None = None, http_settings: HttpSettings | None = None
) -> int:
    from pgtimers.runner.service import Runner

    runner = Runner(options)
    runner.install_signal_handlers()
    if early_signals.received():
        runner.stop()  # it came before the runner's own handlers
    server = None
    if http:
        from pgtimers.http.server import start_http

        # the databases served now whose pgtimers the runner trusts (--all-databases: those
        # found so far; else of the --dsn list, whose first is the default)
        databases = runner.trusted_dsns
        try:
            server = await start_http(http, databases, http_settings)
        except HttpConfigError as exc:
            print(f"pgtimers run: {exc}", file=sys.stderr)
            return ExitCode.BAD_INPUT
        _say_http(server, http_settings)
        runner.options.console = server.public_url
    try:
        await runner.run()
    finally:
        if server is not None:
            await server.close()
    return ExitCode.FAILED if runner.gave_up else ExitCode.OK


def _say_http(server: HttpServer, settings: HttpSettings | None) -> None:
    """Log where the HTTP API listens; with a token made for this run, print the one
    line with it that a person opens (the token is written nowhere else)."""
    generated = settings is not None and settings.token_generated
    log.event(
        logging.INFO,
        "http_serving",
        url=server.url,
        token="generated" if generated else None,
    )
    if generated and settings is not None and settings.token is not None:
        print(
            f"pgtimers: console: {server.console_url(settings.token)}\n"
            "  (a token made for this run; the API takes it as Authorization: Bearer <token>)",
            flush=True,
        )


def _run_now(args: argparse.Namespace) -> int:
    """`pgtimers run NAME`: CALL timers.run(NAME) and print its result."""
    try:
        configured = run_config.file_dsns(run_config.load_file(args.config)) if args.config else []
    except ConfigError as exc:
        print(f"pgtimers run: {exc}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    given = given_dsns(args.dsn, configured)
    if len(given) > 1:
        print("pgtimers run NAME: give one --dsn, the database of the timer", file=sys.stderr)
        return ExitCode.BAD_INPUT
    with psycopg.connect(resolve_dsn(given[0] if given else None), autocommit=True) as conn:
        return admin.cmd_run_now(conn, args)

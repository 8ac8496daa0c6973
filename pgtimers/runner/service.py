"""The runner: serves one or more databases (or every database of a server that has
the schema) until SIGTERM/SIGINT, then stops claiming, lets running runs finish,
and returns; under systemd it says so (Type=notify) and feeds the watchdog while
every database's loop shows life."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import uuid
from dataclasses import dataclass, field

import asyncpg

from pgtimers.runner import log, systemd
from pgtimers.runner.budget import ConnectionBudget
from pgtimers.runner.clock import REAL, Clock, wait_any
from pgtimers.runner.connect import connect_kwargs
from pgtimers.runner.database import DatabaseRunner
from pgtimers.runner.discovery import installed_databases
from pgtimers.runner.notify_config import NotifyTarget
from pgtimers.runner.serving import Serving

# --all-databases: a database installed later is served within a minute
DISCOVER_EVERY = float(os.environ.get("PGTIMERS_DISCOVER_EVERY", "30"))
# A runner that serves no database for this long exits 1, so that its supervisor starts
# it again (and says so); 0 waits for ever.
GIVE_UP_AFTER = float(os.environ.get("PGTIMERS_GIVE_UP_AFTER", "300"))
# A database's control loop that showed no life for WatchdogSec (at least this long), or
# a worker's round trip unanswered that long past its deadline, is wedged: the watchdog
# is not fed, and systemd restarts the runner.
WEDGED_AFTER_MIN = 3.0
MONITOR_EVERY = 1.0


@dataclass
class RunnerOptions:
    """What to serve and how."""

    dsns: list[str]
    all_databases: bool = False
    workers: int = 2
    timezone: str | None = None
    # worker connections to each server (None: derived from its max_connections)
    max_connections: int | None = None
    max_connections_from: str = "default"
    # the DSN of each timer owner's login, for autonomous timers (--owner-dsn)
    owner_dsns: dict[str, str] = field(default_factory=dict)
    # the webhook targets of the config's [[notify]] sections
    notify: tuple[NotifyTarget, ...] = ()
    # the console's address (http://HOST:PORT) once --http serves it, for event links
    console: str | None = None
    runner_id: str = field(
        default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
    )


class Runner:
    """Serves databases until stop() (or a signal, with install_signal_handlers)."""

    def __init__(self, options: RunnerOptions, clock: Clock = REAL) -> None:
        self.options = options
        self.clock = clock
        self.stopping = asyncio.Event()
        self.serving: dict[str, DatabaseRunner] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._signals = 0
        self._discovered_at: float | None = None  # last discovery that worked
        self.budgets: dict[str, ConnectionBudget] = {}  # by server (host:port)
        self.gave_up = False

    def stop(self) -> None:
        """Stop claiming; running runs finish, then run() returns."""
        self.stopping.set()

    def trusted_dsns(self) -> list[str]:
        """The DSNs of the databases whose pgtimers passed the trust check (database.py),
        in the order served: what the HTTP API may call into."""
        order = self.options.dsns if not self.options.all_databases else list(self.serving)
        return [dsn for dsn in order if dsn in self.serving and self.serving[dsn].trusted]

    def install_signal_handlers(self) -> None:
        """SIGTERM or SIGINT: stop claiming; a second one cuts running runs off."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal, sig)

    def _on_signal(self, sig: signal.Signals) -> None:
        self._signals += 1
        if self._signals == 1:
            log.event(
                logging.INFO,
                "stopping",
                signal=sig.name,
                note="no new runs; waiting for running runs to finish",
            )
            self.stop()
        else:
            log.event(
                logging.WARNING,
                "stopping_now",
                signal=sig.name,
                note="running runs are cut off and roll back",
            )
            for task in self._tasks.values():
                task.cancel()

    async def run(self) -> None:
        """Serve until stopped (or given up: gave_up), then wait for the running runs
        to finish."""
        systemd.notify("READY=1")
        monitor = asyncio.create_task(self._monitor())
        try:
            if self.options.all_databases:
                await self._discover_forever()
            else:
                for dsn in self.options.dsns:
                    self._serve(dsn, leave_when_not_installed=False)
                await self.stopping.wait()
        finally:
            systemd.notify("STOPPING=1")
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)
            monitor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await monitor
        log.event(logging.INFO, "stopped", runner=self.options.runner_id)

    async def _monitor(self) -> None:
        """Every second: the status line, the watchdog (while no loop is wedged), and
        giving up when no database has been served for GIVE_UP_AFTER seconds."""
        interval = systemd.watchdog_interval()
        wedged_after = max(interval or 0.0, WEDGED_AFTER_MIN)
        fed_at = healthy_at = self.clock.now()
        status = ""
        while not self.stopping.is_set():
            now = self.clock.now()
            serving = [db for db in self.serving.values() if db.serving or db.parked]
            waiting = any(db.waiting_for_schema for db in self.serving.values())
            if serving or waiting or self._nothing_to_serve(now):
                healthy_at = now
            elif GIVE_UP_AFTER and now - healthy_at > GIVE_UP_AFTER:
                self._give_up(now - healthy_at)
                return
            parked = sum(1 for db in serving if db.parked)
            line = f"serving {len(serving)} of {len(self.serving)} database(s)"
            if parked:
                line += f", {parked} parked (short of connections)"
            if line != status:
                systemd.notify(f"STATUS={line}")
                status = line
            wedged = [db for db in self.serving.values() if db.wedged(now, wedged_after)]
            self._budget_lines(now)
            if interval is not None and not wedged and now - fed_at >= interval:
                systemd.notify("WATCHDOG=1")
                fed_at = now
            await wait_any(self.clock, self.stopping, timeout=MONITOR_EVERY)

    def _budget_lines(self, now: float) -> None:
        """Each server's connection_budget line, when there is pressure on it."""
        for budget in self.budgets.values():
            dbs = [db for db in self.serving.values() if db.s.budget is budget and not db.gone]
            budget.summary(now, len(dbs), sum(1 for db in dbs if db.parked))

    def budget(self, dsn: str) -> ConnectionBudget:
        """The connection budget of dsn's server, shared by all its databases."""
        kwargs = connect_kwargs(dsn)
        hosts, ports = kwargs.get("host") or "", kwargs.get("port") or ""
        if isinstance(hosts, list):
            server = ",".join(f"{h}:{p}" for h, p in zip(hosts, ports, strict=False))
        else:
            server = f"{hosts}:{ports}" if hosts or ports else "default"
        if server not in self.budgets:
            self.budgets[server] = ConnectionBudget(
                limit=self.options.max_connections,
                limit_from=self.options.max_connections_from,
                server=server,
                clock=self.clock,
            )
        return self.budgets[server]

    def _nothing_to_serve(self, now: float) -> bool:
        """--all-databases with none installed (found by a discovery that worked): waiting,
        not failing."""
        live = [db for db in self.serving.values() if not db.gone]
        recent = self._discovered_at is not None and now - self._discovered_at < 2 * DISCOVER_EVERY
        return self.options.all_databases and not live and recent

    def _give_up(self, seconds: float) -> None:
        log.event(
            logging.ERROR,
            "giving_up",
            runner=self.options.runner_id,
            note=f"no database served for {seconds:.0f}s; exiting 1 so that the supervisor"
            " starts the runner again (PGTIMERS_GIVE_UP_AFTER)",
        )
        self.gave_up = True
        self.stop()

    def _serve(self, dsn: str, leave_when_not_installed: bool) -> DatabaseRunner:
        serving = Serving(
            dsn=dsn,
            workers=self.options.workers,
            runner_id=self.options.runner_id,
            timezone=self.options.timezone,
            leave_when_not_installed=leave_when_not_installed,
            budget=self.budget(dsn),
            owner_dsns=self.options.owner_dsns,
            notify=self.options.notify,
            console=lambda: self.options.console,
        )
        db = DatabaseRunner(serving, self.stopping, self.clock)
        self.serving[dsn] = db
        self._tasks[dsn] = asyncio.create_task(db.run())
        return db

    async def _discover_forever(self) -> None:
        bases = self.options.dsns or []
        while not self.stopping.is_set():
            for base in bases:
                await self._discover(base)
            await wait_any(self.clock, self.stopping, timeout=DISCOVER_EVERY)

    async def _discover(self, base: str) -> None:
        """Serve each database of base's server that has the schema and is not served yet."""
        try:
            served = {dsn for dsn, task in self._tasks.items() if not task.done()}
            found = await installed_databases(
                base, self.budget(base), served, (self.stopping,), lambda: None
            )
        except (
            OSError,
            asyncpg.PostgresError,
            asyncpg.InterfaceError,
            asyncio.TimeoutError,
        ) as exc:
            log.event(logging.WARNING, "discovery_failed", error=str(exc))
            return
        self._discovered_at = self.clock.now()
        for dsn in found:
            task = self._tasks.get(dsn)
            if task is None or task.done():
                self._serve(dsn, leave_when_not_installed=True)

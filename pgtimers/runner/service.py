"""The runner: serves one or more databases (or every database of a server that has
the schema) until SIGTERM/SIGINT, then stops claiming, lets running runs finish,
and returns."""

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

from pgtimers.runner import log
from pgtimers.runner.database import DatabaseRunner, Serving
from pgtimers.runner.discovery import installed_databases

# --all-databases: a database installed later is served within a minute
DISCOVER_EVERY = float(os.environ.get("PGTIMERS_DISCOVER_EVERY", "30"))


@dataclass
class RunnerOptions:
    """What to serve and how."""

    dsns: list[str]
    all_databases: bool = False
    workers: int = 2
    timezone: str | None = None
    runner_id: str = field(
        default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
    )


class Runner:
    """Serves databases until stop() (or a signal, with install_signal_handlers)."""

    def __init__(self, options: RunnerOptions) -> None:
        self.options = options
        self.stopping = asyncio.Event()
        self.serving: dict[str, DatabaseRunner] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._signals = 0

    def stop(self) -> None:
        """Stop claiming; running runs finish, then run() returns."""
        self.stopping.set()

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
        """Serve until stopped, then wait for the running runs to finish."""
        if self.options.all_databases:
            await self._discover_forever()
        else:
            for dsn in self.options.dsns:
                self._serve(dsn, leave_when_not_installed=False)
            await self.stopping.wait()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        log.event(logging.INFO, "stopped", runner=self.options.runner_id)

    def _serve(self, dsn: str, leave_when_not_installed: bool) -> DatabaseRunner:
        serving = Serving(
            dsn=dsn,
            workers=self.options.workers,
            runner_id=self.options.runner_id,
            timezone=self.options.timezone,
            leave_when_not_installed=leave_when_not_installed,
        )
        db = DatabaseRunner(serving, self.stopping)
        self.serving[dsn] = db
        self._tasks[dsn] = asyncio.create_task(db.run())
        return db

    async def _discover_forever(self) -> None:
        bases = self.options.dsns or []
        while not self.stopping.is_set():
            for base in bases:
                await self._discover(base)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), DISCOVER_EVERY)

    async def _discover(self, base: str) -> None:
        """Serve each database of base's server that has the schema and is not served yet."""
        try:
            found = await installed_databases(base)
        except (
            OSError,
            asyncpg.PostgresError,
            asyncpg.InterfaceError,
            asyncio.TimeoutError,
        ) as exc:
            log.event(logging.WARNING, "discovery_failed", error=str(exc))
            return
        for dsn in found:
            task = self._tasks.get(dsn)
            if task is None or task.done():
                self._serve(dsn, leave_when_not_installed=True)

"""Serving one database: the control session (LISTEN, liveness, downtime rules,
clock watch, heartbeat, retention) and the workers that claim and run timers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from dataclasses import dataclass
from typing import Any

import asyncpg

from pgtimers import __version__
from pgtimers.runner import log
from pgtimers.runner.connect import close, connect
from pgtimers.runner.control import prune, set_timezone, wait_for_primary, watch_clock
from pgtimers.runner.queries import query
from pgtimers.runner.worker import Worker

LOOK_EVERY = 1.0  # seconds: the runner looks at least this often
# While what is due is held by someone else (a run of another runner, a long change),
# claims that found nothing are tried again this often, and at once when a NOTIFY or a
# new due time comes: a held row is picked up soon after it is let go.
RETRY_HELD = 0.25
HEARTBEAT_EVERY = 1.0  # seen_at: downtime starts when the last runner was last seen
PRUNE_EVERY = 600.0
RETRY_MAX = 10.0


class NotInstalled(Exception):
    """The database has no pgtimers schema (or one without the runner's functions)."""


@dataclass
class Serving:
    """How one database is served."""

    dsn: str
    workers: int
    runner_id: str
    timezone: str | None = None
    # with --all-databases: stop serving when the schema is gone instead of waiting for it
    leave_when_not_installed: bool = False


class DatabaseRunner:
    """Runs the due timers of one database until `stopping` is set."""

    def __init__(self, serving: Serving, stopping: asyncio.Event) -> None:
        self.s = serving
        self.stopping = stopping
        self.database = "?"
        self._work = asyncio.Condition()
        self._has_work = False
        self._running = 0  # base workers running a timer now
        self._recheck = asyncio.Event()
        self._notified = False  # a NOTIFY came since the control session last looked
        self._nothing_to_claim = False  # the last claim after a signal found nothing
        self._failed = asyncio.Event()
        self._leaving = False  # the control session ended: workers finish their run and go
        self.started = asyncio.Event()  # set once serving (tests wait on it)

    # ---------------------------------------------------------------- life
    async def run(self) -> None:
        """Serve, reconnecting after failures, until stopping (or the schema is gone)."""
        delay = 1.0
        while not self.stopping.is_set():
            try:
                await self._serve()
                delay = 1.0
            except NotInstalled:
                if self.s.leave_when_not_installed:
                    log.event(
                        logging.INFO,
                        "database_left",
                        database=self.database,
                        reason="no pgtimers schema",
                    )
                    return
                log.event(
                    logging.WARNING,
                    "not_installed",
                    database=self.database,
                    hint="run: pgtimers install --dsn <this database>",
                )
                delay = 30.0
            except (
                OSError,
                asyncpg.PostgresError,
                asyncpg.InterfaceError,
                asyncio.TimeoutError,
            ) as exc:
                if self.stopping.is_set():
                    return
                log.event(
                    logging.WARNING,
                    "database_unavailable",
                    database=self.database,
                    error=str(exc) or type(exc).__name__,
                    retry_in=f"{delay:g}s",
                )
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), delay)
            delay = min(delay * 2, RETRY_MAX)

    async def _serve(self) -> None:
        control = await connect(self.s.dsn, application_name="pgtimers runner control")
        try:
            self.database = await control.fetchval("SELECT current_database()")
            if not await control.fetchval(query("schema_installed")):
                raise NotInstalled
            await wait_for_primary(control, self.database, self.stopping)
            if self.stopping.is_set():
                return
            await set_timezone(control, self.database, self.s.timezone)
            started = await control.fetchval(
                query("runner_start"),
                self.s.runner_id,
                socket.gethostname(),
                os.getpid(),
                __version__,
                self.s.workers,
            )
            for skip in started.get("skipped") or []:
                log.skip_event(self.database, skip.get("timer"), skip)
            log.event(
                logging.INFO,
                "serving",
                database=self.database,
                runner=self.s.runner_id,
                workers=self.s.workers,
                burst=self._burst(),
                other_runners=started.get("other_runners"),
            )
            await control.add_listener("pgtimers", self._on_notify)
            await prune(control, self.database)
            await self._loop(control)
        finally:
            await close(control)

    def _burst(self) -> int:
        # --workers 1 runs one timer at a time; otherwise one more while all are busy
        return 0 if self.s.workers == 1 else 1

    # --------------------------------------------------------------- control
    def _on_notify(self, *_: Any) -> None:
        self._notified = True
        self._recheck.set()

    async def _loop(self, control: asyncpg.Connection) -> None:
        self._failed.clear()
        self._leaving = False
        workers = [
            Worker(self.s.dsn, self.database, self.s.runner_id, f"w{i + 1}")
            for i in range(self.s.workers + self._burst())
        ]
        tasks = [
            asyncio.create_task(self._work_loop(w, burst=i >= self.s.workers))
            for i, w in enumerate(workers)
        ]
        self.started.set()
        last_db: float | None = None
        last_mono = 0.0
        beat_at = prune_at = time.monotonic()
        signalled_at = -RETRY_HELD
        coming: float | None = None  # the due time still to come, at the last look
        try:
            while not self.stopping.is_set() and not self._failed.is_set():
                self._recheck.clear()
                notified, self._notified = self._notified, False
                row = await control.fetchrow(query("next_wake"))
                assert row is not None  # next_wake always gives one row
                db_now, wake_at, next_at = row
                mono = time.monotonic()
                db = db_now.timestamp()
                if last_db is not None:
                    await watch_clock(
                        control, self.database, self.s.runner_id, last_db, mono - last_mono, db_now
                    )
                last_db, last_mono = db, mono
                delay = LOOK_EVERY
                if next_at is not None:
                    delay = min(LOOK_EVERY, max(next_at.timestamp() - db, 0.0))
                if wake_at is not None and wake_at.timestamp() <= db:
                    # Something is due. While the last claims found nothing (what is due is
                    # held: being run), ask again only when something changed (a NOTIFY, a
                    # due time that came since) or after RETRY_HELD.
                    came = coming is not None and coming <= db
                    if (
                        not self._nothing_to_claim
                        or notified
                        or came
                        or mono - signalled_at >= RETRY_HELD
                    ):
                        self._nothing_to_claim = False
                        signalled_at = mono
                        await self._signal_work()
                    else:
                        delay = min(delay, RETRY_HELD - (mono - signalled_at))
                elif wake_at is not None:
                    delay = min(delay, wake_at.timestamp() - db)
                coming = None if next_at is None else next_at.timestamp()
                if mono - beat_at >= HEARTBEAT_EVERY:
                    await control.fetchval(query("runner_beat"), self.s.runner_id)
                    beat_at = mono
                if mono - prune_at >= PRUNE_EVERY:
                    await prune(control, self.database)
                    prune_at = mono
                await _wait_any(self._recheck, self.stopping, self._failed, timeout=delay)
        finally:
            await self._stop_workers(tasks, workers)
            if not control.is_closed():
                with contextlib.suppress(Exception):
                    await control.fetchval(query("runner_stop"), self.s.runner_id)
        if self._failed.is_set() and not self.stopping.is_set():
            raise OSError("a worker lost its connection")

    # --------------------------------------------------------------- workers
    async def _signal_work(self) -> None:
        async with self._work:
            self._has_work = True
            self._work.notify_all()

    async def _work_loop(self, worker: Worker, burst: bool) -> None:
        """Take work while there is some; the burst worker only while all others run.

        A base worker whose claim succeeded claims again at once, without waiting for
        the control session: so the keyed timers of a clock (one fire at a time, each
        its own transaction) fire back to back, even when another worker, finding the
        clock's fire lock taken, has just reported that there was nothing to do. It
        goes back to waiting when a claim finds nothing (or its run raised)."""
        again = False
        try:
            while not self.stopping.is_set() and not self._leaving:
                async with self._work:
                    if not again:
                        await self._work.wait_for(
                            lambda: (
                                self._leaving
                                or self.stopping.is_set()
                                or (
                                    self._has_work
                                    and (not burst or self._running >= self.s.workers)
                                )
                            )
                        )
                    if self._leaving or self.stopping.is_set():
                        return
                    if not burst:
                        self._running += 1
                        self._work.notify_all()
                try:
                    result = await worker.run_one()
                finally:
                    if not burst:
                        async with self._work:
                            self._running -= 1
                            self._work.notify_all()
                # {} is a run that raised (or a timer another run took): wait for the control
                # session, not a hot loop
                again = bool(result) and not burst
                if result is None:
                    async with self._work:
                        self._has_work = False
                    self._nothing_to_claim = True
                    self._recheck.set()
                elif result:
                    log.run_result(self.database, result)
                    if not again:
                        self._recheck.set()
                    # else the next look comes when this worker's claim finds nothing
        except (OSError, asyncpg.InterfaceError, asyncpg.PostgresError) as exc:
            if not self.stopping.is_set():
                log.event(
                    logging.WARNING,
                    "worker_lost",
                    database=self.database,
                    worker=worker.name,
                    error=str(exc) or type(exc).__name__,
                )
                self._failed.set()
        finally:
            await worker.close()

    async def _stop_workers(self, tasks: list[asyncio.Task[None]], workers: list[Worker]) -> None:
        """Stop claiming; let running runs finish (a failed session: cut them off)."""
        async with self._work:
            self._leaving = True
            self._work.notify_all()
        if self._failed.is_set() and not self.stopping.is_set():
            for task in tasks:
                task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for w in workers:
            await w.close()


async def _wait_any(*events: asyncio.Event, timeout: float) -> None:
    waits = [asyncio.create_task(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, timeout=max(timeout, 0.0), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()

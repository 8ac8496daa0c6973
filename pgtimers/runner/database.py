"""Serving one database: the control session (LISTEN, liveness, downtime rules, clock
watch, heartbeat, retention) and the workers that fire timers, each on its own connection
and each reconnecting alone: a lost worker connection touches only that worker, a lost
control session no running run, and nothing ends the serving but stopping."""

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
from pgtimers.runner.connect import PoolingError, check_own_session, close, connect
from pgtimers.runner.control import prune, set_timezone, wait_for_primary, watch_clock
from pgtimers.runner.queries import query
from pgtimers.runner.worker import Worker, is_connection_error

LOOK_EVERY = 1.0  # seconds: the runner looks at least this often
# While what is due is held by someone else (a run of another runner, a long change),
# claims that found nothing are tried again this often, and at once when a NOTIFY or a
# new due time comes: a held row is picked up soon after it is let go.
RETRY_HELD = 0.25
HEARTBEAT_EVERY = 1.0  # seen_at: downtime starts when the last runner was last seen
PRUNE_EVERY = 600.0
# Reconnecting: at once, then after 0.25 s, then every 0.5 s, so that a runner serves
# again within a second of the server taking connections. A control session that served
# for HEALTHY seconds ends an outage: the next one starts from "at once" again (and is
# logged), while one that fails as soon as it serves backs off.
RETRY_STEPS = (0.0, 0.25, 0.5)
HEALTHY = 1.0
# An error that is not the connection's (a bug, a broken schema): tried again this often.
RETRY_FAULT = 5.0
NOT_INSTALLED_RETRY = 30.0


# errors that mean the database cannot be reached or used now, not a bug of ours
_OUTAGE = (asyncio.TimeoutError, asyncpg.PostgresError)


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


class Backoff:
    """Waits between tries: RETRY_STEPS, the last repeated; from the start after a while
    of health."""

    def __init__(self) -> None:
        self.tries = 0

    def next_wait(self) -> float:
        """The wait before the next try."""
        wait = RETRY_STEPS[min(self.tries, len(RETRY_STEPS) - 1)]
        self.tries += 1
        return wait

    def healthy(self) -> None:
        """It worked: the next outage starts from the first step."""
        self.tries = 0


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
        self._leaving = False  # stopping: workers finish their run and go
        self.started = asyncio.Event()  # set once serving (tests wait on it)
        self.serving = False  # the control session is up and registered
        self.progress = time.monotonic()  # last sign of life, for the watchdog
        self.gone = False  # left for good (--all-databases: the schema is gone)
        self.waiting_for_schema = False  # reachable, but pgtimers is not installed
        self._served_at: float | None = None  # when the control session last began serving

    # ---------------------------------------------------------------- life
    async def run(self) -> None:
        """Serve until stopping: the control session and the workers, each reconnecting
        alone; any failure is logged and tried again, never the end of serving."""
        workers = [
            Worker(self.s.dsn, self.database, self.s.runner_id, f"w{i + 1}")
            for i in range(self.s.workers + self._burst())
        ]
        tasks = [
            asyncio.create_task(self._work_loop(w, burst=i >= self.s.workers))
            for i, w in enumerate(workers)
        ]
        try:
            await self._control_forever()
        finally:
            async with self._work:
                self._leaving = True
                self._work.notify_all()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _control_forever(self) -> None:
        backoff = Backoff()
        outage = False
        while not self.stopping.is_set():
            self._served_at = None
            wait = 0.0
            try:
                await self._serve()
            except asyncio.CancelledError:
                raise
            except NotInstalled:
                if self.s.leave_when_not_installed:
                    log.event(
                        logging.INFO,
                        "database_left",
                        database=self.database,
                        reason="no pgtimers schema",
                    )
                    self.gone = True
                    return
                log.event(
                    logging.WARNING,
                    "not_installed",
                    database=self.database,
                    hint="run: pgtimers install --dsn <this database>",
                )
                self.waiting_for_schema = True
                wait = NOT_INSTALLED_RETRY
            except Exception as exc:  # every failure is logged and tried again
                if self.stopping.is_set():
                    return
                if self._served_at is not None and time.monotonic() - self._served_at > HEALTHY:
                    backoff.healthy()  # it served a while: a new outage
                    outage = False
                wait = self._failed(exc, backoff, outage)
                outage = True
            finally:
                self.serving = False
            await self._pause(wait)

    def _failed(self, exc: Exception, backoff: Backoff, outage: bool) -> float:
        """Log a failure of the control session (an outage once, not every try); the wait."""
        if isinstance(exc, PoolingError):
            log.event(logging.ERROR, "pooled_connection", database=self.database, error=str(exc))
            return NOT_INSTALLED_RETRY
        if is_connection_error(exc) or isinstance(exc, _OUTAGE):
            wait = backoff.next_wait()
            if not outage:
                log.event(
                    logging.WARNING,
                    "database_unavailable",
                    database=self.database,
                    error=str(exc) or type(exc).__name__,
                    retry_in=f"{wait:g}s",
                )
            return wait
        log.event(
            logging.ERROR,
            "database_task_failed",
            database=self.database,
            error_type=type(exc).__name__,
            error=str(exc),
            retry_in=f"{RETRY_FAULT:g}s",
        )
        return RETRY_FAULT

    async def _pause(self, seconds: float) -> None:
        """Wait, showing life to the watchdog, unless stopping."""
        deadline = time.monotonic() + seconds
        while not self.stopping.is_set():
            self.progress = time.monotonic()
            left = deadline - self.progress
            if left <= 0:
                return
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), min(left, LOOK_EVERY))

    async def _serve(self) -> None:
        control = await connect(self.s.dsn, application_name="pgtimers runner control")
        try:
            self.database = await control.fetchval("SELECT current_database()")
            if not await control.fetchval(query("schema_installed")):
                raise NotInstalled
            await check_own_session(control, self.s.dsn)
            await wait_for_primary(control, self.database, self.stopping, self._pause)
            if self.stopping.is_set():
                return
            await set_timezone(control, self.database, self.s.timezone)
            await self._register(control)
            await control.add_listener("pgtimers", self._on_notify)
            await prune(control, self.database)
            self.serving = True
            self._served_at = time.monotonic()
            self.waiting_for_schema = False
            self.started.set()
            await self._signal_work()
            await self._loop(control)
        finally:
            if not control.is_closed():
                with contextlib.suppress(Exception):
                    await control.fetchval(query("runner_stop"), self.s.runner_id)
            await close(control)

    async def _register(self, control: asyncpg.Connection) -> None:
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

    def _burst(self) -> int:
        # --workers 1 runs one timer at a time; otherwise one more while all are busy
        return 0 if self.s.workers == 1 else 1

    # --------------------------------------------------------------- control
    def _on_notify(self, *_: Any) -> None:
        self._notified = True
        self._recheck.set()

    async def _loop(self, control: asyncpg.Connection) -> None:
        last_db: float | None = None
        last_mono = 0.0
        beat_at = prune_at = time.monotonic()
        signalled_at = -RETRY_HELD
        coming: float | None = None  # the due time still to come, at the last look
        while not self.stopping.is_set():
            self._recheck.clear()
            notified, self._notified = self._notified, False
            row = await control.fetchrow(query("next_wake"))
            assert row is not None  # next_wake always gives one row
            db_now, wake_at, next_at = row
            mono = self.progress = time.monotonic()
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
                retry = mono - signalled_at >= RETRY_HELD
                if not self._nothing_to_claim or notified or came or retry:
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
            await _wait_any(self._recheck, self.stopping, timeout=delay)

    # --------------------------------------------------------------- workers
    async def _signal_work(self) -> None:
        async with self._work:
            self._has_work = True
            self._work.notify_all()

    async def _wait_for_work(self, burst: bool) -> bool:
        """Until there is work for this worker (or stopping: False). Without a control
        session (lost, or being made again) the workers look by themselves every second."""

        def ready() -> bool:
            return (
                self._leaving
                or self.stopping.is_set()
                or (self._has_work and (not burst or self._running >= self.s.workers))
            )

        async with self._work:
            if not self.started.is_set():
                # nothing runs before the first registration has applied the downtime rules
                await self._work.wait_for(lambda: self.started.is_set() or self._leaving)
            if self.serving or burst:
                await self._work.wait_for(ready)
            else:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._work.wait_for(ready), LOOK_EVERY)
            if self._leaving or self.stopping.is_set():
                return False
            if not burst:
                self._running += 1
                self._work.notify_all()
            return True

    async def _work_loop(self, worker: Worker, burst: bool) -> None:
        """Take work while there is some; the burst worker only while all others run.

        A base worker whose fire ran something fires again at once, without waiting for
        the control session: so the keyed timers of a clock (one fire at a time, each its
        own transaction) fire back to back. It goes back to waiting when a claim finds
        nothing (or its run raised). A lost connection is this worker's alone: it logs
        once, makes it again (at once, then every half second) and goes on."""
        again = False
        backoff = Backoff()
        lost = False
        try:
            while not self.stopping.is_set() and not self._leaving:
                if not again and not await self._wait_for_work(burst):
                    return
                if again and not burst:
                    async with self._work:
                        self._running += 1
                try:
                    worker.database = self.database
                    result = await worker.run_one()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # a worker never ends by an error
                    again = False
                    lost = await self._worker_failed(worker, exc, backoff, lost)
                    continue
                finally:
                    if not burst:
                        async with self._work:
                            self._running -= 1
                            self._work.notify_all()
                if lost:
                    log.event(
                        logging.INFO, "worker_back", database=self.database, worker=worker.name
                    )
                    lost = False
                backoff.healthy()
                again = self._after_fire(result, burst)
        finally:
            await worker.close()

    async def _worker_failed(
        self, worker: Worker, exc: Exception, backoff: Backoff, lost: bool
    ) -> bool:
        """Log a worker's failure (a lost connection once), close it, wait; lost or not."""
        if self.stopping.is_set():
            return lost
        await worker.close()
        if is_connection_error(exc):
            if not lost:
                log.event(
                    logging.WARNING,
                    "worker_lost",
                    database=self.database,
                    worker=worker.name,
                    error=str(exc) or type(exc).__name__,
                )
            await self._pause(backoff.next_wait())
            return True
        log.event(
            logging.ERROR,
            "worker_failed",
            database=self.database,
            worker=worker.name,
            error_type=type(exc).__name__,
            error=str(exc),
        )
        await self._pause(1.0)
        return lost

    def _after_fire(self, result: dict[str, Any] | None, burst: bool) -> bool:
        """Note what a fire did; whether this worker fires again at once."""
        if result is None:
            self._has_work = False
            self._nothing_to_claim = True
            self._recheck.set()
            return False
        if not result:
            # a run that raised (or a timer another run took): wait for the control
            # session, not a hot loop
            self._recheck.set()
            return False
        log.run_result(self.database, result)
        # the burst worker goes back to waiting, where it fires again while all others
        # run; the control session is asked only when a claim finds nothing (above)
        return not burst


async def _wait_any(*events: asyncio.Event, timeout: float) -> None:
    waits = [asyncio.create_task(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, timeout=max(timeout, 0.0), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()

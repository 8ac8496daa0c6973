"""Serving one database: the control session (LISTEN, liveness, downtime rules, clock
watch, heartbeat, retention) and the workers that fire timers, each on its own connection
and each reconnecting alone: a lost worker connection touches only that worker, a lost
control session no running run, and nothing ends the serving but stopping. Short of
connections, the control session parks in turn (parking.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Sequence
from typing import Any

import asyncpg

from pgtimers import __version__
from pgtimers.runner import api_version, blocked, log
from pgtimers.runner.answers import parse_started
from pgtimers.runner.autonomous import OwnerSessions
from pgtimers.runner.blocked import BlockedWatch
from pgtimers.runner.budget import is_refused
from pgtimers.runner.clock import REAL, Clock, wait_any
from pgtimers.runner.clock_watch import ClockWatch
from pgtimers.runner.connect import (
    PoolingError,
    check_own_session,
    close,
    connect,
    database_name,
)
from pgtimers.runner.control import prune, set_timezone, wait_for_primary
from pgtimers.runner.delivery import Deliveries, stop_quietly
from pgtimers.runner.held import Held
from pgtimers.runner.life import Life
from pgtimers.runner.lost import LostRuns
from pgtimers.runner.parking import Parking
from pgtimers.runner.queries import query
from pgtimers.runner.serving import HEALTHY, LOOK_EVERY, Backoff, Serving
from pgtimers.runner.session import Session
from pgtimers.runner.trouble import Trouble
from pgtimers.runner.work import PoolWorker, WorkerPool
from pgtimers.runner.worker import Worker, is_connection_error

# While what is due is held by someone else (a run of another runner, a long change),
# claims that found nothing are tried again this often, and at once when a NOTIFY or a
# new due time comes: a held row is picked up soon after it is let go.
RETRY_HELD = 0.25
HEARTBEAT_EVERY = 1.0  # seen_at: downtime starts when the last runner was last seen
PRUNE_EVERY = 600.0
# Registering waits up to 10 s for the start lock and skips a downtime's due times.
REGISTER_DEADLINE = 60.0
# An error that is not the connection's (a bug, a broken schema): tried again this often.
RETRY_FAULT = 5.0
NOT_INSTALLED_RETRY = 30.0


# errors that mean the database cannot be reached or used now, not a bug of ours
_OUTAGE = (asyncio.TimeoutError, asyncpg.PostgresError)


class NotInstalled(Exception):
    """The database has no pgtimers schema (or one without the runner's functions)."""


class Untrusted(Exception):
    """pgtimers in the database belongs to a role the runner's login must not run code of
    (queries.sql `trust`): the runner calls nothing there."""

    def __init__(self, what: str, owner: str, login: str, login_super: bool) -> None:
        self.owner = owner
        rule = (
            "a runner that logs in as a superuser runs only code a superuser owns"
            if login_super
            else "a runner runs only code of a superuser, of its own login, or of a role"
            " that can act as its login"
        )
        super().__init__(
            f'{what} belongs to role "{owner}", and the runner logs in as "{login}": {rule}.'
            f" Install pgtimers there as a trusted role, or serve it with a runner whose"
            f' login "{owner}" can act as (docs/security.md, what a runner trusts)'
        )


class DatabaseRunner:
    """Runs the due timers of one database until `stopping` is set: its control session,
    holding the database's parts and wiring them together: its signs of life (Life),
    its workers (WorkerPool, with their slot hand-off, WorkerSlots) and its parking
    (Parking), all on one policy clock."""

    def __init__(self, serving: Serving, stopping: asyncio.Event, clock: Clock = REAL) -> None:
        self.s = serving
        self.stopping = stopping
        self.clock = clock
        self.database = database_name(serving.dsn)  # current_database() once connected
        self.life = Life(clock, stopping)  # signs of life for the watchdog, and pauses
        self._recheck = asyncio.Event()
        self._notified = False  # a NOTIFY came since the control session last looked
        self.started = asyncio.Event()  # set once serving (tests wait on it)
        self.serving = False  # the control session is up and registered
        self.trouble = Trouble(lambda: self.database, clock.now)  # the server refusing work
        self.held = Held(lambda: self.database, clock.now)  # timers whose run yielded
        self.pool = WorkerPool(
            serving, self, self.life, lambda: self.database, self.trouble, self._recheck.set
        )
        self.parking = Parking(serving, clock, lambda: self.database, self.pool, self.life.alive)
        self._blocked = BlockedWatch(clock.now)  # when to say that every worker waits
        self.gone = False  # left for good (--all-databases: the schema is gone)
        self.waiting_for_schema = False  # reachable, but pgtimers is not installed
        self.trusted = False  # the last trust check of its pgtimers passed
        self._refusal = ""  # the last refusal said (said once while it holds)
        self._served_at: float | None = None  # when the control session last began serving
        self._pressure = asyncio.Event()  # another database waits for a slot
        self._checked = False  # the session check (no transaction pooling) passed
        self._zone_set = False
        self._pruned_at = -PRUNE_EVERY
        # the webhook deliveries of its events, when the config has [[notify]] sections
        self.deliveries: Deliveries | None = None
        if serving.notify:
            self.deliveries = Deliveries(
                serving,
                lambda: self.database,
                lambda: self.trusted and (self.serving or self.parked),
                self.pool.stops(),
                self.life.alive,
                clock,
            )

    @property
    def parked(self) -> bool:
        """The control session parked (and is not back yet): it still serves."""
        return self.parking.parked

    @property
    def progress(self) -> float:
        """The last sign of life (policy clock), for the watchdog."""
        return self.life.progress

    @property
    def workers(self) -> Sequence[PoolWorker]:
        """The database's workers (while it is served)."""
        return self.pool.workers

    def wedged(self, now: float, after: float) -> bool:
        """Whether the control loop showed no life for `after` seconds, or a worker's round
        trip is unanswered `after` seconds past its deadline (which should have cut it off):
        the watchdog is then not fed."""
        if self.gone:
            return False
        late = [
            w for w in self.pool.workers if w.answer_by is not None and now > w.answer_by + after
        ]
        return now - self.progress > after or bool(late)

    # ---------------------------------------------------------------- life
    async def run(self) -> None:
        """Serve until stopping: the control session and the workers, each reconnecting
        alone; any failure is logged and tried again, never the end of serving."""
        lost = LostRuns(self.clock.now)  # its workers' runs whose session ended
        # autonomous runs' owner sessions count in the connection budget
        owners = OwnerSessions(
            self.s.dsn,
            self.s.owner_dsns,
            lambda gave_up: self.s.budget.slot(
                self.s.dsn, (*self.pool.stops(), gave_up), self.life.alive
            ),
            clock=self.clock,
        )
        workers = [
            Worker(
                self.s.dsn,
                self.database,
                self.s.runner_id,
                f"w{i + 1}",
                lost,
                self.trouble,
                self.held,
                owners,
                clock=self.clock,
            )
            for i in range(self.s.workers + self.pool.burst)
        ]
        working = asyncio.create_task(self.pool.run(workers))
        self.s.budget.on_wanted(self._slot_wanted)
        # its own task: a POST never holds up a fire
        delivering = asyncio.create_task(self.deliveries.run()) if self.deliveries else None
        try:
            await self._control_forever()
            await self.parking.leave_parked()
        finally:
            self.s.budget.forget(self._slot_wanted)
            await self.pool.leave()
            await asyncio.gather(working, stop_quietly(delivering), return_exceptions=True)

    def _slot_wanted(self) -> None:
        """The budget's call when a worker or control session (of any database) starts to
        wait for a slot: wake the control session, to park if it is another's turn (the
        pool wakes its idle workers itself)."""
        self._pressure.set()

    async def _control_forever(self) -> None:
        backoff = Backoff()
        outage = False
        while not self.stopping.is_set():
            self._served_at = None
            wait = 0.0
            try:
                await self._serve()
                if self.parked:
                    back_in = self.parking.back_at - self.clock.now()
                    await self.life.pause(back_in, wake=self.parking.bell)
                    continue
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
            except api_version.ApiMismatch as exc:
                self._refusal = api_version.refused(
                    exc, self.database, self._refusal, NOT_INSTALLED_RETRY
                )
                # an install fixes an older schema; an older runner waits to give up
                self.waiting_for_schema = exc.schema_older
                wait = NOT_INSTALLED_RETRY
            except Untrusted as exc:
                self.trusted = False
                if str(exc) != self._refusal:
                    self._refusal = str(exc)
                    log.event(
                        logging.ERROR,
                        "database_untrusted",
                        database=self.database,
                        owner=exc.owner,
                        error=str(exc),
                        retry_in=f"{NOT_INSTALLED_RETRY:g}s",
                    )
                self.waiting_for_schema = True
                wait = NOT_INSTALLED_RETRY
            except Exception as exc:  # every failure is logged and tried again
                self._checked = False
                self.parking.unpark()
                if self.stopping.is_set():
                    return
                served_at = self._served_at
                if served_at is not None and self.clock.now() - served_at > HEALTHY:
                    backoff.healthy()  # it served a while: a new outage
                    outage = False
                wait = self._failed(exc, backoff, outage)
                outage = True
            finally:
                self.serving = False
            await self.life.pause(wait)

    def _failed(self, exc: Exception, backoff: Backoff, outage: bool) -> float:
        """Log a failure of the control session (an outage once, not every try); the wait."""
        if isinstance(exc, PoolingError):
            log.event(logging.ERROR, "pooled_connection", database=self.database, error=str(exc))
            return NOT_INSTALLED_RETRY
        if is_connection_error(exc) or isinstance(exc, _OUTAGE):
            if is_refused(exc):
                self.s.budget.refused()  # counted in the connection_budget line
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

    async def _serve(self) -> None:
        """Serve with a control session, in a slot of the budget, until stopping or
        parked."""
        budget = self.s.budget
        async with budget.slot(self.s.dsn, (self.stopping,), self.life.alive, control=True) as got:
            if got:
                await self._serve_in_slot()

    async def _serve_in_slot(self) -> None:
        control = await connect(self.s.dsn, "pgtimers runner control", "control", self.database)
        try:
            await self.s.budget.learn(control)
            self.database = control.database = await control.fetchval("SELECT current_database()")
            if not await control.fetchval(query("schema_installed")):
                raise NotInstalled
            # before anything of the database runs: whose code would it be (docs/security.md)
            untrusted = await control.fetchrow(query("trust"))
            if untrusted is not None:
                raise Untrusted(*untrusted)
            self.trusted = True
            await api_version.check(control)  # may it call the schema's routines
            self._refusal = ""
            if not self._checked:
                # the check opens a second connection for a moment: it takes a slot
                stops = self.pool.stops()
                async with self.s.budget.slot(self.s.dsn, stops, self.life.alive) as got:
                    if not got:
                        return
                    await check_own_session(control, self.s.dsn)
                self._checked = True
            await wait_for_primary(control, self.database, self.stopping, self.life.pause)
            if self.stopping.is_set():
                return
            if not self._zone_set:
                await set_timezone(control, self.database, self.s.timezone)
                self._zone_set = True
            await self._register(control)
            await control.add_listener("pgtimers", self._on_notify)
            if self.deliveries is not None:
                await control.add_listener("pgtimers_events", self._on_event)
            if self.clock.now() - self._pruned_at >= PRUNE_EVERY:
                await prune(control, self.database)
                self._pruned_at = self.clock.now()
            self.serving = True
            self.parking.unpark()
            self._served_at = self.clock.now()
            self.waiting_for_schema = False
            self.started.set()
            # no signal here: the loop's first look signals the workers if anything is
            # due, so that an idle database opens no worker connection
            await self._loop(control)
        finally:
            if not control.is_closed() and not self.parked:
                with contextlib.suppress(Exception):
                    await control.fetchval(query("runner_stop"), self.s.runner_id)
            await close(control)

    async def _register(self, control: Session) -> None:
        # it may wait 10 s for another runner's start (its lock), then skip the due times
        # of a downtime for every timer: longer than a quick statement
        with control.deadline_of(REGISTER_DEADLINE):
            answer = await control.fetchval(
                query("runner_start"),
                self.s.runner_id,
                socket.gethostname(),
                os.getpid(),
                __version__,
                self.s.workers,
            )
        started = parse_started(answer)
        for skip in started.skipped:
            log.skip_event(self.database, skip.get("timer"), skip)
        if started.resumed:
            return  # back from parking: it served all along
        log.event(
            logging.INFO,
            "serving",
            database=self.database,
            runner=self.s.runner_id,
            workers=self.s.workers,
            burst=self.pool.burst,
            other_runners=started.other_runners,
        )

    # --------------------------------------------------------------- control
    def _on_event(self, *_: Any) -> None:
        if self.deliveries is not None:
            self.deliveries.wake.set()

    def _on_notify(self, *_: Any) -> None:
        self._notified = True
        self._recheck.set()

    async def _loop(self, control: Session) -> None:
        """Look at what is due (at least every second, at once on a NOTIFY): signal the
        workers, beat, prune, watch the clock; park when it is another database's turn."""
        watch = ClockWatch(self.database, self.s.runner_id)
        pool, parking = self.pool, self.parking
        beat_at = prune_at = self.clock.now()
        signalled_at = -RETRY_HELD
        coming: float | None = None  # the due time still to come, at the last look
        while not self.stopping.is_set():
            self._recheck.clear()
            self._pressure.clear()
            notified, self._notified = self._notified, False
            db_now, wake_at, next_at = await watch.next_wake(control)
            self.life.alive()
            mono = self.life.progress
            db = db_now.timestamp()
            await blocked.watch(control, self.database, pool.workers, self._blocked)
            delay = LOOK_EVERY
            if next_at is not None:
                delay = min(LOOK_EVERY, max(next_at.timestamp() - db, 0.0))
            if wake_at is not None and wake_at.timestamp() <= db:
                # Something is due. While the last claims found nothing (what is due is
                # held: being run), ask again only when something changed (a NOTIFY, a
                # due time that came since) or after RETRY_HELD.
                came = coming is not None and coming <= db
                retry = mono - signalled_at >= RETRY_HELD
                if not pool.nothing_to_claim or notified or came or retry:
                    pool.nothing_to_claim = False
                    signalled_at = mono
                    await pool.signal_work()
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
                prune_at = self._pruned_at = mono
            if self.s.budget.doorbells.look_now(mono):
                await parking.answer_doorbells(control)
            # what parking waits for: the next due time (a held one counts from the next)
            due = wake_at if wake_at is not None and not pool.nothing_to_claim else next_at
            due_in = None if due is None else due.timestamp() - db
            look_at = mono + delay
            while True:
                since = self.clock.now() - mono
                if await parking.park_if_turn(control, db_now, due_in, since, self._served_at):
                    return
                left = look_at - self.clock.now()
                wakes = (self._recheck, self.stopping, self._pressure)
                await wait_any(self.clock, *wakes, timeout=left)
                # another database waits for a slot: see whether to park, without a look
                if self._recheck.is_set() or self.stopping.is_set():
                    break
                if self.clock.now() >= look_at:
                    break
                self._pressure.clear()

"""Parking a database's control session when the runner is short of connections.

The control session holds a slot of the server's connection budget. While another
database waits for a slot and nothing of this one is due soon (or it has had its turn),
it parks: it tells the database when it will be back (timers.runners.parked_until: it
still serves the database, and CALL timers.run waits for it), closes, and comes back
before the next due time, when somebody waits for it there (doorbell.py), or after
PARK_LOOK seconds to see new and changed timers.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
from collections.abc import Callable
from typing import Protocol

import asyncpg

from pgtimers.runner.clock import Clock
from pgtimers.runner.connect import close, connect
from pgtimers.runner.queries import query
from pgtimers.runner.serving import Serving
from pgtimers.runner.session import Session

# Parking (short of connections): a control session parks when nothing is due for
# PARK_MIN seconds, or, after CONTROL_SLICE seconds of serving and for a parked database
# that waits to come back, when nothing is due for WAKE_LEAD. It comes back WAKE_LEAD
# before the next due time, and after PARK_LOOK seconds at the latest (a new or changed
# timer: NOTIFY does not reach a closed session; a run-now request rings the doorbell).
# It promises to be back by then plus PARK_GRACE: a wait for a slot may take that long.
PARK_MIN = 1.0
CONTROL_SLICE = 1.0
WAKE_LEAD = 0.25
PARK_LOOK = float(os.environ.get("PGTIMERS_PARK_LOOK", "30"))
PARK_GRACE = 30.0
LEAVE_WAIT = 5.0  # stopping while parked: at most this long to say so


class Workload(Protocol):
    """What parking needs to know of its database's workers (work.WorkerPool)."""

    @property
    def has_work(self) -> bool:
        """Whether there is work for the workers."""
        ...

    @property
    def running(self) -> int:
        """Base workers running a timer now."""
        ...

    async def nudge(self) -> None:
        """Wake the workers (their idle slots go back while parked)."""
        ...


class Parking:
    """Whether one database's control session is parked, until when, its doorbell; when
    to park, and leaving while parked."""

    def __init__(
        self,
        serving: Serving,
        clock: Clock,
        database: Callable[[], str],
        work: Workload,
        alive: Callable[[], None],
    ) -> None:
        self.s = serving
        self.clock = clock
        self._database = database
        self._work = work
        self._alive = alive
        self.parked = False  # the control session parked (and is not back yet)
        self.back_at = 0.0  # parked: when to come back (clock)
        self.bell: asyncio.Event | None = None  # parked: rung when somebody waits here

    async def park_if_turn(
        self,
        control: Session,
        db_now: dt.datetime,
        due_in: float | None,
        since: float,
        served_at: float | None,
    ) -> bool:
        """Park (and True) when another database waits for a slot, this one has nothing
        to do, and nothing is due soon or it has had its turn; `since`: seconds since
        db_now was read; `served_at`: when the control session began serving (clock)."""
        budget = self.s.budget
        work = self._work
        if not budget.waiting or work.has_work or work.running or served_at is None:
            return False
        left = None if due_in is None else due_in - since
        far = left is None or left >= PARK_MIN
        if not far:
            # due soon: it parks only to let a parked database back in (after its own
            # turn), never for workers: it would be back in a moment, for a new connection
            turn_over = self.clock.now() - served_at >= CONTROL_SLICE
            if not turn_over or left is None or left < WAKE_LEAD:
                return False
        if not budget.control_turn(self.s.dsn, controls_only=not far):
            return False
        away = PARK_LOOK if left is None else min(PARK_LOOK, left - WAKE_LEAD)
        until = db_now + dt.timedelta(seconds=since + away + PARK_GRACE)
        await control.fetchval(query("runner_park"), self.s.runner_id, until)
        self.parked = True
        self.bell = budget.doorbells.hang(self._database())
        self.back_at = self.clock.now() + away
        await work.nudge()  # its idle workers give their slots back too
        return True

    async def answer_doorbells(self, control: Session) -> None:
        """Wake the parked databases of this server where somebody waits for the runner."""
        try:
            rows = await control.fetch(query("ringing"))
        except asyncpg.UndefinedFunctionError:
            return  # this database's pgtimers is older than the doorbell
        self.s.budget.doorbells.ring(row[0] for row in rows)

    async def leave_parked(self, stops: tuple[asyncio.Event, ...] = ()) -> None:
        """Stopping while parked: come back for a moment to say the runner stopped, so
        that nobody waits for it until its parked_until (best effort, LEAVE_WAIT s at
        most, or until one of `stops`)."""
        if not self.parked:
            return
        gave_up = asyncio.Event()
        giving_up = asyncio.ensure_future(self._give_up(gave_up))
        try:
            with contextlib.suppress(Exception):
                async with self.s.budget.slot(self.s.dsn, (gave_up, *stops), self._alive) as got:
                    if got:
                        conn = await connect(
                            self.s.dsn, "pgtimers runner control", "control", self._database()
                        )
                        try:
                            await conn.fetchval(query("runner_stop"), self.s.runner_id)
                        finally:
                            await close(conn)
        finally:
            giving_up.cancel()
        self.unpark()

    async def _give_up(self, gave_up: asyncio.Event) -> None:
        await self.clock.sleep(LEAVE_WAIT)
        gave_up.set()

    def unpark(self) -> None:
        """Back (or given up on): not parked, no doorbell."""
        self.parked = False
        self.s.budget.doorbells.take_down(self._database())

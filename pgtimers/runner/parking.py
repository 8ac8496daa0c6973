"""Parking a database's control session when the runner is short of connections.

The control session holds a slot of the server's connection budget. While another
database waits for a slot and nothing of this one is due soon (or it has had its turn),
it parks: it tells the database when it will be back (timers.runners.parked_until: it
still serves the database, and CALL timers.run waits for it), closes, and comes back
before the next due time, when somebody waits for it there (doorbell.py), or after
PARK_LOOK seconds to see new and changed timers.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import datetime as dt
import os
import time

import asyncpg

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


class Parking(abc.ABC):
    """The parking side of a DatabaseRunner: when to park, the doorbells, leaving."""

    s: Serving
    database: str
    parked: bool
    _back_at: float
    _bell: asyncio.Event | None
    _served_at: float | None
    _running: int

    @property
    @abc.abstractmethod
    def _has_work(self) -> bool:
        """Whether there is work for the workers (WorkerPool's)."""

    @abc.abstractmethod
    def _alive(self) -> None:
        """Show life to the watchdog (WorkerPool's)."""

    @abc.abstractmethod
    async def _nudge(self) -> None:
        """Wake this database's workers (WorkerPool's)."""

    async def _park_if_turn(
        self, control: Session, db_now: dt.datetime, due_in: float | None, since: float
    ) -> bool:
        """Park (and True) when another database waits for a slot, this one has nothing
        to do, and nothing is due soon or it has had its turn; `since`: seconds since
        db_now was read."""
        budget = self.s.budget
        if not budget.waiting or self._has_work or self._running or self._served_at is None:
            return False
        left = None if due_in is None else due_in - since
        far = left is None or left >= PARK_MIN
        if not far:
            # due soon: it parks only to let a parked database back in (after its own
            # turn), never for workers: it would be back in a moment, for a new connection
            turn_over = time.monotonic() - self._served_at >= CONTROL_SLICE
            if not turn_over or left is None or left < WAKE_LEAD:
                return False
        if not budget.control_turn(self.s.dsn, controls_only=not far):
            return False
        away = PARK_LOOK if left is None else min(PARK_LOOK, left - WAKE_LEAD)
        until = db_now + dt.timedelta(seconds=since + away + PARK_GRACE)
        await control.fetchval(query("runner_park"), self.s.runner_id, until)
        self.parked = True
        self._bell = self.s.budget.doorbells.hang(self.database)
        self._back_at = time.monotonic() + away
        await self._nudge()  # its idle workers give their slots back too
        return True

    async def _answer_doorbells(self, control: Session) -> None:
        """Wake the parked databases of this server where somebody waits for the runner."""
        try:
            rows = await control.fetch(query("ringing"))
        except asyncpg.UndefinedFunctionError:
            return  # this database's pgtimers is older than the doorbell
        self.s.budget.doorbells.ring(row[0] for row in rows)

    async def leave_parked(self) -> None:
        """Stopping while parked: come back for a moment to say the runner stopped, so
        that nobody waits for it until its parked_until (best effort, 5 s at most)."""
        if not self.parked:
            return
        gave_up = asyncio.Event()
        asyncio.get_running_loop().call_later(5.0, gave_up.set)
        with contextlib.suppress(Exception):
            async with self.s.budget.slot(self.s.dsn, (gave_up,), self._alive) as got:
                if got:
                    conn = await connect(
                        self.s.dsn, "pgtimers runner control", "control", self.database
                    )
                    try:
                        await conn.fetchval(query("runner_stop"), self.s.runner_id)
                    finally:
                        await close(conn)
        self._unpark()

    def _unpark(self) -> None:
        """Back (or given up on): not parked, no doorbell."""
        self.parked = False
        self.s.budget.doorbells.take_down(self.database)

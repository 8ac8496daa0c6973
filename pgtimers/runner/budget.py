"""The connection budget: a cap on all the connections the runner opens to one PostgreSQL
server (control sessions, workers, short probes), shared by every database it serves there.

A slot is one open connection. A database's control session takes one while it serves
the database and gives it back when it parks (parking.py: it closes while nothing is
due soon and another database waits for a slot); a worker takes one before it connects
and gives it back when it closes: after its connection was idle for IDLE_CLOSE seconds,
or after a fire while another database waits. Slots go to the waiting database that holds
the fewest, the longest waiting first, so no database starves while another has a
backlog; control sessions hold at most all slots but one, which stays for workers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from pgtimers.runner import log
from pgtimers.runner.clock import REAL, Clock
from pgtimers.runner.doorbell import Doorbells
from pgtimers.runner.queries import query

# Without --max-connections: a quarter of the connections the server gives ordinary
# logins (max_connections less superuser_reserved_connections and, on 16+,
# reserved_connections), at most DEFAULT_CAP and at least MIN_CAP; the other three
# quarters stay for the applications.
DEFAULT_CAP = 20
MIN_CAP = 2  # a control session and a worker
SHARE_OF_SERVER = 4
# A worker's connection that was idle this long closes, so that an idle database holds
# only its control session. Long enough that a timer firing every few seconds (or every
# half minute) keeps its connection; short enough that a burst of work is soon forgotten.
IDLE_CLOSE = float(os.environ.get("PGTIMERS_IDLE_CLOSE", "30"))
# While a worker of another database waits for a slot, a worker gives its slot back
# (closes its connection) once a claim finds nothing, or after it has held the slot this
# long. A new connection costs about 60 ms (connecting, the first fire in a new server
# session, closing) against 1-2 ms for a fire on a warm one: giving a slot back after
# every fire would spend the budget on connecting, while a slice bounds the wait of the
# other databases.
SLICE = 0.5
# While there is pressure (a worker waited for a slot, or the server refused a
# connection), one connection_budget line this often, instead of a line per wait.
SUMMARY_EVERY = 60.0
# When the server refuses a connection (it is full: other clients, a budget larger than
# the server), the budget holds at most what it held then, for this long, so that the
# databases take the slots that work in turn instead of each trying the server alone.
CEILING_FOR = 30.0
LOOK_EVERY = 1.0  # a waiter shows life (and sees a stop) at least this often

# SQLSTATE 53300: too many connections, or the remaining slots are reserved
REFUSED = "53300"


def is_refused(exc: BaseException) -> bool:
    """Whether the server refused a connection for want of connection slots."""
    return getattr(exc, "sqlstate", None) == REFUSED


@dataclass
class _Waiter:
    database: str
    granted: asyncio.Future[None]
    since: float
    control: bool = False


@dataclass
class ConnectionBudget:
    """The slots of one server: `limit` of them (None: not known yet, from the server)."""

    limit: int | None = None
    limit_from: str = "default"
    server: str = ""
    held_by: Counter[str] = field(default_factory=Counter)
    held_control: int = 0  # of them, by control sessions
    _waiters: list[_Waiter] = field(default_factory=list)
    _refused: int = 0  # connections the server refused since the last summary
    _waited_max = 0.0  # the longest wait for a slot since the last summary
    _said_at: float | None = None  # when the last summary was logged
    _asked: bool = False  # the server's settings were asked for
    _ceiling: int | None = None  # at most this many, since the server refused one
    _ceiling_at: float = 0.0
    _granted_at: dict[str, int] = field(default_factory=dict)  # each one's last slot: its number
    _grants: int = 0
    # called when a worker starts to wait for a slot: workers idling on one give it back
    _wanted: list[Callable[[], None]] = field(default_factory=list)
    # slots promised by take_turn and not yet given back, by database
    _promised: Counter[str] = field(default_factory=Counter)
    # the parked databases of this server, woken when a session there waits for the runner
    doorbells: Doorbells = field(default_factory=Doorbells)
    clock: Clock = REAL  # waits, ceilings and summaries are measured by it

    def on_wanted(self, callback: Callable[[], None]) -> None:
        """Call `callback` whenever a worker starts to wait for a slot (a pool wakes its
        idle workers, which give theirs back when it is another's turn)."""
        self._wanted.append(callback)

    def forget(self, callback: Callable[[], None]) -> None:
        """No more calls of `callback` (its pool has stopped)."""
        if callback in self._wanted:
            self._wanted.remove(callback)

    @property
    def held(self) -> int:
        """Slots held now: the runner's worker and probe connections to this server."""
        return sum(self.held_by.values())

    @property
    def short(self) -> bool:
        """Whether the slots are short: somebody waits for one, or a database is parked."""
        return bool(self._waiters) or self.doorbells.hung > 0

    @property
    def waiting(self) -> int:
        """Workers (and probes) waiting for a slot now."""
        return len(self._waiters)

    async def learn(self, conn: asyncpg.Connection) -> None:
        """Without a given limit: derive it from the server's settings (once)."""
        if self.limit is not None or self._asked:
            return
        self._asked = True
        try:
            row = await conn.fetchrow(query("connection_settings"))
            assert row is not None
            logins = int(row[0]) - int(row[1]) - int(row[2])
            self.limit = max(MIN_CAP, min(DEFAULT_CAP, logins // SHARE_OF_SERVER))
            note = (
                f"a quarter of the server's {logins} connections for logins,"
                f" {MIN_CAP} to {DEFAULT_CAP}"
            )
        except (asyncpg.PostgresError, AssertionError, ValueError) as exc:
            self.limit, note = DEFAULT_CAP, f"the server's settings unread: {exc}"
        log.event(
            logging.INFO,
            "connection_budget",
            server=self.server or None,
            limit=self.limit,
            limit_from=self.limit_from,
            note=note,
        )
        self._grant()

    def others_waiting(self, database: str) -> bool:
        """Whether a worker of a database that holds fewer slots than `database` waits for
        one and no slot given back is already on its way to it: `database` should give one
        back. (A database that holds as many waits for a slot to come free: it asks for
        more than its share.)"""
        return self._poorer(database) > sum(self._promised.values())

    def _poorer(self, database: str) -> int:
        """Waiters of the databases that hold fewer slots than `database`."""
        mine = self.held_by[database]
        return sum(
            1 for w in self._waiters if w.database != database and self.held_by[w.database] < mine
        )

    def _promise(self, database: str, waiters: int) -> bool:
        """When more wait than slots are promised, `database` promises one more."""
        if waiters <= sum(self._promised.values()):
            return False
        self._promised[database] += 1
        return True

    def control_turn(self, database: str, controls_only: bool = False) -> bool:
        """Whether a control session of `database` with nothing to do should give its slot
        back (park): a worker or control session (`controls_only`: a control session) of
        another database waits, and no slot given back is already on its way to it; if so,
        promised as in take_turn."""
        others = sum(
            1 for w in self._waiters if w.database != database and (w.control or not controls_only)
        )
        return self._promise(database, others)

    def take_turn(self, database: str) -> bool:
        """others_waiting, and if so this caller gives a slot back: promised until the
        database's next release, so that one waiter makes one holder give one back (the
        idle workers of every database are woken together: without the count, all of them
        closed their connections for one waiter, and reconnected a moment later)."""
        return self._promise(database, self._poorer(database))

    async def acquire(
        self,
        database: str,
        stops: tuple[asyncio.Event, ...],
        alive: Callable[[], None],
        control: bool = False,
    ) -> bool:
        """A slot for `database` (for its control session: `control`), waiting in turn;
        False (and no slot) when a stop came. Calls alive() at least every second while
        it waits."""
        if not self._waiters and self._free(control):
            self._take(database, control)
            return True
        waiter = _Waiter(
            database, asyncio.get_running_loop().create_future(), self.clock.now(), control
        )
        self._waiters.append(waiter)
        self._grant()
        for wanted in list(self._wanted):
            wanted()
        kept = False
        try:
            while not waiter.granted.done() and not any(s.is_set() for s in stops):
                alive()
                self._grant()  # a ceiling may have lifted
                waits: list[asyncio.Future[Any]] = [asyncio.ensure_future(s.wait()) for s in stops]
                try:
                    await self.clock.wait_first([waiter.granted, *waits], LOOK_EVERY)
                finally:
                    for w in waits:
                        w.cancel()
            kept = waiter.granted.done() and not any(s.is_set() for s in stops)
        finally:
            self._waited_max = max(self._waited_max, self.clock.now() - waiter.since)
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            granted = waiter.granted.done() and not waiter.granted.cancelled()
            waiter.granted.cancel()
            if granted and not kept:  # a stop (or a cancel) came as it was granted
                self.release(database, control)
        return kept

    def release(self, database: str, control: bool = False) -> None:
        """Give a slot back: it goes to the next waiter in turn (and keeps a promise of
        take_turn or control_turn, whichever of the database's sessions gives it)."""
        if control and self.held_control > 0:
            self.held_control -= 1
        if self._promised[database] > 0:
            self._promised[database] -= 1
        if self.held_by[database] > 0:
            self.held_by[database] -= 1
        if self.held_by[database] == 0:
            del self.held_by[database]
        self._grant()

    @contextlib.asynccontextmanager
    async def slot(
        self,
        database: str,
        stops: tuple[asyncio.Event, ...],
        alive: Callable[[], None],
        control: bool = False,
    ) -> AsyncIterator[bool]:
        """A slot for a connection while in the block (yields False, holding none, when a
        stop came)."""
        got = await self.acquire(database, stops, alive, control)
        try:
            yield got
        finally:
            if got:
                self.release(database, control)

    def refused(self) -> None:
        """The server refused a connection (SQLSTATE 53300): counted for the summary, and
        for CEILING_FOR seconds the budget holds no more than it holds now (the refused
        one's slot is already given back), and at least a control session and a worker."""
        self._refused += 1
        ceiling = max(MIN_CAP, self.held)
        if self._ceiling is not None and self.cap() is not None:
            ceiling = min(ceiling, self._ceiling)
        self._ceiling = ceiling
        self._ceiling_at = self.clock.now()

    def cap(self) -> int | None:
        """The slots there are now: the limit, or less under a ceiling."""
        if self._ceiling is not None and self.clock.now() - self._ceiling_at >= CEILING_FOR:
            self._ceiling = None
        if self.limit is None or self._ceiling is None:
            return self.limit
        return min(self.limit, self._ceiling)

    def summary(self, now: float, databases: int, parked: int) -> None:
        """The connection_budget line, at the first pressure and then every SUMMARY_EVERY
        seconds while there is some (waits for slots, refused connections)."""
        pressure = self._refused > 0 or bool(self._waiters) or self._waited_max >= LOOK_EVERY
        recent = self._said_at is not None and now - self._said_at < SUMMARY_EVERY
        if not pressure:
            if not recent:
                self._said_at = None  # calm for a while: the next pressure is said at once
            return
        if recent:
            return
        self._said_at = now
        log.event(
            logging.WARNING if self._refused else logging.INFO,
            "connection_budget",
            server=self.server or None,
            databases=databases,
            connections=self.held,
            control=self.held_control,
            workers=self.held - self.held_control,
            parked=parked,
            limit=self.limit,
            ceiling=self.cap() if self.cap() != self.limit else None,
            waiting=self.waiting,
            waiting_databases=len({w.database for w in self._waiters}),
            waited_max_ms=round(self._waited_max * 1000),
            refused=self._refused,
            hint="late timers: raise --max-connections (and the server's max_connections)"
            if self._waited_max >= LOOK_EVERY
            else None,
        )
        self._refused = 0
        self._waited_max = 0.0

    def _free(self, control: bool) -> bool:
        cap = self.cap()
        if cap is None:
            # not known yet: the first control session connects alone, and learns it
            return control and self.held == 0
        if control and cap >= MIN_CAP and self.held_control >= cap - 1:
            return False  # the last slot stays for workers: a control session alone fires nothing
        return self.held < cap

    def _grant(self) -> None:
        """Free slots to waiters, in turn: the database holding the fewest first, then
        the one whose last slot is the oldest, then the longest waiting."""
        while True:
            ready = [w for w in self._waiters if self._free(w.control)]
            if not ready:
                return
            waiter = min(
                ready,
                key=lambda w: (
                    self.held_by[w.database],
                    self._granted_at.get(w.database, 0),
                    w.since,
                ),
            )
            self._waiters.remove(waiter)
            if waiter.granted.done():  # its waiter is gone
                continue
            self._take(waiter.database, waiter.control)
            waiter.granted.set_result(None)

    def _take(self, database: str, control: bool) -> None:
        if control:
            self.held_control += 1
        self.held_by[database] += 1
        self._grants += 1
        self._granted_at[database] = self._grants

"""The workers of one database: each fires timers on its own connection while there is
work, the burst worker only while all others run, and each reconnects alone. A worker
connects only when there is work, within the server's connection budget (a slot per
connection, taken in turn with the other databases), and closes its connection after it
was idle for IDLE_CLOSE seconds or, while another database waits for a slot, after each
fire."""

from __future__ import annotations

import abc
import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from pgtimers.runner import log
from pgtimers.runner.budget import SLICE, is_refused
from pgtimers.runner.serving import LOOK_EVERY, Backoff, Serving
from pgtimers.runner.trouble import Trouble, is_operational
from pgtimers.runner.worker import Worker, is_connection_error

# The server refused a worker's connection (no slot left): tried again this often, so
# that a full server is not asked many times a second by every waiting worker.
REFUSED_RETRY = 1.0
# While the server is full, the databases' workers get a connection now and then (in
# turn): an outage of one database ends only after this long without a refusal.
REFUSED_QUIET = 60.0
# After a run yielded (held.py), its worker waits this long before its next claim.
YIELD_SETTLE = 0.2


class WorkerPool(abc.ABC):
    """The worker side of a DatabaseRunner: waiting for work, firing, failing alone."""

    s: Serving
    stopping: asyncio.Event
    started: asyncio.Event
    database: str
    serving: bool
    _work: asyncio.Condition
    _running: int
    _recheck: asyncio.Event
    _nothing_to_claim: bool
    _leaving: bool
    _leave: asyncio.Event  # set with _leaving
    _refused: bool  # a refusal was said, and no connection has worked since
    _refused_at: float  # the last refusal of a worker's connection (time.monotonic())
    _slot_waiting: int  # this database's workers waiting for a slot now
    _idle_holders: int  # this database's workers waiting for work with a slot
    _work_gone: asyncio.Event  # set while there is no work (a wait for a slot ends)
    _pressure: asyncio.Event  # set when a worker or control session waits for a slot
    parked: bool  # the control session parked: idle workers give their slots back
    trouble: Trouble  # the server refusing work, shared by the workers
    progress: float

    @abc.abstractmethod
    async def _pause(self, seconds: float, wake: asyncio.Event | None = None) -> None:
        """Wait `seconds` (or until `wake` is set), showing life to the watchdog
        (DatabaseRunner's)."""

    def _burst(self) -> int:
        # --workers 1 runs one timer at a time; otherwise one more while all are busy
        return 0 if self.s.workers == 1 else 1

    @property
    def _has_work(self) -> bool:
        return not self._work_gone.is_set()

    async def _signal_work(self) -> None:
        async with self._work:
            self._work_gone.clear()
            self._work.notify_all()

    def _stops(self) -> tuple[asyncio.Event, ...]:
        return (self.stopping, self._leave)

    def _alive(self) -> None:
        self.progress = time.monotonic()  # waiting for a slot is life, for the watchdog

    async def _close_worker(self, worker: Worker) -> None:
        """Close the worker's connection and give its slot back."""
        await worker.close()
        if worker.has_slot:
            worker.has_slot = False
            self.s.budget.release(self.s.dsn)

    async def _take_slot(self, worker: Worker, for_work: bool) -> bool:
        """A slot of the budget for the worker's connection, unless it has one; False when
        stopping (or leaving) came first or, `for_work`, the work went (another worker of
        this database did it: a wait that outlived its work took the next free slot, and
        a connection, for nothing)."""
        if worker.has_slot:
            return True
        stops = (*self._stops(), self._work_gone) if for_work else self._stops()
        self._slot_waiting += 1
        try:
            worker.has_slot = await self.s.budget.acquire(self.s.dsn, stops, self._alive)
        finally:
            self._slot_waiting -= 1
        worker.slot_since = time.monotonic()
        return worker.has_slot

    def _slot_wanted(self) -> None:
        """The budget's call when a worker or control session (of any database) starts to
        wait for a slot: wake this database's idle workers and its control session, to
        give theirs back if it is another's turn."""
        self._pressure.set()
        asyncio.get_running_loop().create_task(self._nudge())

    async def _nudge(self) -> None:
        async with self._work:
            self._work.notify_all()

    def _yields_slot(self, worker: Worker, burst: bool) -> bool:
        """Whether an idle worker gives its slot back: another database's turn (it holds
        fewer), or, for the burst worker, a worker of its own database waits for one (the
        burst worker fires only while all of them run, so it must not keep them out)."""
        if not worker.has_slot:
            return False
        if self.parked or (burst and self._slot_waiting > 0):
            return True
        return self.s.budget.others_waiting(self.s.dsn)

    async def _wait_for_work(self, burst: bool, worker: Worker) -> bool | None:
        """Until there is work for this worker (True), stopping (False), or the worker's
        open connection has been idle for IDLE_CLOSE seconds or its slot is another's turn
        (None: close it). Without a control session (lost, or being made again) a base
        worker that has a connection looks by itself every second."""

        def wanted() -> bool:
            # a worker without a connection waits while one of its database's workers
            # that has one is free to take the work, or another one waits for a slot: a
            # database asks the budget for one more slot at a time, and for a second one
            # while one runs only when the slots are not short (it would take another
            # database's, or open a connection for a moment between parking and parking)
            return (
                self._has_work
                and (not burst or self._running >= self.s.workers)
                and (
                    worker.has_slot
                    or (
                        self._idle_holders == 0
                        and self._slot_waiting == 0
                        and (self._running == 0 or not self.s.budget.short)
                    )
                )
            )

        def ready() -> bool:
            return (
                self._leaving
                or self.stopping.is_set()
                or wanted()
                or self._yields_slot(worker, burst)
            )

        async with self._work:
            if not self.started.is_set():
                # nothing runs before the first registration has applied the downtime rules
                await self._work.wait_for(lambda: self.started.is_set() or self._leaving)
            holder = worker.has_slot and not burst
            self._idle_holders += holder
            try:
                return await self._wait_in_turn(worker, burst, ready, wanted)
            finally:
                self._idle_holders -= holder
                if holder:
                    self._work.notify_all()  # its database's workers without one may go

    async def _wait_in_turn(
        self, worker: Worker, burst: bool, ready: Callable[[], bool], wanted: Callable[[], bool]
    ) -> bool | None:
        """_wait_for_work's loop, under the lock of self._work."""
        while True:
            idle = worker.idle_left()
            alone = not self.serving and not self.parked and not burst and idle is not None
            timeout = min(idle, LOOK_EVERY) if alone and idle is not None else idle
            try:
                await asyncio.wait_for(self._work.wait_for(ready), timeout)
            except asyncio.TimeoutError:
                if not alone or (idle is not None and idle <= LOOK_EVERY):
                    return None
                return not (self._leaving or self.stopping.is_set())  # look alone
            if self._leaving or self.stopping.is_set():
                return False
            if wanted():
                return True
            if worker.has_slot and (self.parked or (burst and self._slot_waiting > 0)):
                return None
            if worker.has_slot and self.s.budget.take_turn(self.s.dsn):
                return None
            # another holder gives its slot to that waiter: wait on

    async def _work_forever(self, worker: Worker, burst: bool) -> None:
        """The worker's loop, started again after an error it did not expect (logged
        once, with its type): a worker never ends before its database is left."""
        while not await self._work_guarded(worker, burst):
            await self._pause(1.0)

    async def _work_guarded(self, worker: Worker, burst: bool) -> bool:
        """The worker's loop; False when it ended by an error it did not expect."""
        try:
            await self._work_loop(worker, burst)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._log_failed(worker, exc)
            return False
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
                if not again:
                    got = await self._wait_for_work(burst, worker)
                    if got is None:  # idle: the database keeps only its control session
                        await self._close_worker(worker)
                        continue
                    if not got:
                        return
                if not worker.has_slot:
                    slot = await self._slot_for_work(worker, again)
                    if slot is None:
                        return
                    if not slot:
                        continue  # the work went while it waited
                try:
                    result = await self._run_one(worker, burst)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # a worker never ends by an error
                    again = False
                    lost = await self._worker_failed(worker, exc, backoff, lost)
                    continue
                if lost:
                    log.event(
                        logging.INFO, "worker_back", database=self.database, worker=worker.name
                    )
                    lost = False
                if self._refused:
                    self._refused = False
                    log.event(logging.INFO, "connections_accepted", database=self.database)
                backoff.healthy()
                again = self._after_fire(result, burst)
                if result and "yielded" in result[-1]:
                    # the runs that waited on the same lock yield about now: know them all
                    # before the next claim, which would take them up again
                    await self._pause(YIELD_SETTLE)
                if self._give_back(worker, result):
                    await self._close_worker(worker)  # in turn: the slot goes round
        finally:
            await self._close_worker(worker)

    async def _run_one(self, worker: Worker, burst: bool) -> list[dict[str, Any]] | None:
        """One round trip of fires by the worker, counted as running (a base worker)."""
        if self.trouble.wait_left():
            # the server refused work a moment ago: every worker waits a little
            await self._pause(self.trouble.wait_left())
        if not burst:
            async with self._work:
                self._running += 1
                self._work.notify_all()
        try:
            worker.database = self.database
            return await worker.run_one()
        finally:
            if not burst:
                async with self._work:
                    self._running -= 1
                    self._work.notify_all()

    async def _slot_for_work(self, worker: Worker, again: bool) -> bool | None:
        """A slot for a worker that has work: True; False when the work went while it
        waited (another worker did it); None when stopping or leaving came first."""
        for_work = not again and self.serving
        if not await self._take_slot(worker, for_work):
            return None if self.stopping.is_set() or self._leaving else False
        if for_work and not self._has_work:
            await self._close_worker(worker)
            return False
        return True

    def _give_back(self, worker: Worker, results: list[dict[str, Any]] | None) -> bool:
        """Whether the worker gives its slot back after a batch of fires: while another
        database waits for one, when the batch found nothing or its slice is over."""
        if results is not None and time.monotonic() - worker.slot_since < SLICE:
            return False
        return self.s.budget.take_turn(self.s.dsn)

    async def _worker_failed(
        self, worker: Worker, exc: Exception, backoff: Backoff, lost: bool
    ) -> bool:
        """Log a worker's failure (a lost connection once), close it, wait; lost or not."""
        if self.stopping.is_set():
            return lost
        await self._close_worker(worker)
        if is_refused(exc):
            self.s.budget.refused()
            # said once per outage: the first refusal after REFUSED_QUIET s without one
            now, last = time.monotonic(), self._refused_at
            self._refused_at = now
            if now - last > REFUSED_QUIET:
                self._refused = True
                log.event(
                    logging.WARNING,
                    "connections_refused",
                    database=self.database,
                    worker=worker.name,
                    error=str(exc),
                    held=self.s.budget.held,
                    limit=self.s.budget.limit,
                    hint="the server has no connection slot left for the runner: lower"
                    " --max-connections, or raise the server's max_connections",
                )
            await self._pause(REFUSED_RETRY)
            return lost
        sqlstate = getattr(exc, "sqlstate", None)
        if is_operational(sqlstate) and not is_connection_error(exc):
            # the server refused the round trip (its COMMIT on a full disk, say)
            self.trouble.hit(str(sqlstate), str(exc))
            await self._pause(self.trouble.wait_left())
            return lost
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
        self._log_failed(worker, exc)
        await self._pause(1.0)
        return lost

    def _log_failed(self, worker: Worker, exc: Exception) -> None:
        """The worker_failed line: an error the worker did not expect, with its type."""
        log.event(
            logging.ERROR,
            "worker_failed",
            database=self.database,
            worker=worker.name,
            error_type=type(exc).__name__,
            error=str(exc),
        )

    def _after_fire(self, results: list[dict[str, Any]] | None, burst: bool) -> bool:
        """Note what a batch of fires did; whether this worker fires again at once."""
        if results is None:
            self._work_gone.set()
            self._nothing_to_claim = True
            self._recheck.set()
            return False
        for result in results:
            if result:
                log.run_result(self.database, result)
        if results and not results[-1]:
            # the last one's run raised (or a timer another run took): wait for the control
            # session, not a hot loop
            self._recheck.set()
            return False
        # the burst worker goes back to waiting, where it fires again while all others
        # run; the control session is asked only when a claim finds nothing (above)
        return not burst

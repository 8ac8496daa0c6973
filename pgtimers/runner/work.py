"""The workers of one database: each fires timers on its own connection while there is
work, the burst worker only while all others run, and each reconnects alone. A worker
connects only when there is work, within the server's connection budget (a slot per
connection, taken in turn with the other databases: slots.py), and closes its connection
after it was idle for IDLE_CLOSE seconds or, while another database waits for a slot,
after each fire."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from pgtimers.runner import log
from pgtimers.runner.answers import Outcome, Unrun
from pgtimers.runner.clock import Clock
from pgtimers.runner.failures import WorkerFailures
from pgtimers.runner.life import Life
from pgtimers.runner.serving import LOOK_EVERY, Backoff, Serving
from pgtimers.runner.slots import WorkerSlots
from pgtimers.runner.trouble import Trouble

# After a run yielded (held.py), its worker waits this long before its next claim.
YIELD_SETTLE = 0.2


class PoolWorker(Protocol):
    """What the pool needs of a worker (worker.Worker; a fake in the unit tests)."""

    name: str
    database: str
    has_slot: bool
    slot_since: float
    answer_by: float | None
    busy_since: float | None
    pid: int | None

    def idle_left(self) -> float | None:
        """Seconds until its open connection closes for idleness; None without one."""
        ...

    async def close(self) -> None:
        """Close its connection."""
        ...

    async def run_one(self) -> list[Outcome] | None:
        """One round trip of fires; None when nothing was due."""
        ...


class Control(Protocol):
    """What the pool reads of its database's control session."""

    started: asyncio.Event  # the first registration applied the downtime rules

    @property
    def serving(self) -> bool:
        """The control session is up and registered."""
        ...

    @property
    def parked(self) -> bool:
        """The control session parked: idle workers give their slots back."""
        ...


class WorkerPool:
    """The workers of one database: waiting for work, firing, failing alone. It tells
    its control session through `ask_control` when a claim found nothing (or a run
    raised), and keeps `nothing_to_claim` for it."""

    def __init__(
        self,
        serving: Serving,
        control: Control,
        life: Life,
        database: Callable[[], str],
        trouble: Trouble,
        ask_control: Callable[[], None],
    ) -> None:
        self.s = serving
        self.control = control
        self.life = life
        self.clock: Clock = life.clock
        self.stopping = life.stopping
        self._database = database
        self.trouble = trouble
        self._ask_control = ask_control
        self.slots = WorkerSlots(serving.budget, serving.dsn, life.clock, life.alive)
        self.workers: Sequence[PoolWorker] = ()
        self._work = asyncio.Condition()
        self.running = 0  # base workers running a timer now
        self.nothing_to_claim = False  # the last claim after a signal found nothing
        self._leaving = False  # stopping: workers finish their run and go
        self._leave = asyncio.Event()  # set with _leaving: a wait for a slot ends
        self.failures = WorkerFailures(serving.budget, trouble, life, database)
        self._idle_holders = 0  # workers waiting for work on a connection of their own
        self._work_gone = asyncio.Event()  # set while there is no work: a slot wait ends
        self._work_gone.set()

    @property
    def burst(self) -> int:
        """Burst workers: --workers 1 runs one timer at a time; otherwise one more while
        all are busy."""
        return 0 if self.s.workers == 1 else 1

    @property
    def has_work(self) -> bool:
        """Whether there is work for the workers (signalled, no claim found nothing since)."""
        return not self._work_gone.is_set()

    def stops(self) -> tuple[asyncio.Event, ...]:
        """What ends a wait of this database's: stopping, or leaving it."""
        return (self.stopping, self._leave)

    async def signal_work(self) -> None:
        """Something is due: wake the workers."""
        async with self._work:
            self._work_gone.clear()
            self._work.notify_all()

    async def nudge(self) -> None:
        """Wake the workers to look again (their slot may be another's turn)."""
        async with self._work:
            self._work.notify_all()

    async def run(self, workers: Sequence[PoolWorker]) -> None:
        """Run `workers` (the last `burst` of them burst workers) until left."""
        self.workers = workers
        base = len(workers) - self.burst
        self.s.budget.on_wanted(self._slot_wanted)
        try:
            await asyncio.gather(
                *(self._work_forever(w, burst=i >= base) for i, w in enumerate(workers)),
                return_exceptions=True,
            )
        finally:
            self.s.budget.forget(self._slot_wanted)

    def _slot_wanted(self) -> None:
        """The budget's call when a worker or control session (of any database) starts to
        wait for a slot: wake the idle workers, to give theirs back if it is another's
        turn."""
        asyncio.get_running_loop().create_task(self.nudge())

    async def leave(self) -> None:
        """The workers finish their run and go."""
        async with self._work:
            self._leaving = True
            self._leave.set()
            self._work.notify_all()

    @property
    def _parked(self) -> bool:
        return self.control.parked

    async def _close_worker(self, worker: PoolWorker) -> None:
        """Close the worker's connection and give its slot back."""
        await worker.close()
        self.slots.give_back(worker)

    async def _take_slot(self, worker: PoolWorker, for_work: bool) -> bool:
        """A slot of the budget for the worker's connection, unless it has one; False when
        stopping (or leaving) came first or, `for_work`, the work went (another worker of
        this database did it: a wait that outlived its work took the next free slot, and
        a connection, for nothing)."""
        stops = (*self.stops(), self._work_gone) if for_work else self.stops()
        return await self.slots.take(worker, stops)

    async def _wait_for_work(self, burst: bool, worker: PoolWorker) -> bool | None:
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
                self.has_work
                and (not burst or self.running >= self.s.workers)
                and (
                    worker.has_slot
                    or (
                        self._idle_holders == 0
                        and self.slots.waiting == 0
                        and (self.running == 0 or not self.slots.short)
                    )
                )
            )

        def ready() -> bool:
            return (
                self._leaving
                or self.stopping.is_set()
                or wanted()
                or self.slots.yields(worker, burst, self._parked)
            )

        async with self._work:
            if not self.control.started.is_set():
                # nothing runs before the first registration has applied the downtime rules
                await self._work.wait_for(lambda: self.control.started.is_set() or self._leaving)
            holder = worker.has_slot and not burst
            self._idle_holders += holder
            try:
                return await self._wait_in_turn(worker, burst, ready, wanted)
            finally:
                self._idle_holders -= holder
                if holder:
                    self._work.notify_all()  # its database's workers without one may go

    async def _wait_in_turn(
        self,
        worker: PoolWorker,
        burst: bool,
        ready: Callable[[], bool],
        wanted: Callable[[], bool],
    ) -> bool | None:
        """_wait_for_work's loop, under the lock of self._work."""
        while True:
            idle = worker.idle_left()
            alone = not self.control.serving and not self._parked and not burst and idle is not None
            timeout = min(idle, LOOK_EVERY) if alone and idle is not None else idle
            try:
                await self.clock.wait_for(self._work.wait_for(ready), timeout)
            except asyncio.TimeoutError:
                if not alone or (idle is not None and idle <= LOOK_EVERY):
                    return None
                return not (self._leaving or self.stopping.is_set())  # look alone
            if self._leaving or self.stopping.is_set():
                return False
            if wanted():
                return True
            if self.slots.hand_off(worker, burst, self._parked):
                return None
            # another holder gives its slot to that waiter: wait on

    async def _work_forever(self, worker: PoolWorker, burst: bool) -> None:
        """The worker's loop, started again after an error it did not expect (logged
        once, with its type): a worker never ends before its database is left."""
        while not await self._work_guarded(worker, burst):
            await self.life.pause(1.0)

    async def _work_guarded(self, worker: PoolWorker, burst: bool) -> bool:
        """The worker's loop; False when it ended by an error it did not expect."""
        try:
            await self._work_loop(worker, burst)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.failures.unexpected(worker.name, exc)
            return False
        return True

    async def _work_loop(self, worker: PoolWorker, burst: bool) -> None:
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
                        logging.INFO, "worker_back", database=self._database(), worker=worker.name
                    )
                    lost = False
                self.failures.worked()
                backoff.healthy()
                again = self._after_fire(result, burst)
                if result and not isinstance(result[-1], Unrun) and result[-1].yielded:
                    # the runs that waited on the same lock yield about now: know them all
                    # before the next claim, which would take them up again
                    await self.life.pause(YIELD_SETTLE)
                if self.slots.after_batch(worker, result is None):
                    await self._close_worker(worker)  # in turn: the slot goes round
        finally:
            await self._close_worker(worker)

    async def _run_one(self, worker: PoolWorker, burst: bool) -> list[Outcome] | None:
        """One round trip of fires by the worker, counted as running (a base worker)."""
        if self.trouble.wait_left():
            # the server refused work a moment ago: every worker waits a little
            await self.life.pause(self.trouble.wait_left())
        if not burst:
            async with self._work:
                self.running += 1
                self._work.notify_all()
        try:
            worker.database = self._database()
            return await worker.run_one()
        finally:
            if not burst:
                async with self._work:
                    self.running -= 1
                    self._work.notify_all()

    async def _slot_for_work(self, worker: PoolWorker, again: bool) -> bool | None:
        """A slot for a worker that has work: True; False when the work went while it
        waited (another worker did it); None when stopping or leaving came first."""
        for_work = not again and self.control.serving
        if not await self._take_slot(worker, for_work):
            return None if self.stopping.is_set() or self._leaving else False
        if for_work and not self.has_work:
            await self._close_worker(worker)
            return False
        return True

    async def _worker_failed(
        self, worker: PoolWorker, exc: Exception, backoff: Backoff, lost: bool
    ) -> bool:
        """A worker's round trip failed: close it (its slot goes back), then say and wait
        as the failure's kind asks (failures.py); lost or not."""
        if self.stopping.is_set():
            return lost
        await self._close_worker(worker)
        return await self.failures.failed(worker.name, exc, backoff, lost)

    def _after_fire(self, results: list[Outcome] | None, burst: bool) -> bool:
        """Note what a batch of fires did; whether this worker fires again at once."""
        if results is None:
            self._work_gone.set()
            self.nothing_to_claim = True
            self._ask_control()
            return False
        for result in results:
            if not isinstance(result, Unrun):
                log.run_result(self._database(), result.result)
        if results and isinstance(results[-1], Unrun):
            # the last one's run raised (or a timer another run took): wait for the control
            # session, not a hot loop
            self._ask_control()
            return False
        # the burst worker goes back to waiting, where it fires again while all others
        # run; the control session is asked only when a claim finds nothing (above)
        return not burst

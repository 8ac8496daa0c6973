"""The runner's parts without a database, for the policy tests: a worker that fires from a
count of due fires, a control session's state, a pool of one database wired as
DatabaseRunner wires it, all on a FakeClock."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field

from pgtimers.runner.answers import Outcome, Ran, RunResult
from pgtimers.runner.budget import IDLE_CLOSE, ConnectionBudget
from pgtimers.runner.clock import FakeClock
from pgtimers.runner.life import Life
from pgtimers.runner.serving import Serving
from pgtimers.runner.trouble import Trouble
from pgtimers.runner.work import WorkerPool

CLOSE_TAKES = 0.01  # fake seconds: the other workers act meanwhile, as on a real close


@dataclass
class Due:
    """What is due in one fake database: fires left, and each fire's fake duration."""

    fires: int = 0
    takes: float = 0.0
    fired: list[tuple[str, float]] = field(default_factory=list)  # (worker, when)


class FakeWorker:
    """A worker whose connection is a flag: run_one fires one of `due`'s fires (None when
    none is left), or raises the next of `fail`."""

    def __init__(self, name: str, due: Due, clock: FakeClock) -> None:
        self.name = name
        self.database = ""
        self.due = due
        self.clock = clock
        self.has_slot = False
        self.slot_since = 0.0
        self.answer_by: float | None = None
        self.busy_since: float | None = None
        self.pid: int | None = None
        self.open = False
        self.used_at = 0.0
        self.connects = 0
        self.closes = 0
        self.tries: list[float] = []  # when run_one was called
        self.fail: list[Exception] = []

    def idle_left(self) -> float | None:
        """As Worker.idle_left."""
        if not self.open:
            return None
        return max(0.0, IDLE_CLOSE - (self.clock.now() - self.used_at))

    async def close(self) -> None:
        """As Worker.close: closing a connection takes a moment (CLOSE_TAKES)."""
        if self.open:
            self.closes += 1
            self.open = False
            await self.clock.sleep(CLOSE_TAKES)

    async def run_one(self) -> list[Outcome] | None:
        """One fire of what is due (or None)."""
        self.tries.append(self.clock.now())
        assert self.has_slot, f"{self.name} connects without a slot"
        if self.fail:
            raise self.fail.pop(0)
        if not self.open:
            self.open = True
            self.connects += 1
        if self.due.fires <= 0:
            self.used_at = self.clock.now()
            return None
        self.due.fires -= 1
        if self.due.takes:
            await self.clock.sleep(self.due.takes)
        self.due.fired.append((self.name, self.clock.now()))
        self.used_at = self.clock.now()
        return [Ran(RunResult(timer="t", kind="due", ok=True))]


@dataclass
class FakeControl:
    """A control session's state as the pool reads it."""

    serving: bool = True
    parked: bool = False
    started: asyncio.Event = field(default_factory=asyncio.Event)


class Database:
    """One fake database: its due fires, workers and pool, on a shared budget."""

    def __init__(
        self, name: str, budget: ConnectionBudget, clock: FakeClock, workers: int = 1
    ) -> None:
        self.name = name
        self.clock = clock
        self.stopping = asyncio.Event()
        self.due = Due()
        self.control = FakeControl()
        self.control.started.set()
        self.asked = 0  # the pool asked its control session to look
        serving = Serving(dsn=name, workers=workers, runner_id="unit", budget=budget)
        self.life = Life(clock, self.stopping)
        self.pool = WorkerPool(
            serving,
            self.control,
            self.life,
            lambda: name,
            Trouble(lambda: name, clock.now),
            self._ask,
        )
        count = workers + self.pool.burst
        self.workers = [FakeWorker(f"{name}.w{i + 1}", self.due, clock) for i in range(count)]
        self.task: asyncio.Task[None] | None = None

    def _ask(self) -> None:
        self.asked += 1

    def start(self) -> None:
        """Run the pool."""
        self.task = asyncio.create_task(self.pool.run(self.workers))

    async def holding(self, *workers: FakeWorker) -> None:
        """Workers that fired a moment ago: each holds a slot and an open connection."""
        budget = self.pool.s.budget
        for w in workers:
            assert await budget.acquire(self.name, (self.stopping,), lambda: None)
            w.has_slot, w.open, w.slot_since, w.used_at = (
                True,
                True,
                self.clock.now(),
                self.clock.now(),
            )

    async def work(self, fires: int, takes: float = 0.0) -> None:
        """Fires come due, and the control session signals the workers."""
        self.due.fires += fires
        self.due.takes = takes
        await self.pool.signal_work()

    async def stop(self) -> None:
        """Leave the database: the workers go."""
        self.stopping.set()
        await self.pool.leave()
        if self.task is not None:
            await self.clock.run_until(self.task.done, limit=60)
            await self.task

    @property
    def open(self) -> int:
        """Open worker connections."""
        return sum(1 for w in self.workers if w.open)


def run(test: Callable[[FakeClock], Coroutine[object, object, None]]) -> None:
    """Run an async test body with a fresh FakeClock (over when the body ends, so that a
    failure fails instead of waiting for fake time that never comes)."""

    async def body() -> None:
        clock = FakeClock()
        try:
            await test(clock)
        finally:
            clock.over()

    asyncio.run(body())

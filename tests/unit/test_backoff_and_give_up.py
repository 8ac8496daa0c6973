"""Reconnecting and giving up on a fake clock, without a database: a worker whose
connection fails tries again at once, then after 0.25 s, then every 0.5 s, alone; a refused
connection waits REFUSED_RETRY and caps the budget; a runner that serves no database for
GIVE_UP_AFTER seconds gives up."""

from __future__ import annotations

import asyncio
import itertools

import asyncpg

from pgtimers.runner import service
from pgtimers.runner.budget import ConnectionBudget
from pgtimers.runner.clock import FakeClock
from pgtimers.runner.failures import REFUSED_RETRY
from pgtimers.runner.serving import RETRY_STEPS
from tests.unit.runner_parts import Database, run


def test_a_lost_worker_connection_is_made_again_with_backoff() -> None:
    async def go(clock: FakeClock) -> None:
        budget = ConnectionBudget(limit=2, clock=clock)
        a = Database("a", budget, clock)
        worker = a.workers[0]
        worker.fail = [OSError("connection reset") for _ in range(4)]
        a.start()
        await a.work(1)
        await clock.run_until(lambda: bool(a.due.fired), limit=5, step=0.01)
        tries = worker.tries[:5]  # four lost, then the fire
        gaps = [round(later - t, 3) for t, later in itertools.pairwise(tries)]
        assert gaps == [*RETRY_STEPS, RETRY_STEPS[-1]], gaps
        assert budget.held == 1  # the failed tries gave their slots back
        await a.stop()

    run(go)


def test_a_refused_connection_waits_and_caps_the_budget() -> None:
    async def go(clock: FakeClock) -> None:
        budget = ConnectionBudget(limit=5, clock=clock)
        a = Database("a", budget, clock)
        worker = a.workers[0]
        refused = asyncpg.TooManyConnectionsError("sorry, too many clients already")
        worker.fail = [refused]
        a.start()
        await a.work(1)
        await clock.run_until(lambda: bool(a.due.fired), limit=5, step=0.01)
        assert round(worker.tries[1] - worker.tries[0], 3) == REFUSED_RETRY
        assert budget.cap() == 2  # what it held then, at least a control session and a worker
        await a.stop()

    run(go)


def test_a_runner_serving_nothing_gives_up_after_its_time() -> None:
    async def go(clock: FakeClock) -> None:
        runner = service.Runner(service.RunnerOptions(dsns=["host=nowhere dbname=x"]), clock)
        monitor = asyncio.create_task(runner._monitor())
        await clock.advance(service.GIVE_UP_AFTER - 1)
        assert not runner.gave_up
        await clock.run_until(monitor.done, limit=3, step=0.5)
        assert runner.gave_up and runner.stopping.is_set()

    run(go)

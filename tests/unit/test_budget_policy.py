"""The connection budget's policies on a fake clock, without a database: slots go to the
database holding the fewest, then the one served longest ago, then the longest waiting;
control sessions leave the last slot to workers; a refusal caps the budget for a while."""

from __future__ import annotations

import asyncio

from pgtimers.runner.budget import CEILING_FOR, LOOK_EVERY, ConnectionBudget
from pgtimers.runner.clock import FakeClock
from tests.unit.runner_parts import run


def test_a_freed_slot_goes_to_the_database_holding_the_fewest() -> None:
    async def go(clock: FakeClock) -> None:
        budget = ConnectionBudget(limit=3, clock=clock)
        stop = asyncio.Event()
        for db in ("a", "a", "b"):
            assert await budget.acquire(db, (stop,), lambda: None)
        order: list[str] = []

        async def wait(db: str) -> None:
            if await budget.acquire(db, (stop,), lambda: None):
                order.append(db)

        # a asks first, then c, which holds none: c goes first, then a
        tasks = [asyncio.create_task(wait("a"))]
        await clock.advance(0.1)
        tasks.append(asyncio.create_task(wait("c")))
        await clock.advance(0.1)
        budget.release("a")
        await clock.advance(0.1)
        assert order == ["c"]
        budget.release("b")
        await clock.advance(0.1)
        assert order == ["c", "a"]
        await asyncio.gather(*tasks)

    run(go)


def test_between_equals_the_one_served_longest_ago_goes_first() -> None:
    async def go(clock: FakeClock) -> None:
        budget = ConnectionBudget(limit=1, clock=clock)
        stop = asyncio.Event()
        order: list[str] = []

        async def take(db: str) -> None:
            if await budget.acquire(db, (stop,), lambda: None):
                order.append(db)

        await take("a")  # a was served last
        b_waits = asyncio.create_task(take("b"))
        await clock.advance(0.1)
        a_waits = asyncio.create_task(take("a"))
        await clock.advance(0.1)
        budget.release("a")
        await clock.advance(0.1)
        budget.release("b")
        await clock.advance(0.1)
        await asyncio.gather(a_waits, b_waits)
        assert order == ["a", "b", "a"]

    run(go)


def test_control_sessions_leave_the_last_slot_to_workers() -> None:
    async def go(clock: FakeClock) -> None:
        budget = ConnectionBudget(limit=3, clock=clock)
        stop = asyncio.Event()
        assert await budget.acquire("a", (stop,), lambda: None, control=True)
        assert await budget.acquire("b", (stop,), lambda: None, control=True)
        third = asyncio.create_task(budget.acquire("c", (stop,), lambda: None, control=True))
        await clock.advance(2 * LOOK_EVERY)
        assert not third.done() and budget.held == 2
        assert await budget.acquire("a", (stop,), lambda: None)  # a worker takes the last
        stop.set()
        await clock.advance(LOOK_EVERY)
        assert await third is False and budget.waiting == 0

    run(go)


def test_a_refusal_caps_the_budget_for_a_while() -> None:
    async def go(clock: FakeClock) -> None:
        budget = ConnectionBudget(limit=10, clock=clock)
        stop = asyncio.Event()
        for db in "abc":
            assert await budget.acquire(db, (stop,), lambda: None)
        budget.refused()  # the server is full at 3
        assert budget.cap() == 3
        waiting = asyncio.create_task(budget.acquire("d", (stop,), lambda: None))
        await clock.advance(CEILING_FOR - 1)
        assert not waiting.done()
        await clock.advance(1 + LOOK_EVERY)  # the ceiling lifts; the waiter looks again
        assert await waiting is True and budget.cap() == 10

    run(go)


def test_a_wait_shows_life_every_second_and_ends_at_a_stop() -> None:
    async def go(clock: FakeClock) -> None:
        budget = ConnectionBudget(limit=1, clock=clock)
        stop = asyncio.Event()
        assert await budget.acquire("a", (stop,), lambda: None)
        seen: list[float] = []
        waiting = asyncio.create_task(
            budget.acquire("b", (stop,), lambda: seen.append(clock.now()))
        )
        await clock.advance(3.5)
        assert len(seen) == 4  # at 0, 1, 2, 3
        stop.set()
        await clock.settle()
        assert await waiting is False and budget.held == 1

    run(go)

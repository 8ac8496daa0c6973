"""Parking a control session and its return, on a fake clock and without a database: it
parks only while another database waits and nothing of its own is due soon, comes back
before its next due time or when its doorbell rings, and gives up saying it stopped when
no slot comes in time."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

from pgtimers.runner.budget import ConnectionBudget
from pgtimers.runner.clock import FakeClock
from pgtimers.runner.life import Life
from pgtimers.runner.parking import CONTROL_SLICE, LEAVE_WAIT, PARK_LOOK, WAKE_LEAD, Parking
from pgtimers.runner.serving import Serving
from tests.unit.runner_parts import run

NOW = dt.datetime(2026, 12, 7, 12, 0, tzinfo=dt.timezone.utc)


class Said:
    """A control session that only remembers what it was asked (runner_park's until)."""

    def __init__(self) -> None:
        self.asked: list[tuple[Any, ...]] = []

    async def fetchval(self, query: str, *args: Any) -> None:
        self.asked.append(args)

    async def fetch(self, query: str, *args: Any) -> list[Any]:
        return []


class Work:
    """The pool as parking sees it."""

    def __init__(self) -> None:
        self.has_work = False
        self.running = 0
        self.nudged = 0

    async def nudge(self) -> None:
        self.nudged += 1


def _parking(clock: FakeClock, budget: ConnectionBudget) -> tuple[Parking, Work]:
    """Database a's parking; its control session and a worker hold the budget's 2 slots."""
    for control in (True, False):
        budget.held_by["a"] += 1
        budget.held_control += control
    work = Work()
    serving = Serving(dsn="a", workers=1, runner_id="unit", budget=budget)
    return Parking(serving, clock, lambda: "a", work, lambda: None), work


_WAITERS: list[asyncio.Task[bool]] = []


async def _someone_waits(clock: FakeClock, budget: ConnectionBudget, control: bool) -> None:
    stop = asyncio.Event()
    _WAITERS.append(
        asyncio.create_task(budget.acquire("b", (stop,), lambda: None, control=control))
    )
    await clock.settle()


def test_it_parks_while_another_waits_and_nothing_is_due_soon() -> None:
    async def go(clock: FakeClock) -> None:
        budget = ConnectionBudget(limit=2, clock=clock)
        parking, work = _parking(clock, budget)
        session = Said()
        served_at = clock.now()
        # nobody waits: it stays
        assert not await parking.park_if_turn(session, NOW, None, 0.0, served_at)  # type: ignore[arg-type]
        await _someone_waits(clock, budget, control=False)
        work.has_work = True  # its own work first
        assert not await parking.park_if_turn(session, NOW, None, 0.0, served_at)  # type: ignore[arg-type]
        work.has_work = False
        assert await parking.park_if_turn(session, NOW, 10.0, 0.0, served_at)  # type: ignore[arg-type]
        assert parking.parked and work.nudged == 1
        assert parking.back_at == clock.now() + 10.0 - WAKE_LEAD
        assert budget.doorbells.hung == 1 and parking.bell is not None
        ((_, until),) = session.asked
        assert until > NOW + dt.timedelta(seconds=10.0 - WAKE_LEAD)  # with its grace
        parking.unpark()
        assert not parking.parked and budget.doorbells.hung == 0

    run(go)


def test_due_soon_it_parks_only_for_a_control_session_after_its_turn() -> None:
    async def go(clock: FakeClock) -> None:
        budget = ConnectionBudget(limit=2, clock=clock)
        parking, _ = _parking(clock, budget)
        session, served_at = Said(), clock.now()
        await _someone_waits(clock, budget, control=False)
        # due in half a second: never for a worker
        assert not await parking.park_if_turn(session, NOW, 0.5, 0.0, served_at)  # type: ignore[arg-type]
        await clock.advance(CONTROL_SLICE)
        assert not await parking.park_if_turn(session, NOW, 0.5, 0.0, served_at)  # type: ignore[arg-type]
        await _someone_waits(clock, budget, control=True)  # a parked database's control
        assert await parking.park_if_turn(session, NOW, 0.5, 0.0, served_at)  # type: ignore[arg-type]
        assert parking.back_at == clock.now() + 0.5 - WAKE_LEAD

    run(go)


def test_a_parked_database_returns_at_its_time_or_when_its_doorbell_rings() -> None:
    async def go(clock: FakeClock) -> None:
        budget = ConnectionBudget(limit=2, clock=clock)
        parking, _ = _parking(clock, budget)
        life = Life(clock, asyncio.Event())
        await _someone_waits(clock, budget, control=False)
        assert await parking.park_if_turn(Said(), NOW, None, 0.0, clock.now())  # type: ignore[arg-type]
        began = clock.now()
        # nothing due: back after PARK_LOOK
        back = asyncio.create_task(life.pause(parking.back_at - clock.now(), wake=parking.bell))
        await clock.run_until(back.done, limit=PARK_LOOK + 1, step=0.5)
        assert clock.now() - began >= PARK_LOOK
        # parked again (another database's turn again): a ring brings it back at once
        parking.unpark()
        budget2 = ConnectionBudget(limit=2, clock=clock)
        parking, _ = _parking(clock, budget2)
        await _someone_waits(clock, budget2, control=False)
        assert await parking.park_if_turn(Said(), NOW, None, 0.0, clock.now())  # type: ignore[arg-type]
        back = asyncio.create_task(life.pause(parking.back_at - clock.now(), wake=parking.bell))
        await clock.advance(2.0)
        assert not back.done()
        budget2.doorbells.ring(["a"])
        await clock.settle()
        assert back.done()

    run(go)


def test_leaving_while_parked_gives_up_without_a_slot() -> None:
    async def go(clock: FakeClock) -> None:
        budget = ConnectionBudget(limit=1, clock=clock)
        parking, _ = _parking(clock, ConnectionBudget(limit=2, clock=clock))
        parking.s.budget = budget
        stop = asyncio.Event()
        assert await budget.acquire("b", (stop,), lambda: None)  # the server's only slot
        parking.parked = True
        began = clock.now()
        leaving = asyncio.create_task(parking.leave_parked())
        await clock.run_until(leaving.done, limit=LEAVE_WAIT + 2, step=0.5)
        assert LEAVE_WAIT <= clock.now() - began < LEAVE_WAIT + 1.5
        assert not parking.parked and budget.held == 1 and budget.waiting == 0

    run(go)

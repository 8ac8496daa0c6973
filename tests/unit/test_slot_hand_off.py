"""The slot hand-off between databases' workers, on a fake clock and without a database:
the three hand-off bugs fixed before bench/README.md's re-measure (945e56f), each as a
test that fails on the behaviour before its fix, and a slot given back after a slice."""

from __future__ import annotations

from pgtimers.runner.budget import IDLE_CLOSE, SLICE, ConnectionBudget
from pgtimers.runner.clock import FakeClock
from tests.unit.runner_parts import Database, run


def test_an_idle_worker_gives_its_slot_to_another_database_at_once() -> None:
    """6592dfe: an idle worker gives its slot back as soon as another database's turn
    comes. Before, it was offered only after a fire: a database with one slot's worth of
    budget waited until the idle connection closed (IDLE_CLOSE, 30 s; 26 s in the bench)."""

    async def go(clock: FakeClock) -> None:
        budget = ConnectionBudget(limit=1, clock=clock)
        a, b = Database("a", budget, clock), Database("b", budget, clock)
        await a.holding(a.workers[0])  # a fired a moment ago: idle on its slot
        a.start()
        b.start()
        await b.work(1)
        took = await clock.run_until(lambda: bool(b.due.fired), limit=IDLE_CLOSE)
        assert took < 1.0, f"b waited {took:.2f} s for a's idle slot"
        assert a.open == 0 and a.workers[0].closes == 1
        await a.stop()
        await b.stop()

    run(go)


def test_the_burst_worker_gives_its_slot_to_its_own_databases_workers() -> None:
    """6592dfe: the burst worker gives its slot back to its own database's waiting
    workers. It fires only while all the others run, so before, holding the database's
    only slot idle, it kept them out until its connection closed (up to 30 s)."""

    async def go(clock: FakeClock) -> None:
        budget = ConnectionBudget(limit=1, clock=clock)
        a = Database("a", budget, clock, workers=2)
        burst = a.workers[-1]
        await a.holding(burst)
        a.start()
        await a.work(1)
        took = await clock.run_until(lambda: bool(a.due.fired), limit=IDLE_CLOSE)
        assert took < 1.0, f"the base workers waited {took:.2f} s for the burst one's slot"
        assert a.due.fired[0][0] != burst.name and burst.closes == 1
        await a.stop()

    run(go)


def test_one_waiter_makes_one_holder_give_one_slot_back() -> None:
    """eec6f7d: one waiter makes one worker give one slot back (take_turn's promise).
    Before, every idle worker of every richer database was woken and gave its slot back
    for one waiter, and all reconnected a moment later: 36-74 new connections a second
    at 10 databases with 10 slots."""

    async def go(clock: FakeClock) -> None:
        budget = ConnectionBudget(limit=4, clock=clock)
        a, b = Database("a", budget, clock, workers=2), Database("b", budget, clock, workers=2)
        c = Database("c", budget, clock)
        # a and b idle on two slots each (both base workers), c waits for one
        for db in (a, b):
            await db.holding(*db.workers[:2])
        for db in (a, b, c):
            db.start()
        await c.work(1)
        await clock.run_until(lambda: bool(c.due.fired), limit=5)
        await clock.advance(2.0)
        closes = sum(w.closes for db in (a, b) for w in db.workers)
        assert closes == 1, f"{closes} idle connections closed for one waiter"
        assert a.open + b.open == 3 and budget.held == 4
        for db in (a, b, c):
            await db.stop()

    run(go)


def test_a_busy_worker_gives_its_slot_back_after_its_slice() -> None:
    """A worker that keeps finding work gives its slot back to a poorer waiting database
    once it has held it for SLICE seconds, not before (16a5ec8)."""

    async def go(clock: FakeClock) -> None:
        budget = ConnectionBudget(limit=1, clock=clock)
        a, b = Database("a", budget, clock), Database("b", budget, clock)
        a.start()
        b.start()
        await a.work(100, takes=0.1)
        await clock.run_until(lambda: bool(a.due.fired), limit=2)
        began = a.due.fired[0][1] - 0.1
        await b.work(1)
        await clock.run_until(lambda: bool(b.due.fired), limit=5)
        a_before_b = [t for _, t in a.due.fired if t <= b.due.fired[0][1]]
        assert SLICE <= max(a_before_b) - began < SLICE + 0.25
        await a.stop()
        await b.stop()

    run(go)

"""An autonomous run's owner session takes a slot of the connection budget beside its
worker's, waits for one a while, and fails by name rather than wait for itself."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pgtimers.runner.autonomous import Attempt, OwnerSessions
from pgtimers.runner.budget import ConnectionBudget

ATTEMPT = Attempt(
    run_id=1,
    timer="vacuum-sales",
    owner="reporting",
    statements=["VACUUM"],
    due_at="",
    prev_due_at="",
    attempt=1,
    timeout_ms=5000,
)
# nothing listens here: a connection that is tried fails at once
NOWHERE = "host=/nonexistent-pgtimers-socket-dir dbname=app user=ticker connect_timeout=1"


async def _began(_pid: int, _login: str) -> None:
    raise AssertionError("no session should have come up")


def _owners(budget: ConnectionBudget, stop: asyncio.Event, wait: float) -> OwnerSessions:
    return OwnerSessions(
        NOWHERE,
        slot=lambda gave_up: budget.slot("db", (stop, gave_up), lambda: None),
        slot_wait=wait,
    )


def test_a_full_budget_fails_the_run_naming_max_connections() -> None:
    async def go() -> tuple[Any, float]:
        budget = ConnectionBudget(limit=2)
        stop = asyncio.Event()
        # the control session and the worker that runs the attempt
        assert await budget.acquire("db", (stop,), lambda: None, control=True)
        assert await budget.acquire("db", (stop,), lambda: None)
        started = time.monotonic()
        outcome = await _owners(budget, stop, 0.2).run(ATTEMPT, _began)
        return outcome, time.monotonic() - started

    outcome, took = asyncio.run(go())
    assert not outcome.ok and outcome.sqlstate == "53300"
    assert "--max-connections" in outcome.error and "0.2 s" in outcome.error
    assert 0.2 <= took < 2


def test_a_free_slot_is_taken_and_given_back() -> None:
    async def go() -> tuple[Any, int]:
        budget = ConnectionBudget(limit=3)
        stop = asyncio.Event()
        assert await budget.acquire("db", (stop,), lambda: None, control=True)
        assert await budget.acquire("db", (stop,), lambda: None)
        outcome = await _owners(budget, stop, 5).run(ATTEMPT, _began)
        return outcome, budget.held

    outcome, held = asyncio.run(go())
    # it got a slot and tried to log in as the owner (nobody listens): named, and given back
    assert not outcome.ok and "cannot log in as the timer's owner 'reporting'" in outcome.error
    assert held == 2


def test_a_stop_while_waiting_says_so() -> None:
    async def go() -> Any:
        budget = ConnectionBudget(limit=2)
        stop = asyncio.Event()
        assert await budget.acquire("db", (stop,), lambda: None, control=True)
        assert await budget.acquire("db", (stop,), lambda: None)
        asyncio.get_running_loop().call_later(0.05, stop.set)
        return await _owners(budget, stop, 30).run(ATTEMPT, _began)

    outcome = asyncio.run(go())
    assert not outcome.ok and outcome.error == "not run: the runner was stopping"

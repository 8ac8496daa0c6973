"""An autonomous run's owner session takes a slot of the connection budget beside its
worker's, waits for one a while, and fails by name rather than wait for itself."""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

from pgtimers.runner.autonomous import Attempt, OwnerSessions
from pgtimers.runner.budget import ConnectionBudget
from pgtimers.runner.clock import FakeClock

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


def test_the_wait_for_a_slot_is_measured_by_the_runners_clock() -> None:
    async def go() -> tuple[Any, float]:
        clock = FakeClock()
        budget = ConnectionBudget(limit=2)
        stop = asyncio.Event()
        assert await budget.acquire("db", (stop,), lambda: None, control=True)
        assert await budget.acquire("db", (stop,), lambda: None)
        owners = OwnerSessions(
            NOWHERE,
            slot=lambda gave_up: budget.slot("db", (stop, gave_up), lambda: None),
            clock=clock,
        )
        run = asyncio.ensure_future(owners.run(ATTEMPT, _began))
        took = await clock.run_until(run.done, 60, step=1.0)
        return run.result(), took

    outcome, took = asyncio.run(go())
    # the default 30 s of the fake clock, not of the wall's
    assert not outcome.ok and outcome.sqlstate == "53300" and "30 s" in outcome.error
    assert took == 30


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


class FakeCursor:
    def __init__(self, tag: str, count: int, row: tuple[Any, ...] | None) -> None:
        self.statusmessage = tag
        self.rowcount = count
        self._row = row

    async def fetchone(self) -> tuple[Any, ...] | None:
        return self._row


class FakeSession:
    """An owner's session that answers at once; each statement of the timer takes
    `takes` seconds of the fake clock and writes one row."""

    def __init__(self, clock: FakeClock, login: str, takes: float) -> None:
        self.clock, self.login, self.takes = clock, login, takes
        self.sent: list[str] = []
        self.cancelled = 0

    async def cancel_safe(self, timeout: float) -> None:
        self.cancelled += 1

    async def execute(self, statement: str, params: Any = None) -> FakeCursor:
        if "session_user" in statement:
            return FakeCursor("SELECT 1", 1, (self.login, self.login, 4242))
        if "set_config" in statement:
            return FakeCursor("SELECT 1", 1, None)
        self.sent.append(statement)
        await self.clock.advance(self.takes)
        return FakeCursor("INSERT 0 1", 1, None)


def _attempt(statements: list[str], timeout_ms: int) -> Attempt:
    return Attempt(1, "t", "reporting", statements, "", "", 1, timeout_ms)


def _in_session(session: FakeSession, attempt: Attempt, clock: FakeClock) -> Any:
    owners = OwnerSessions(NOWHERE, clock=clock)
    began: list[tuple[int, str]] = []

    async def note(pid: int, login: str) -> None:
        began.append((pid, login))

    deadline = clock.now() + attempt.timeout_ms / 1000
    outcome = asyncio.run(owners._in_session(cast(Any, session), attempt, note, deadline))
    return outcome, began


def test_the_whole_run_has_one_time_limit_statement_after_statement() -> None:
    clock = FakeClock()
    session = FakeSession(clock, "reporting", takes=3.0)
    outcome, began = _in_session(session, _attempt(["s1", "s2", "s3"], 5000), clock)
    # 3 s each against 5 s for the run: the second is cancelled at 5 s, the third never sent
    assert session.sent == ["s1", "s2"] and session.cancelled == 1
    assert (outcome.ok, outcome.sqlstate) == (False, "57014")
    assert began == [(4242, "reporting")]


def test_rows_are_the_sum_of_what_the_statements_wrote() -> None:
    clock = FakeClock()
    session = FakeSession(clock, "reporting", takes=0.1)
    outcome, _ = _in_session(session, _attempt(["s1", "s2", "s3"], 5000), clock)
    assert (outcome.ok, outcome.rows, session.sent) == (True, 3, ["s1", "s2", "s3"])
    assert session.cancelled == 0


def test_a_session_of_another_login_runs_nothing() -> None:
    clock = FakeClock()
    session = FakeSession(clock, "ticker", takes=0.1)
    outcome, began = _in_session(session, _attempt(["s1"], 5000), clock)
    assert not outcome.ok and "logs in as 'ticker', not as the timer's owner" in outcome.error
    assert session.sent == [] and began == []

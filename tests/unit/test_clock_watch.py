"""The clock watch tells a step of the server's clock from a late answer or a suspended
runner host: both clocks are read within each round trip, on a fake clock here."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from pgtimers.runner.clock_watch import CLOCK_JUMP, ClockWatch, Look, judge
from pgtimers.runner.log import LOGGER

START = dt.datetime(2027, 1, 4, 9, 0, tzinfo=dt.timezone.utc)


class World:
    """Real time `t` (seconds), the runner's clock (it counts a suspend unless told not
    to) and the server's clock (real time plus the steps it was set by)."""

    def __init__(self, counts_suspend: bool = True) -> None:
        self.t = 0.0
        self.offset = 0.0  # the server's clock minus real time
        self.missed = 0.0  # suspended time a clock that stops in a suspend did not see
        self.counts_suspend = counts_suspend

    def clock(self) -> float:
        return self.t if self.counts_suspend else self.t - self.missed

    def server(self) -> dt.datetime:
        return START + dt.timedelta(seconds=self.t + self.offset)

    def suspend(self, seconds: float) -> None:
        self.t += seconds
        self.missed += seconds


class Control:
    """The control session: each next_wake takes `out` seconds to reach the server and
    `back` for its answer to come (0.01 s each unless planned); during either, `during`
    may happen (a suspend)."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.planned: list[tuple[float, float]] = []
        self.during: list[Any] = []
        self.jumps: list[tuple[Any, ...]] = []

    async def fetchrow(self, sql: str, *args: Any) -> Any:
        out, back = self.planned.pop(0) if self.planned else (0.01, 0.01)
        self.world.t += out
        read = self.world.server()
        self.world.t += back
        for happen in self.during:
            happen()
        self.during.clear()
        return (read, None, None)

    async def fetchval(self, sql: str, *args: Any) -> Any:
        self.jumps.append(args)
        return []


@pytest.fixture
def events() -> Iterator[list[str]]:
    """The runner's log lines while the test runs."""
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler = Keep()
    level = LOGGER.level
    LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.INFO)
    try:
        yield lines
    finally:
        LOGGER.removeHandler(handler)
        LOGGER.setLevel(level)


def looks(world: World, control: Control, n: int, between: float = 1.0) -> None:
    """`n` looks, `between` seconds apart, as the control loop makes them."""
    watch = ClockWatch("app", "r1", clock=world.clock)

    async def run() -> None:
        for _ in range(n):
            await watch.next_wake(control)
            world.t += between

    asyncio.run(run())


def named(lines: list[str], event: str) -> list[str]:
    return [line for line in lines if f"event={event} " in line]


def test_an_answer_8_s_late_is_no_step(events: list[str]) -> None:
    world = World()
    control = Control(world)
    # the third look reaches the server at once; its answer comes 8 s later
    control.planned = [(0.01, 0.01), (0.01, 0.01), (0.01, 8.0)]
    looks(world, control, 6)
    assert events == []
    assert control.jumps == []


def test_a_question_8_s_late_is_no_step(events: list[str]) -> None:
    world = World()
    control = Control(world)
    control.planned = [(0.01, 0.01), (8.0, 0.01)]
    looks(world, control, 5)
    assert events == []


@pytest.mark.parametrize("where", ["between looks", "during a look"])
def test_a_runner_host_suspended_20_s_is_no_step(events: list[str], where: str) -> None:
    world = World()
    control = Control(world)
    watch = ClockWatch("app", "r1", clock=world.clock)

    async def run() -> None:
        for i in range(6):
            if i == 3 and where == "during a look":
                control.during.append(lambda: world.suspend(20))
            await watch.next_wake(control)
            world.t += 1
            if i == 3 and where == "between looks":
                world.suspend(20)

    asyncio.run(run())
    assert events == []


def test_a_clock_that_stops_in_a_suspend_would_call_it_a_step() -> None:
    """Why the watch's clock counts a suspend (CLOCK_BOOTTIME, not CLOCK_MONOTONIC)."""
    world = World(counts_suspend=False)
    before = Look(world.clock(), world.clock() + 0.02, world.server())
    world.t += 1
    world.suspend(20)
    after = Look(world.clock(), world.clock() + 0.02, world.server())
    step = judge(before, after)
    assert step is not None and step.by > 18


def test_a_step_forward_of_30_s_skips_the_span_it_jumped_over(events: list[str]) -> None:
    world = World()
    control = Control(world)
    watch = ClockWatch("app", "r1", clock=world.clock)
    seen: list[dt.datetime] = []

    async def run() -> None:
        for i in range(6):
            seen.append((await watch.next_wake(control))[0])
            world.t += 1
            if i == 2:
                world.offset += 30

    asyncio.run(run())
    [forward] = named(events, "clock_set_forward")
    assert named(events, "clock_set_back") == []
    # the server's clock moved 31.02 s between the reads; real time at most 1.04 s
    assert "by_s=30.0" in forward
    [(start, end, runner)] = control.jumps
    assert runner == "r1"
    assert end == seen[3]
    # jumped over: from the earlier read plus the longest real time between the reads;
    # a due time before that may still have come in real time, and runs late if so
    assert (start - seen[2]).total_seconds() == pytest.approx(1.04)
    assert (end - start).total_seconds() == pytest.approx(29.98)


def test_a_step_forward_during_a_late_answer_still_counts(events: list[str]) -> None:
    world = World()
    control = Control(world)
    control.planned = [(0.01, 0.01), (0.01, 0.01), (0.01, 5.0)]
    watch = ClockWatch("app", "r1", clock=world.clock)

    async def run() -> None:
        for i in range(5):
            if i == 2:
                control.during.append(lambda: setattr(world, "offset", 30.0))
            await watch.next_wake(control)
            world.t += 1

    asyncio.run(run())
    [forward] = named(events, "clock_set_forward")
    assert len(control.jumps) == 1
    assert "by_s=30.0" in forward  # the step is told apart from the 5 s of lateness


def test_a_step_back_is_logged_and_skips_nothing(events: list[str]) -> None:
    world = World()
    control = Control(world)
    watch = ClockWatch("app", "r1", clock=world.clock)

    async def run() -> None:
        for i in range(5):
            await watch.next_wake(control)
            world.t += 1
            if i == 1:
                world.offset -= 30

    asyncio.run(run())
    [back] = named(events, "clock_set_back")
    # the server's clock moved -28.98 s between the reads; real time at least 1.00 s
    assert "by_s=30.0" in back
    assert named(events, "clock_set_forward") == []
    assert control.jumps == []


@pytest.mark.parametrize("jitter", [0.5, -0.5, 0.9 * CLOCK_JUMP, -0.9 * CLOCK_JUMP])
def test_jitter_under_the_margin_is_nothing(events: list[str], jitter: float) -> None:
    world = World()
    control = Control(world)
    watch = ClockWatch("app", "r1", clock=world.clock)

    async def run() -> None:
        for i in range(8):
            await watch.next_wake(control)
            world.t += 1
            world.offset = jitter if i % 2 else 0.0

    asyncio.run(run())
    assert events == []
    assert control.jumps == []

"""The fake policy clock the unit tier runs on: sleepers wake in time order, a timeout
ends a wait only when the fake time passes it, and a test that fails does not hang."""

from __future__ import annotations

import asyncio

import pytest

from pgtimers.runner.clock import FakeClock, wait_any
from tests.unit.runner_parts import run


def test_sleepers_wake_in_time_order_at_their_own_time() -> None:
    async def go(clock: FakeClock) -> None:
        woke: list[tuple[str, float]] = []

        async def nap(name: str, seconds: float) -> None:
            await clock.sleep(seconds)
            woke.append((name, clock.now() - 1000))

        naps = [asyncio.create_task(nap(n, s)) for n, s in (("c", 3.0), ("a", 1.0), ("b", 2.0))]
        await clock.advance(2.5)
        assert woke == [("a", 1.0), ("b", 2.0)]
        await clock.advance(1.0)
        assert woke[-1] == ("c", 3.0)
        await asyncio.gather(*naps)

    run(go)


def test_waits_time_out_on_the_fake_time_only() -> None:
    async def go(clock: FakeClock) -> None:
        event = asyncio.Event()
        waiting = asyncio.create_task(wait_any(clock, event, timeout=5.0))
        await clock.settle()
        assert not waiting.done()  # no fake time has passed, whatever the real time
        await clock.advance(4.9)
        assert not waiting.done()
        await clock.advance(0.1)
        assert waiting.done()
        with pytest.raises(asyncio.TimeoutError):
            await clock.wait_for(asyncio.Event().wait(), 0.0)
        cond = asyncio.Condition()
        async with cond:
            timed = asyncio.create_task(clock.wait_for(cond.wait_for(lambda: False), 1.0))
            await clock.advance(1.0)
            with pytest.raises(asyncio.TimeoutError):
                await timed
            assert cond.locked()  # held again after the timeout, as asyncio.wait_for does

    run(go)


def test_a_failed_test_ends_with_its_sleepers() -> None:
    async def go(clock: FakeClock) -> None:
        async def closes_slowly() -> None:
            try:
                await asyncio.Event().wait()
            finally:
                await clock.sleep(1.0)  # a close that takes fake time

        closing = asyncio.create_task(closes_slowly())
        await clock.settle()
        assert not closing.done()
        raise KeyError("the test failed")

    with pytest.raises(KeyError):
        run(go)

"""The runner's policy clock: monotonic seconds and sleeps, injectable so that the budget,
parking, hand-off and backoff policies can be tested with a fake one and no real waits.

Wall-clock timestamps (log lines, what the database is told) are not this clock's."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Clock(Protocol):
    """Monotonic seconds (`now`), and sleeps and timeouts measured by the same clock."""

    def now(self) -> float:
        """Seconds on a monotonic scale."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Return after `seconds` of this clock."""
        ...

    async def wait_for(self, awaitable: Awaitable[T], timeout: float | None) -> T:
        """asyncio.wait_for on this clock: the result, or TimeoutError after `timeout`."""
        ...

    async def wait_first(
        self, futures: Iterable[asyncio.Future[Any]], timeout: float | None
    ) -> None:
        """Until one of `futures` is done or `timeout` seconds passed (None: no limit)."""
        ...


class RealClock:
    """time.monotonic and asyncio's own waits."""

    def now(self) -> float:
        """time.monotonic()."""
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        """asyncio.sleep(seconds)."""
        await asyncio.sleep(max(seconds, 0.0))

    async def wait_for(self, awaitable: Awaitable[T], timeout: float | None) -> T:
        """asyncio.wait_for."""
        return await asyncio.wait_for(awaitable, timeout)

    async def wait_first(
        self, futures: Iterable[asyncio.Future[Any]], timeout: float | None
    ) -> None:
        """asyncio.wait(FIRST_COMPLETED)."""
        limit = None if timeout is None else max(timeout, 0.0)
        await asyncio.wait(futures, timeout=limit, return_when=asyncio.FIRST_COMPLETED)


REAL: Clock = RealClock()


async def wait_any(clock: Clock, *events: asyncio.Event, timeout: float | None) -> None:
    """Until one of `events` is set or `timeout` seconds of `clock` passed (None: no
    limit)."""
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await clock.wait_first(waits, timeout)
    finally:
        for w in waits:
            w.cancel()


class FakeClock:
    """A clock for tests: time moves only by advance(); sleepers wake in time order, each
    given the loop's turns to act before the next one's time comes."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._seq = itertools.count()
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._over = False

    def now(self) -> float:
        """The fake time."""
        return self._now

    async def sleep(self, seconds: float) -> None:
        """Until advance() has moved the time by `seconds` (a turn of the loop for 0)."""
        if seconds <= 0 or self._over:
            await asyncio.sleep(0)
            return
        woken = asyncio.get_running_loop().create_future()
        # at least the next float: a sleep too short to move the time would never end
        until = max(self._now + seconds, math.nextafter(self._now, math.inf))
        heapq.heappush(self._sleepers, (until, next(self._seq), woken))
        await woken

    def over(self) -> None:
        """The test is over: every sleeper wakes now, and later sleeps end at once (so
        that a failed test's tasks, cancelled, can finish what they do in `finally`)."""
        self._over = True
        for _, _, woken in self._sleepers:
            if not woken.done():
                woken.set_result(None)
        self._sleepers.clear()

    async def wait_for(self, awaitable: Awaitable[T], timeout: float | None) -> T:
        """asyncio.wait_for on the fake time: the awaitable's result, or TimeoutError (the
        awaitable cancelled and finished first, so a Condition's lock is held again)."""
        task = asyncio.ensure_future(awaitable)
        if timeout is None:
            return await task
        if timeout <= 0:  # as asyncio.wait_for: out of time before it starts
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise asyncio.TimeoutError
        try:
            await self.wait_first([task], timeout)
        except asyncio.CancelledError:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise
        if task.done():
            return task.result()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        if task.cancelled():
            raise asyncio.TimeoutError
        return task.result()  # it finished as it was cancelled

    async def wait_first(
        self, futures: Iterable[asyncio.Future[Any]], timeout: float | None
    ) -> None:
        """Until one of `futures` is done or `timeout` fake seconds passed."""
        waits: list[asyncio.Future[Any]] = list(futures)
        timer = None if timeout is None else asyncio.ensure_future(self.sleep(max(timeout, 0.0)))
        try:
            await asyncio.wait(
                [*waits, *([timer] if timer else [])], return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            if timer is not None:
                timer.cancel()

    @property
    def sleepers(self) -> int:
        """Sleeps still waiting."""
        return sum(1 for _, _, f in self._sleepers if not f.done())

    async def settle(self, turns: int = 50) -> None:
        """Let the loop run what is ready now (the time does not move)."""
        for _ in range(turns):
            await asyncio.sleep(0)

    async def advance(self, seconds: float) -> None:
        """Move the time by `seconds`, waking each sleeper at its own time, in order."""
        end = self._now + seconds
        await self.settle()
        while True:
            while self._sleepers and self._sleepers[0][2].done():
                heapq.heappop(self._sleepers)  # cancelled
            if not self._sleepers or self._sleepers[0][0] > end:
                break
            self._now = max(self._now, self._sleepers[0][0])
            while self._sleepers and self._sleepers[0][0] <= self._now:
                _, _, woken = heapq.heappop(self._sleepers)
                if not woken.done():
                    woken.set_result(None)
            await self.settle()
        self._now = end
        await self.settle()

    async def run_until(self, done: Callable[[], bool], limit: float, step: float = 0.05) -> float:
        """Advance by `step` until done() (the fake seconds it took) or `limit` seconds
        passed (AssertionError)."""
        began = self._now
        await self.settle()
        while not done():
            if self._now - began >= limit:
                raise AssertionError(f"not done within {limit:g} s of the fake clock")
            await self.advance(step)
        return self._now - began

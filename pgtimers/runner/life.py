"""A database's signs of life for the watchdog, and the waits that show them: one owner of
`progress`, shared by its control session, parking and workers."""

from __future__ import annotations

import asyncio

from pgtimers.runner.clock import Clock, wait_any
from pgtimers.runner.serving import LOOK_EVERY


class Life:
    """The last sign of life of one database (`progress`, on `clock`), and pauses that show
    it at least every LOOK_EVERY seconds and end at `stopping`."""

    def __init__(self, clock: Clock, stopping: asyncio.Event) -> None:
        self.clock = clock
        self.stopping = stopping
        self.progress = clock.now()

    def alive(self) -> None:
        """A sign of life (a wait for a slot is one too)."""
        self.progress = self.clock.now()

    async def pause(self, seconds: float, wake: asyncio.Event | None = None) -> None:
        """Wait, showing life to the watchdog, unless stopping (or `wake` is set)."""
        deadline = self.clock.now() + seconds
        events = (self.stopping,) if wake is None else (self.stopping, wake)
        while not any(e.is_set() for e in events):
            self.progress = self.clock.now()
            left = deadline - self.progress
            if left <= 0:
                return
            await wait_any(self.clock, *events, timeout=min(left, LOOK_EVERY))

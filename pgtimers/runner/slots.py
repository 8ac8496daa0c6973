"""The slot hand-off of one database's workers: each takes a slot of its server's connection
budget (budget.py) before it connects and gives it back when it closes; an idle worker
gives its slot back when it is another database's turn (one holder for one waiter), and the
burst worker when a worker of its own database waits for one. The one owner of this
database's dealings with the budget for its workers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from pgtimers.runner.budget import SLICE, ConnectionBudget
from pgtimers.runner.clock import Clock


class SlotHolder(Protocol):
    """What the hand-off knows of a worker: whether it holds a slot, and since when."""

    has_slot: bool
    slot_since: float  # on the policy clock


class WorkerSlots:
    """One database's worker slots in the budget of its server (`key`: its DSN)."""

    def __init__(
        self, budget: ConnectionBudget, key: str, clock: Clock, alive: Callable[[], None]
    ) -> None:
        self.budget = budget
        self.key = key
        self.clock = clock
        self._alive = alive
        self.waiting = 0  # this database's workers waiting for a slot now

    @property
    def short(self) -> bool:
        """Whether the server's slots are short (somebody waits, or a database is parked)."""
        return self.budget.short

    async def take(self, worker: SlotHolder, stops: tuple[asyncio.Event, ...]) -> bool:
        """A slot for the worker, unless it holds one; False when one of `stops` came
        first."""
        if worker.has_slot:
            return True
        self.waiting += 1
        try:
            worker.has_slot = await self.budget.acquire(self.key, stops, self._alive)
        finally:
            self.waiting -= 1
        worker.slot_since = self.clock.now()
        return worker.has_slot

    def give_back(self, worker: SlotHolder) -> None:
        """The worker's connection closed: its slot (if any) goes to the next in turn."""
        if worker.has_slot:
            worker.has_slot = False
            self.budget.release(self.key)

    def yields(self, worker: SlotHolder, burst: bool, parked: bool) -> bool:
        """Whether an idle worker should wake to give its slot back: its database parked,
        another database's turn (it holds fewer), or, for the burst worker, a worker of
        its own database waits for one (the burst worker fires only while all of them
        run, so it must not keep them out)."""
        if not worker.has_slot:
            return False
        if parked or (burst and self.waiting > 0):
            return True
        return self.budget.others_waiting(self.key)

    def hand_off(self, worker: SlotHolder, burst: bool, parked: bool) -> bool:
        """An idle worker woken without work: whether it gives its slot back now (for
        another database, promised: one waiter makes one holder give one back)."""
        if not worker.has_slot:
            return False
        if parked or (burst and self.waiting > 0):
            return True
        return self.budget.take_turn(self.key)

    def after_batch(self, worker: SlotHolder, found_nothing: bool) -> bool:
        """Whether the worker gives its slot back after a batch of fires: while another
        database waits for one, when the batch found nothing or its slice is over."""
        if not found_nothing and self.clock.now() - worker.slot_since < SLICE:
            return False
        return self.budget.take_turn(self.key)

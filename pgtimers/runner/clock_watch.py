"""Telling a step of the server's clock from a late answer: each look of the control
session reads both clocks within one round trip (ours when the question left and when
the answer came, the server's in the answer), and a step is believed only when the
server's clock moved beyond what the round trips allow, by more than a margin."""

from __future__ import annotations

import datetime as dt
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pgtimers.runner import log
from pgtimers.runner.answers import Wake, parse_skips
from pgtimers.runner.queries import query

# seconds the server's clock may move beyond what our own allows before it counts as set
CLOCK_JUMP = 2.0


def elapsed_clock() -> float:
    """Seconds on a clock that only goes forward and counts the time a suspended host
    slept (Linux's CLOCK_BOOTTIME; elsewhere time.monotonic)."""
    # A host suspended between two looks, or during one, must make our elapsed time as
    # long as the server's: a clock that stopped while the host slept (CLOCK_MONOTONIC)
    # would see the server's clock run ahead by the whole sleep and call it a step.
    if sys.platform == "linux":
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    return time.monotonic()


class Fetches(Protocol):
    """What the clock watch needs of the control session (a test passes a fake)."""

    async def fetchrow(self, query: str, *args: Any) -> Any:
        """The first row."""

    async def fetchval(self, query: str, *args: Any) -> Any:
        """The first value of the first row."""


@dataclass(frozen=True)
class Look:
    """One look: our clock when the question left and when its answer came, and the
    server's clock in the answer (read somewhere between the two)."""

    sent: float
    received: float
    server: dt.datetime


@dataclass(frozen=True)
class Step:
    """The server's clock was set: `by` seconds beyond what real time allows (forward
    positive); for a step forward, the span of server time it jumped over."""

    by: float
    jumped_from: dt.datetime | None = None
    jumped_to: dt.datetime | None = None


def judge(before: Look, after: Look, margin: float = CLOCK_JUMP) -> Step | None:
    """Whether the server's clock was set between two looks, or only moved as time did."""
    moved = (after.server - before.server).total_seconds()
    # real time between the two server reads is within [shortest, longest]: the reads
    # fell somewhere inside their round trips, however late either answer came
    shortest = after.sent - before.received
    longest = after.received - before.sent
    if moved - longest > margin:
        start = before.server + dt.timedelta(seconds=longest)
        return Step(moved - longest, start, after.server)
    if shortest - moved > margin:
        return Step(moved - shortest)
    return None


class ClockWatch:
    """The looks of one control session, each judged against the one before: set
    forward, the due times jumped over are skipped; set back, it is only logged."""

    def __init__(
        self,
        database: str,
        runner_id: str,
        clock: Callable[[], float] = elapsed_clock,
        margin: float = CLOCK_JUMP,
    ) -> None:
        self.database = database
        self.runner_id = runner_id
        self._clock = clock
        self._margin = margin
        self._last: Look | None = None

    async def next_wake(self, control: Fetches) -> Wake:
        """Look (query next_wake: the server's clock, then what is due) and watch the clock."""
        sent = self._clock()
        row = await control.fetchrow(query("next_wake"))
        received = self._clock()
        assert row is not None  # next_wake always gives one row
        look = Look(sent, received, row[0])
        before, self._last = self._last, look
        if before is not None:
            step = judge(before, look, self._margin)
            if step is not None:
                await self._stepped(control, step, look.received - look.sent)
        return Wake(*row)

    async def _stepped(self, control: Fetches, step: Step, answer_s: float) -> None:
        if step.jumped_from is None:
            log.event(
                logging.WARNING,
                "clock_set_back",
                database=self.database,
                by_s=f"{-step.by:.1f}",
                note="due times are planned again from the clock; none runs twice",
            )
            return
        log.event(
            logging.WARNING,
            "clock_set_forward",
            database=self.database,
            by_s=f"{step.by:.1f}",
            answer_s=f"{answer_s:.1f}",
        )
        events = await control.fetchval(
            query("clock_jump"), step.jumped_from, step.jumped_to, self.runner_id
        )
        for skip in parse_skips(events):
            log.skip_event(self.database, skip.get("timer"), skip)

"""Timers held back because their run yielded: it waited for a lock longer than its lock wait
limit (timers._yielded), so its due time is still owed. A database's workers leave such a
timer out of their claims for a while (1 s, doubling to 30 s, until it runs) and go on to
other timers; held timers are tried again one at a time, so that timers behind one lock
keep one worker at most waiting on it. The due times a held timer misses are skipped by the
late rule with a reason that says it waited for a lock (late_note)."""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pgtimers.runner import log

HOLD_FIRST = 1.0  # the first hold after a run yielded; it doubles with each yield in a row
HOLD_MAX = 30.0
SAY_EVERY = 60.0  # one run_yielded line per timer at most this often
FORGET_AFTER = 600.0  # a hold that ended this long ago (the timer never seen again) goes


@dataclass
class _Hold:
    streak: int  # yields in a row
    own_until: float  # (clock) the end of its own backoff
    until: float  # (clock) when it may be claimed again: own_until, or later, in turn
    began: dt.datetime  # (wall) when the first of its yields in a row began to wait
    ended: dt.datetime  # (wall) `until`
    what: str  # for the skip reasons
    said_at: float  # (clock) its last run_yielded line
    unsaid: int = 0  # yields since that line


class Held:
    """The held-back timers of one database, shared by its workers. `clock` is
    time.monotonic and `wall` the wall clock (UTC) in the runner; tests pass fakes."""

    def __init__(
        self,
        database: Callable[[], str],
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.timezone.utc),
    ) -> None:
        self._database = database
        self._clock = clock
        self._wall = wall
        self._holds: dict[int, _Hold] = {}
        self._turn_at = 0.0  # (clock) when the next held timer may be tried

    def yielded(self, result: Mapping[str, Any]) -> float:
        """A run yielded (timers._yielded's result): hold its timer back; the hold (s)."""
        now, wall = self._clock(), self._wall()
        ident, waited = int(result["timer_id"]), int(result.get("waited_ms") or 0) / 1000
        old = self._holds.get(ident)
        streak = 1 if old is None else old.streak + 1
        hold = min(HOLD_FIRST * 2.0 ** (streak - 1), HOLD_MAX)
        own_until = now + hold
        # in turn: a held timer is tried once the one before it could have waited as long
        until = max(own_until, self._turn_at)
        self._turn_at = until + waited
        began = wall - dt.timedelta(seconds=waited) if old is None else old.began
        limit = result.get("lock_timeout")
        hold_ = _Hold(
            streak=streak,
            own_until=own_until,
            until=until,
            began=began,
            ended=wall + dt.timedelta(seconds=until - now),
            what=f"it waited for a lock longer than its lock wait limit ({limit})"
            " and the runner held it back",
            said_at=-SAY_EVERY if old is None else old.said_at,
            unsaid=1 if old is None else old.unsaid + 1,
        )
        self._holds[ident] = hold_
        if now - hold_.said_at >= SAY_EVERY:
            log.event(
                logging.WARNING,
                "run_yielded",
                timer=result.get("timer"),
                database=self._database(),
                due=result.get("due_at"),
                waited_s=f"{waited:.1f}",
                lock_timeout=limit,
                held_s=f"{until - now:.1f}",
                yields=hold_.unsaid,
                error=result.get("error"),
                note="waited for a lock: not a failure, the due time is still owed;"
                " other timers run meanwhile",
            )
            hold_.said_at, hold_.unsaid = now, 0
        return until - now

    def ran(self, ident: int) -> None:
        """A held timer ran: it is let be; the others' holds are their own again (the lock
        they wait on may be gone too)."""
        if self._holds.pop(ident, None) is None:
            return
        now, wall = self._clock(), self._wall()
        for hold in self._holds.values():
            if hold.until > now:
                hold.until = max(hold.own_until, now)
                hold.ended = wall + dt.timedelta(seconds=hold.until - now)
        self._turn_at = now

    def skip(self) -> list[int]:
        """The timers to leave out of claims now."""
        now = self._clock()
        gone = [i for i, h in self._holds.items() if now - h.until > FORGET_AFTER]
        for ident in gone:
            del self._holds[ident]
        return [i for i, h in self._holds.items() if h.until > now]

    def late_note(self, note: dict[str, Any] | None) -> dict[str, Any] | None:
        """The runner's note for the skip reasons (trouble.py's, `note`), with each held
        timer's own: {timers: {id: {from, to, what}}} (timers._late_reason)."""
        if not self._holds:
            return note
        timers = {
            str(i): {"from": h.began.isoformat(), "to": h.ended.isoformat(), "what": h.what}
            for i, h in self._holds.items()
        }
        return {**(note or {}), "timers": timers}
